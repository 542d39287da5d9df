// Every case of every llama.cpp vocabulary test vector (../shared/tokenizer-vectors: ggml-vocab-*.gguf with .inp/.out,
// made by llama.cpp's tests/test-tokenizer-0 against the Hugging Face tokenizers) must give exactly the expected ids,
// with add_bos = false and parse_special = false as test-tokenizer-0 calls llama_tokenize; decoding the expected ids
// must give the input text back.
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <random>
#include <set>

#include "common/assets.hpp"
#include "model/gguf.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/utf8.hpp"
#include "tokenizer/vector_files.hpp"

namespace {

const std::vector<std::string> kVocabs = {"gpt-2", "llama-bpe", "llama-spm", "phi-3", "qwen2", "starcoder"};

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

std::string path_of(const std::string& vocab) {
  return (rkv_test::tokenizer_vectors_dir() / ("ggml-vocab-" + vocab + ".gguf")).string();
}

class VocabVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabVectors, EveryCaseMatchesExactly) {
  const std::string path = path_of(GetParam());
  RKV_REQUIRE_ASSET(path);
  const rkv::GgufFile file(path);
  const rkv::Tokenizer tok = rkv::Tokenizer::from_gguf(file);
  const auto cases = rkv_test::read_vocab_cases(path);
  ASSERT_FALSE(cases.empty());
  std::size_t ok = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto got = tok.encode(cases[i].text, /*add_bos=*/false, /*parse_special=*/false);
    EXPECT_EQ(got, cases[i].ids) << GetParam() << " case " << i << " '" << cases[i].text << "'\n  got:      "
                                 << show(got) << "\n  expected: " << show(cases[i].ids);
    ok += got == cases[i].ids;
  }
  std::cout << "[ vectors  ] " << GetParam() << " (" << tok.description() << "): " << ok << "/" << cases.size()
            << " cases match\n";
}

TEST_P(VocabVectors, ExpectedIdsDecodeToTheInput) {
  const std::string path = path_of(GetParam());
  RKV_REQUIRE_ASSET(path);
  const rkv::GgufFile file(path);
  const rkv::Tokenizer tok = rkv::Tokenizer::from_gguf(file);
  for (const auto& c : rkv_test::read_vocab_cases(path)) {
    EXPECT_EQ(tok.decode(c.ids), c.text) << GetParam() << ": ids " << show(c.ids);
    EXPECT_EQ(tok.decode(tok.encode(c.text, false, false)), c.text) << GetParam();
  }
}

INSTANTIATE_TEST_SUITE_P(All, VocabVectors, ::testing::ValuesIn(kVocabs),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

// Every vocabulary in the folder is one of the above, so a new vector file cannot be skipped silently.
TEST(VocabVectorsFolder, EveryVocabularyIsTested) {
  // (The variable is named `path` because RKV_REQUIRE_ASSET's parameter is: any other name breaks its expansion.)
  const std::filesystem::path path = rkv_test::tokenizer_vectors_dir();
  RKV_REQUIRE_ASSET(path);
  const std::set<std::string> tested(kVocabs.begin(), kVocabs.end());
  for (const auto& entry : std::filesystem::directory_iterator(path)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("ggml-vocab-", 0) != 0 || entry.path().extension() != ".gguf") continue;
    const std::string vocab = name.substr(11, name.size() - 11 - 5);
    EXPECT_TRUE(tested.count(vocab)) << name << " has no test";
  }
}

}  // namespace

namespace {

/// Random byte strings mixing ASCII words, whitespace runs, digits, multi-byte characters, invalid UTF-8, NUL bytes and
/// special-token texts (fixed seed).
std::vector<std::string> random_texts(std::size_t n) {
  const std::vector<std::string> atoms = {
      "the", " cat", "'s", "'LL", "123456", " ", "  ", "\t", "\n", "\r\n", "\n\n\n", "\xC2\xA0", "\xE2\x80\x83",
      "\xC3\xA9t\xC3\xA9", "\xD0\xBD\xD0\xB5\xD1\x89\xD0\xBE", "\xE6\x88\x91\xE6\x83\xB3", "\xF0\x9F\xA6\x99",
      "\xE1\x9E\x80\xE1\x9E\xB6", "!?", "...", "(x)", std::string("\0", 1), "\xFF", "\xE2\x82", "\x80", "\xC0\xAF",
      "\xED\xA0\x80", "<|endoftext|>", "<s>", "</s>", "<|im_start|>", "<|", "|>", "\xE2\x96\x81"};
  std::mt19937 rng(12345);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < n; ++i) {
    std::string s;
    const int len = std::uniform_int_distribution<int>(0, 24)(rng);
    for (int k = 0; k < len; ++k) s += atoms[std::uniform_int_distribution<std::size_t>(0, atoms.size() - 1)(rng)];
    out.push_back(s);
  }
  return out;
}

// encode() never fails on any byte string, and decode(encode(text)) gives the text back: exactly for the SPM
// vocabulary (byte fallback; texts holding U+2581 are not compared), and with invalid bytes replaced by U+FFFD for byte-level BPE (also with special tokens
// parsed, since decode renders them as their text).
TEST_P(VocabVectors, RandomBytesRoundTrip) {
  const std::string path = path_of(GetParam());
  RKV_REQUIRE_ASSET(path);
  const rkv::GgufFile file(path);
  const rkv::Tokenizer tok = rkv::Tokenizer::from_gguf(file);
  const bool spm = tok.type() == rkv::VocabType::spm;
  for (const std::string& text : random_texts(300)) {
    const auto ids = tok.encode(text, false, false);
    const auto ids_special = tok.encode(text, true, true);
    for (int32_t id : ids_special) ASSERT_TRUE(id >= 0 && id < tok.n_vocab());
    if (GetParam() == "phi-3") continue;  // phi-3's user-defined tokens strip the whitespace after them
    if (spm) {
      // A U+2581 in the input is SentencePiece's own space mark and may come back as a space: not compared.
      if (text.find("\xE2\x96\x81") == std::string::npos) EXPECT_EQ(tok.decode(ids), text);
    } else {
      EXPECT_EQ(tok.decode(ids), rkv::utf8::sanitize(text));
      EXPECT_EQ(tok.decode(tok.encode(text, false, true)), rkv::utf8::sanitize(text));
    }
  }
}

}  // namespace
