// Tokenizer input at scale: 1 MB lines of prose, of one letter, of digits, of spaces, and of random bytes
// (invalid UTF-8 and NUL bytes) encode in time that grows about linearly (no quadratic blow-up in the pre-tokenizer
// regexes or the merge loops) and round-trip through decode. Uses llama.cpp's vocab-only GGUFs (shared/): starcoder
// (SmolLM2's BPE family), llama-bpe and llama-spm.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <string>

#include "common/assets.hpp"
#include "model/gguf.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/utf8.hpp"

namespace {

std::string vocab_path(const std::string& name) {
  return std::string(RKV_TEST_SHARED_DIR) + "/tokenizer-vectors/ggml-vocab-" + name + ".gguf";
}

/// `n` bytes made by repeating `unit` (cut at n).
std::string repeat(const std::string& unit, size_t n) {
  std::string s;
  s.reserve(n + unit.size());
  while (s.size() < n) s += unit;
  s.resize(n);
  return s;
}

/// `n` pseudo-random bytes (every value 0..255, NUL included; mostly invalid UTF-8).
std::string random_bytes(size_t n) {
  std::string s(n, '\0');
  uint64_t x = 88172645463325252ull;
  for (auto& c : s) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>(x >> 56);
  }
  return s;
}

struct Input {
  const char* name;
  std::string (*make)(size_t n);
};

const Input kInputs[] = {
    {"prose", [](size_t n) { return repeat("It is a truth universally acknowledged, that a single man in possession "
                                           "of a good fortune, must be in want of a wife. \xE2\x80\x94 caf\xC3\xA9 ", n); }},
    {"one letter", [](size_t n) { return repeat("a", n); }},
    {"digits", [](size_t n) { return repeat("0123456789", n); }},
    {"spaces", [](size_t n) { return repeat(" ", n); }},
    {"random bytes", [](size_t n) { return random_bytes(n); }},
};

/// CPU seconds of this process spent encoding `text` (not wall time: on a loaded machine the wall-time ratio of the
/// two sizes measured the load, and the linearity check failed at a ratio of 87 while the encoder was linear).
double encode_seconds(const rkv::Tokenizer& tok, const std::string& text, std::vector<int32_t>& ids) {
  auto cpu_now = [] {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  const double t0 = cpu_now();
  ids = tok.encode(text, false, false);
  return cpu_now() - t0;
}

class LongLines : public ::testing::TestWithParam<std::string> {};

TEST_P(LongLines, OneMegabyteLinesEncodeInLinearTimeAndRoundTrip) {
  const std::string path = vocab_path(GetParam());
  RKV_REQUIRE_ASSET(path);
  const rkv::GgufFile file(path);
  const rkv::Tokenizer tok = rkv::Tokenizer::from_gguf(file);
  const bool spm = GetParam() == "llama-spm";
  const size_t big = 1u << 20, small = big / 8;
  for (const Input& in : kInputs) {
    const std::string text = in.make(big);
    std::vector<int32_t> ids, small_ids;
    const double t_small = encode_seconds(tok, in.make(small), small_ids);
    const double t_big = encode_seconds(tok, text, ids);
    std::printf("[ long     ] %-10s %-12s 128 KiB: %7.3f s, 1 MiB: %7.3f s (%zu tokens), ratio %.1f\n",
                GetParam().c_str(), in.name, t_small, t_big, ids.size(), t_big / std::max(t_small, 1e-9));
    ASSERT_FALSE(ids.empty()) << in.name;
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.n_vocab()) << in.name;
    // 8x the input: linear is ~8x the time, quadratic ~64x. Only judged when the time is long enough to measure.
    if (t_big > 0.5) EXPECT_LT(t_big / t_small, 32.0) << in.name << ": encode time grows faster than linear";
    EXPECT_LT(t_big, 120.0) << in.name;
    // Round trip: valid UTF-8 comes back as it was; invalid bytes as U+FFFD per bad byte (BPE) or as the SPM
    // vocabulary's byte tokens (which give the bytes back).
    const std::string back = tok.decode(ids, false);
    if (in.make == kInputs[4].make && !spm) {
      // A BPE vocabulary that lacks some byte tokens (starcoder's has no token for the byte-level character of 0xF1,
      // for example) drops those bytes, as llama.cpp does (tokenizer.hpp): the text comes back as the sanitized
      // input with only such bytes deleted, so it is a subsequence of it, and few bytes are missing.
      const std::string expect = rkv::utf8::sanitize(text);
      size_t matched = 0;
      for (char c : expect)
        if (matched < back.size() && back[matched] == c) ++matched;
      std::printf("[ long     ] %-10s random bytes: %zu bytes dropped\n", GetParam().c_str(), expect.size() - back.size());
      EXPECT_EQ(matched, back.size()) << in.name << ": the decoded text is not the input with some bytes deleted";
      EXPECT_LT(expect.size() - back.size(), expect.size() / 100) << in.name;
      if (GetParam() == "llama-bpe") EXPECT_EQ(back, expect) << in.name;  // Llama 3 has all 256 byte tokens
    } else if (!spm) {
      EXPECT_EQ(back, text) << in.name;
    } else {
      EXPECT_EQ(back.size() >= text.size() ? back.substr(back.size() - text.size()) : back, text) << in.name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, LongLines, ::testing::Values("starcoder", "llama-bpe", "llama-spm"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
