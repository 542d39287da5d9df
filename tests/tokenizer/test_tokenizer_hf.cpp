// Loading tokenizers from Hugging Face model folders. The byte-level vocabulary test files are written out as
// tokenizer.json folders (vocabulary, merges and added tokens from the GGUF; the pre_tokenizer block each model's own
// tokenizer.json has), and every test case must give the same ids as through the GGUF. Errors are checked on
// hand-made folders.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/assets.hpp"
#include "core/errors.hpp"
#include "model/gguf.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/vector_files.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

/// The pre_tokenizer block of each model's tokenizer.json (gpt2, Meta-Llama-3-8B, Qwen2-7B, bigcode/starcoder).
json pre_tokenizer_of(const std::string& vocab) {
  const json byte_level_regex = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                                 {"use_regex", true}};
  const json byte_level_plain = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                                 {"use_regex", false}};
  auto split = [](const std::string& regex) {
    return json{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
  };
  if (vocab == "gpt-2") return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}};
  if (vocab == "llama-bpe")
    return {{"type", "Sequence"},
            {"pretokenizers",
             {split(R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"),
              byte_level_plain}}};
  if (vocab == "qwen2")
    return {{"type", "Sequence"},
            {"pretokenizers",
             {split(R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"),
              byte_level_plain}}};
  if (vocab == "starcoder")
    return {{"type", "Sequence"},
            {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}}, byte_level_regex}}};
  throw std::runtime_error("no pre_tokenizer for " + vocab);
}

/// Writes `dir`/tokenizer.json (+ tokenizer_config.json) from a vocabulary test GGUF.
void write_hf_folder(const std::string& gguf_path, const std::string& vocab, const fs::path& dir) {
  const rkv::GgufFile file(gguf_path);
  const auto& tokens = file.string_array_ref("tokenizer.ggml.tokens");
  const auto types = file.get_i32_array("tokenizer.ggml.token_type");
  json vocab_obj = json::object(), added = json::array();
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (types[i] == 3 || types[i] == 4) {
      added.push_back({{"id", i}, {"content", tokens[i]}, {"special", types[i] == 3}, {"lstrip", false},
                       {"rstrip", false}, {"normalized", false}, {"single_word", false}});
    } else {
      vocab_obj[tokens[i]] = i;
    }
  }
  json merges = json::array();
  const auto& m = file.string_array_ref("tokenizer.ggml.merges");
  for (std::size_t r = 0; r < m.size(); ++r) {
    if (r % 2 == 0) {
      merges.push_back(m[r]);  // the older "a b" form
    } else {
      const std::size_t sp = m[r].find(' ', 1);  // and the newer ["a", "b"] form, alternately
      merges.push_back(json::array({m[r].substr(0, sp), m[r].substr(sp + 1)}));
    }
  }
  json tj = {{"version", "1.0"},
             {"added_tokens", added},
             {"normalizer", vocab == "qwen2" ? json{{"type", "NFC"}} : json(nullptr)},
             {"pre_tokenizer", pre_tokenizer_of(vocab)},
             {"decoder", {{"type", "ByteLevel"}}},
             {"model",
              {{"type", "BPE"}, {"vocab", vocab_obj}, {"merges", merges}, {"ignore_merges", vocab == "llama-bpe"}}}};
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << tj.dump();
  json cfg = json::object();
  if (auto bos = file.get_u32("tokenizer.ggml.bos_token_id")) cfg["bos_token"] = tokens[*bos];
  if (auto eos = file.get_u32("tokenizer.ggml.eos_token_id")) cfg["eos_token"] = {{"content", tokens[*eos]}};
  cfg["chat_template"] = file.get_string_or("tokenizer.chat_template", "");
  std::ofstream(dir / "tokenizer_config.json") << cfg.dump();
}

fs::path temp_dir(const std::string& name) {
  return fs::temp_directory_path() / ("rkv_hf_" + std::to_string(::getpid()) + "_" + name);
}

class HfVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(HfVectors, EveryCaseMatchesThroughTokenizerJson) {
  const std::string path = (rkv_test::tokenizer_vectors_dir() / ("ggml-vocab-" + GetParam() + ".gguf")).string();
  RKV_REQUIRE_ASSET(path);
  const fs::path dir = temp_dir(GetParam());
  write_hf_folder(path, GetParam(), dir);
  const auto hf = rkv::Tokenizer::from_hf_dir(dir);
  fs::remove_all(dir);
  const rkv::GgufFile file(path);
  const auto gg = rkv::Tokenizer::from_gguf(file);
  EXPECT_EQ(hf.n_vocab(), gg.n_vocab());
  EXPECT_EQ(hf.bos(), gg.bos());
  EXPECT_EQ(hf.eos(), gg.eos());
  EXPECT_EQ(hf.end_of_generation_ids(), gg.end_of_generation_ids());
  EXPECT_EQ(hf.chat_template(), gg.chat_template());
  std::size_t ok = 0;
  const auto cases = rkv_test::read_vocab_cases(path);
  for (const auto& c : cases) {
    const auto got = hf.encode(c.text, false, false);
    EXPECT_EQ(got, c.ids) << GetParam() << ": '" << c.text << "'";
    ok += got == c.ids;
  }
  std::cout << "[ hf       ] " << GetParam() << " (" << hf.description() << "): " << ok << "/" << cases.size()
            << " cases match\n";
}

