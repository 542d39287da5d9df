// Error types shared by every part of the host.
//
// InputError: the user's input (a file, a TOML key, a tensor, a parameter) is wrong. The message names the file, key
// or tensor and what was expected. The CLI maps it to exit code 2; the C API to RKV_STATUS_INVALID_ARGUMENT.
// Any other std::exception is an internal error (exit code 1).
#pragma once
#include <stdexcept>
#include <string>

namespace rkv {

struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Thrown when a long operation notices that the caller cancelled it.
struct Cancelled : std::runtime_error {
  Cancelled() : std::runtime_error("cancelled") {}
};

}  // namespace rkv
