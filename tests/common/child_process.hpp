// Waiting for a program a test started (core/subprocess.hpp start_program) without letting a hang stall the suite.
#pragma once
#include <signal.h>
#include <sys/types.h>

#include "core/subprocess.hpp"

namespace rkv_test {

/// Waits for `pid` at most `limit` seconds; past it the child is killed (SIGKILL), reaped, and -2 is returned.
/// Otherwise what rkv::wait_program returns (exit status, 128 + signal, -1).
inline int finish(pid_t pid, double limit) {
  const int rc = rkv::wait_program(pid, limit);
  if (rc != -2) return rc;
  ::kill(pid, SIGKILL);
  rkv::wait_program(pid);
  return -2;
}

}  // namespace rkv_test
