// Helpers shared by the libFuzzer targets in fuzz/ (and by their regression test, tests/fuzz/, which compiles the same
// target sources with a small driver instead of libFuzzer).
//
// A target defines `extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)`. Bad input must end in
// rkv::InputError (or return normally); anything else is a finding: a crash or sanitizer report, an uncaught
// exception (std::terminate aborts), a hang, or a broken property, which the target reports with fuzz_fail().
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace rkv_fuzz {

/// Prints "ripplekv fuzz: property violated: <what>" to stderr and aborts, so libFuzzer saves the input as a crash
/// and the regression test dies on it.
[[noreturn]] inline void fuzz_fail(const std::string& what) {
  std::fprintf(stderr, "ripplekv fuzz: property violated: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

/// Prints why an input was rejected when $RIPPLEKV_FUZZ_VERBOSE is set (to check that seeds get as far as they
/// should); silent otherwise, so fuzzing stays fast.
inline void note_rejection(const char* step, const std::exception& e) {
  static const bool verbose = std::getenv("RIPPLEKV_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "ripplekv fuzz: %s rejected the input: %s\n", step, e.what());
}

/// A folder private to this process, $TMPDIR/rkv-fuzz-<tag>-<pid> (TMPDIR defaults to /tmp), created on first use
/// and removed when the process exits normally. libFuzzer runs one input at a time per process, so a target may
/// reuse fixed file names inside it.
inline const std::filesystem::path& process_temp_dir(const std::string& tag) {
  struct Dir {
    std::filesystem::path path;
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static Dir dir = [&] {
    const char* tmp = std::getenv("TMPDIR");
    Dir d;
    d.path = std::filesystem::path(tmp && *tmp ? tmp : "/tmp") /
             ("rkv-fuzz-" + tag + "-" + std::to_string(static_cast<long>(::getpid())));
    std::error_code ec;
    std::filesystem::remove_all(d.path, ec);
    std::filesystem::create_directories(d.path);
    return d;
  }();
  return dir.path;
}

/// Writes `size` bytes to `path` (replacing it); aborts when the write fails (a broken harness, not a finding).
inline void write_file(const std::filesystem::path& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (size) out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) {
    std::fprintf(stderr, "ripplekv fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

}  // namespace rkv_fuzz
