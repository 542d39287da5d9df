// Sanitizer build only (ctest label sanitize): a plugin that writes one element past its output tensor is caught.
// Every plugin output is its own exactly-sized heap allocation (host/plugin/*_call.cpp), and the fixture plugin is
// itself built with -fsanitize=address, so AddressSanitizer reports a heap-buffer-overflow whose stack names the
// plugin's function and the host call it came through. Each case runs rkv_overflow_probe as a child process (ASan
// aborts the process it finds the error in).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace {

struct Outcome {
  int status = -1;
  std::string output;
};

Outcome probe(const std::string& kind) {
  const std::string cmd = "ASAN_OPTIONS=symbolize=1:detect_leaks=0 " RKV_OVERFLOW_PROBE " " RKV_OVERFLOW_LIBRARY " " +
                          kind + " 2>&1";
  Outcome o;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return o;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) o.output.append(buf.data(), n);
  const int rc = ::pclose(p);
  o.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
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
