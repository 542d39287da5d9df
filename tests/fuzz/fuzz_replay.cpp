// Replays the fuzz corpora through the SAME fuzz target source (fuzz/fuzz_<target>.cpp, compiled into this test with
// a plain driver instead of libFuzzer): every checked-in seed (fuzz/corpus/<target>/) and every input that once
// crashed or hung a target (fuzz/regressions/<target>/). An input that breaks the target again aborts or throws here,
// so the test fails; each file's name is printed before it runs, so the log names the culprit.
//
// Built once per target with RKV_FUZZ_TARGET="<target>" and RKV_FUZZ_SUITE=Fuzz<Target> (tests/fuzz/CMakeLists.txt), so
// each target's tests have their own ctest names (FuzzGguf.SeedCorpus, FuzzGguf.Regressions, ...).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/assets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

/// Runs every file of `dir` through the target; returns how many ran. Each input must finish within 10 s (the
/// per-input timeout scripts/fuzz.sh gives libFuzzer).
size_t replay(const fs::path& dir) {
  size_t n = 0;
  for (const fs::path& f : files_in(dir)) {
    std::ifstream in(f, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replaying %s (%zu bytes)\n", f.c_str(), bytes.size());
    const auto t0 = std::chrono::steady_clock::now();
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(s, 10.0) << f << " took " << s << " s";
    ++n;
  }
  return n;
}

const fs::path kFuzzDir = fs::path(RKV_TEST_SOURCE_DIR) / "fuzz";

/// The tokenizer target needs its vocabularies: the SmolLM2 GGUF (asset cache) and llama.cpp's SPM vocabulary
/// (shared tokenizer vectors), as scripts/fuzz.sh gives it.
bool prepare_target() {
  if (std::string(RKV_FUZZ_TARGET) != "tokenizer") return true;
  const fs::path bpe = rkv_test::smollm2_gguf();
  const fs::path spm = rkv_test::tokenizer_vectors_dir() / "ggml-vocab-llama-spm.gguf";
  if (!fs::exists(bpe) || !fs::exists(spm)) return false;
  ::setenv("RIPPLEKV_FUZZ_VOCABS", (bpe.string() + ":" + spm.string()).c_str(), 1);
  return true;
}

#define RKV_REQUIRE_TARGET_ASSETS()                                                   \
  do {                                                                                \
    if (!prepare_target()) {                                                          \
      RKV_REQUIRE_ASSET(rkv_test::smollm2_gguf());                                    \
      RKV_REQUIRE_ASSET(rkv_test::tokenizer_vectors_dir() / "ggml-vocab-llama-spm.gguf"); \
    }                                                                                 \
  } while (0)

TEST(RKV_FUZZ_SUITE, SeedCorpus) {
  RKV_REQUIRE_TARGET_ASSETS();
  const fs::path dir = kFuzzDir / "corpus" / RKV_FUZZ_TARGET;
  EXPECT_GT(replay(dir), 0u) << "no seed files in " << dir;
}

TEST(RKV_FUZZ_SUITE, Regressions) {
  RKV_REQUIRE_TARGET_ASSETS();
  const fs::path dir = kFuzzDir / "regressions" / RKV_FUZZ_TARGET;
  const size_t n = replay(dir);
  if (n == 0) GTEST_SKIP() << "no regression inputs in " << dir;
}

}  // namespace
