// Sanitizer build only (ctest label sanitize): a plugin that writes one element past its output tensor is caught.
// Every plugin output is its own exactly-sized heap allocation (host/plugin/*_call.cpp), and the fixture plugin is
// itself built with -fsanitize=address, so AddressSanitizer reports a heap-buffer-overflow whose stack names the
// plugin's function and the host call it came through. Each case runs rkv_overflow_probe as a child process (ASan
// aborts the process it finds the error in).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/atomic_file.hpp"
#include "core/subprocess.hpp"

namespace {

struct Outcome {
  int status = -1;
  std::string output;
};

/// Runs the probe with an argument vector (no shell: core/subprocess.hpp) and ASAN_OPTIONS set for it (the child
/// inherits this process's environment, restored afterwards).
Outcome probe(const std::string& kind) {
  const char* old_options = std::getenv("ASAN_OPTIONS");
  const std::string saved = old_options ? old_options : "";
  ::setenv("ASAN_OPTIONS", "symbolize=1:detect_leaks=0", 1);
  const std::string log =
      (std::filesystem::temp_directory_path() / ("rkv_overflow_" + kind + "_" + std::to_string(::getpid()))).string();
  Outcome o;
  o.status = rkv::run_program({RKV_OVERFLOW_PROBE, RKV_OVERFLOW_LIBRARY, kind}, "", log);
  if (old_options) ::setenv("ASAN_OPTIONS", saved.c_str(), 1);
  else ::unsetenv("ASAN_OPTIONS");
  try {
    o.output = rkv::read_file(log);
  } catch (const std::exception&) {
  }
  std::remove(log.c_str());
  return o;
}

/// `method`: the plugin class's method ("score"); the frame reads "in score .../overflow_plugin.cpp:N" when inlined
/// into the SDK's wrapper, or "in OverflowScorer::score(...)" otherwise.
void expect_caught(const std::string& kind, const std::string& method, const std::string& host_frame,
                   const std::string& write_size) {
  const Outcome o = probe(kind);
  EXPECT_NE(o.status, 0) << o.output;
  EXPECT_EQ(o.output.find("no overflow detected"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("ERROR: AddressSanitizer: heap-buffer-overflow"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("WRITE of size " + write_size), std::string::npos) << o.output;
  // The plugin's own function ...
  EXPECT_NE(o.output.find("overflow_plugin.cpp"), std::string::npos) << o.output;
  EXPECT_TRUE(o.output.find("in " + method + " ") != std::string::npos ||
              o.output.find("::" + method + "(") != std::string::npos)
      << o.output;
  EXPECT_NE(o.output.find(host_frame), std::string::npos) << o.output;    // ... called by the host's call path
  EXPECT_NE(o.output.find("0 bytes to the right of"), std::string::npos) << o.output;  // right past the output
}

TEST(OutputOverflow, ScorerWritingPastItsScoresIsCaught) {
  expect_caught("scorer", "score", "rkv::run_scorer", "4");
}

TEST(OutputOverflow, AllocatorWritingPastItsBudgetsIsCaught) {
  expect_caught("allocator", "allocate", "rkv::run_allocator", "8");
}

TEST(OutputOverflow, SignalWritingPastItsProfileIsCaught) {
  expect_caught("signal", "profile", "rkv::run_signal", "8");
}

}  // namespace
