// Bytes whose byte-level character has no token in a BPE vocabulary are dropped, as llama.cpp drops them (found by
// fuzz/fuzz_tokenizer.cpp: SmolLM2 has no token for 0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1, 0xF1, 0xF2,
// 0xF5..0xFF, and "a\x16b" used to give [a, <unk>, b]). Expected ids: llama-cpp-python 0.3 (llama.cpp's
// llama_tokenize) on the same GGUF, vocab_only=True, add_bos=False, special=False.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/assets.hpp"
#include "tokenizer/tokenizer.hpp"

TEST(BpeMissingBytes, DroppedAsLlamaCppDoes) {
  RKV_REQUIRE_ASSET(rkv_test::smollm2_gguf());
  const rkv::Tokenizer tok = rkv::Tokenizer::from_path(rkv_test::smollm2_gguf());
  struct Case {
    std::string text;
    std::vector<int32_t> ids;
    std::string decoded;  // the text without the dropped bytes
  };
  const std::vector<Case> cases = {
      {"a\x16" "b", {81, 82}, "ab"},
      {"\x16", {}, ""},
      {"x\xF1\x80\x80\x80y", {104, 218, 218, 218, 105}, "x\x80\x80\x80y"},  // U+40000: its lead byte has no token
      {"I\x04\x06\x13\x14\x1D!", {57, 17}, "I!"},
      {"ab", {369}, "ab"},
  };
  for (const Case& c : cases) {
    const std::vector<int32_t> ids = tok.encode(c.text, false, false);
    EXPECT_EQ(ids, c.ids) << "text of " << c.text.size() << " bytes";
    EXPECT_EQ(tok.decode(ids), c.decoded);
  }
}