INSTANTIATE_TEST_SUITE_P(ByteLevel, HfVectors, ::testing::Values("gpt-2", "llama-bpe", "qwen2", "starcoder"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

/// A folder with a hand-written tokenizer.json (and optional other files); removed by the caller.
fs::path hf_folder(const std::string& name, const json& tokenizer, const json& config = nullptr,
                   const json& generation = nullptr) {
  const fs::path dir = temp_dir(name);
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << tokenizer.dump();
  if (!config.is_null()) std::ofstream(dir / "tokenizer_config.json") << config.dump();
  if (!generation.is_null()) std::ofstream(dir / "generation_config.json") << generation.dump();
  return dir;
}

json small_tokenizer() {
  json vocab = json::object();
  // Byte characters of 'a', 'b', ' ' (U+0120) and "ab".
  vocab["a"] = 0;
  vocab["b"] = 1;
  vocab["\xC4\xA0"] = 2;
  vocab["ab"] = 3;
  return {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b"}}}},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
          {"added_tokens",
           {{{"id", 4}, {"content", "<|eot|>"}, {"special", true}},
            {{"id", 5}, {"content", "<x>"}, {"special", false}, {"rstrip", true}}}}};
}

TEST(TokenizerHf, SmallFolderWithConfigs) {
  const fs::path dir = hf_folder("small", small_tokenizer(),
                                 {{"bos_token", nullptr}, {"eos_token", "<|eot|>"}, {"add_bos_token", false},
                                  {"chat_template", json::array({{{"name", "tool_use"}, {"template", "T"}},
                                                                 {{"name", "default"}, {"template", "D"}}})}},
                                 {{"eos_token_id", {4, 5}}});
  const auto tok = rkv::Tokenizer::from_path(dir);
  fs::remove_all(dir);
  EXPECT_EQ(tok.encode("ab ab<|eot|>", false, true), (std::vector<int32_t>{3, 2, 3, 4}));
  EXPECT_EQ(tok.encode("a<x>  b", false, false), (std::vector<int32_t>{0, 5, 1}));  // rstrip
  EXPECT_EQ(tok.eos(), 4);
  EXPECT_EQ(tok.end_of_generation_ids(), (std::vector<int32_t>{4, 5}));  // generation_config adds 5
  EXPECT_EQ(tok.chat_template(), "D");
  EXPECT_EQ(tok.decode({3, 2, 4}), "ab <|eot|>");
}

void expect_hf_error(const std::string& name, const json& tokenizer, const std::string& part) {
  const fs::path dir = hf_folder(name, tokenizer);
  try {
    rkv::Tokenizer::from_hf_dir(dir);
    ADD_FAILURE() << name << ": expected an InputError";
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << name << ": " << e.what();
  }
  fs::remove_all(dir);
}

TEST(TokenizerHf, UnsupportedOrMalformedFilesAreInputErrors) {
  json t = small_tokenizer();
  t["model"]["type"] = "WordPiece";
  expect_hf_error("wordpiece", t, "WordPiece");
  t = small_tokenizer();
  t["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}};
  expect_hf_error("metaspace", t, "Metaspace");
  t = small_tokenizer();
  t["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array()}};
  expect_hf_error("normalizer", t, "normalizer");
  t = small_tokenizer();
  t["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "x"}}}, {"behavior", "Isolated"}};
  expect_hf_error("no-bytelevel", t, "ByteLevel");
  t = small_tokenizer();
  t["model"]["merges"] = json::array({42});
  expect_hf_error("merges", t, "merges[0]");
  t = small_tokenizer();
  t["model"]["vocab"]["c"] = -3;
  expect_hf_error("negative-id", t, "invalid id");
  t = small_tokenizer();
  t["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"Regex", "(("}}}, {"behavior", "Isolated"}},
                                           {{"type", "ByteLevel"}}}}};
  expect_hf_error("bad-regex", t, "does not compile");

  const fs::path dir = temp_dir("badjson");
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << "{ not json";
  EXPECT_THROW(rkv::Tokenizer::from_hf_dir(dir), rkv::InputError);
  fs::remove(dir / "tokenizer.json");
  EXPECT_THROW(rkv::Tokenizer::from_hf_dir(dir), rkv::InputError);  // missing tokenizer.json
  fs::remove_all(dir);
}

}  // namespace
