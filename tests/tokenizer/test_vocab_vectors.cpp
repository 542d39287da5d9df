// Every case of every llama.cpp vocabulary test vector (../shared/tokenizer-vectors: ggml-vocab-*.gguf with .inp/.out,
// made by llama.cpp's tests/test-tokenizer-0 against the Hugging Face tokenizers) must give exactly the expected ids,
// with add_bos = false and parse_special = false as test-tokenizer-0 calls llama_tokenize; decoding the expected ids
// must give the input text back.
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <set>

#include "common/assets.hpp"
#include "model/gguf.hpp"
#include "tokenizer/tokenizer.hpp"
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
