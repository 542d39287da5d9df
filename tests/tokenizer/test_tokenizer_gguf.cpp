// Loading tokenizers from GGUF metadata: small hand-made files (tests/model/gguf_writer.hpp) for each rule and each
// error, so a wrong or missing key is a clear rkv::InputError naming it.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/errors.hpp"
#include "model/gguf.hpp"
#include "model/gguf_writer.hpp"
#include "tokenizer/byte_level.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

using Ids = std::vector<int32_t>;

/// A temporary GGUF file removed at the end of the test.
struct TempGguf {
  std::string path;
  explicit TempGguf(const rkv_test::GgufWriter& w) {
    static int n = 0;
    path = (std::filesystem::temp_directory_path() /
            ("rkv_tok_" + std::to_string(::getpid()) + "_" + std::to_string(n++) + ".gguf"))
               .string();
    w.write(path);
  }
  ~TempGguf() { std::filesystem::remove(path); }
};

std::vector<std::string> byte_tokens() {
  std::vector<std::string> t;
  for (int b = 0; b < 256; ++b) t.push_back(rkv::byte_level::encode(std::string(1, static_cast<char>(b))));
  return t;
}

/// A valid byte-level BPE vocabulary: ids 0..255 bytes, 256 "ab", 257 "<|endoftext|>" (control).
rkv_test::GgufWriter bpe_writer(const std::string& pre = "gpt-2", bool with_pre = true) {
  rkv_test::GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_string("tokenizer.ggml.model", "gpt2");
  if (with_pre) w.add_string("tokenizer.ggml.pre", pre);
  auto tokens = byte_tokens();
  tokens.push_back("ab");
  tokens.push_back("<|endoftext|>");
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  std::vector<int32_t> types(tokens.size(), 1);
  types.back() = 3;
  w.add_i32_array("tokenizer.ggml.token_type", types);
  w.add_string_array("tokenizer.ggml.merges", {"a b"});
  return w;
}

rkv::Tokenizer load(const rkv_test::GgufWriter& w) {
  TempGguf f(w);
  const rkv::GgufFile file(f.path);
  return rkv::Tokenizer::from_gguf(file);
}

/// Expects an InputError whose message contains every one of `parts`.
void expect_error(const rkv_test::GgufWriter& w, std::initializer_list<std::string> parts) {
  try {
    load(w);
    FAIL() << "expected an InputError";
  } catch (const rkv::InputError& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(TokenizerGguf, MinimalBpe) {
  auto w = bpe_writer();
  w.add_u32("tokenizer.ggml.eos_token_id", 257);
  const auto tok = load(w);
  EXPECT_EQ(tok.n_vocab(), 258);
  EXPECT_EQ(tok.description(), "bpe/gpt-2");
  EXPECT_EQ(tok.encode("abc", false, false), (Ids{256, 'c'}));
  EXPECT_EQ(tok.encode("<|endoftext|>", false, true), (Ids{257}));
  EXPECT_EQ(tok.eos(), 257);
  EXPECT_EQ(tok.bos(), -1);
  EXPECT_TRUE(tok.is_end_of_generation(257));
  EXPECT_FALSE(tok.add_bos_by_default());
  EXPECT_EQ(tok.chat_template(), "");
}

TEST(TokenizerGguf, MissingPreMeansDefaultAndAddBosKeyIsRead) {
  auto w = bpe_writer("", /*with_pre=*/false);
  w.add_u32("tokenizer.ggml.bos_token_id", 257);
  w.add_bool("tokenizer.ggml.add_bos_token", true);
  w.add_string("tokenizer.chat_template", "{{ x }}");
  const auto tok = load(w);
  EXPECT_EQ(tok.description(), "bpe/default");
  EXPECT_TRUE(tok.add_bos_by_default());
  EXPECT_EQ(tok.encode("ab", true, false), (Ids{257, 256}));
  EXPECT_EQ(tok.chat_template(), "{{ x }}");
}

TEST(TokenizerGguf, OutOfRangeSpecialIdIsIgnored) {
  auto w = bpe_writer();
  w.add_u32("tokenizer.ggml.bos_token_id", 9999);
  EXPECT_EQ(load(w).bos(), -1);
}

TEST(TokenizerGguf, Llama3FamilyDefaultsToBos) {
  auto w = bpe_writer("llama-bpe");
  w.add_u32("tokenizer.ggml.bos_token_id", 257);
  EXPECT_TRUE(load(w).add_bos_by_default());
}

TEST(TokenizerGguf, MissingModelKey) {
  rkv_test::GgufWriter w;
  w.add_string_array("tokenizer.ggml.tokens", {"a"});
  expect_error(w, {"tokenizer.ggml.model"});
}

TEST(TokenizerGguf, UnsupportedModel) {
  rkv_test::GgufWriter w;
  w.add_string("tokenizer.ggml.model", "bert");
  w.add_string_array("tokenizer.ggml.tokens", {"a"});
  expect_error(w, {"'bert'", "gpt2", "llama"});
}

TEST(TokenizerGguf, UnknownPreTokenizerListsTheSupportedOnes) {
  expect_error(bpe_writer("made-up"), {"unknown pre-tokenizer 'made-up'", "smollm", "llama-bpe", "qwen2"});
  expect_error(bpe_writer("kimi-k2"), {"'kimi-k2'", "custom code"});
}

TEST(TokenizerGguf, MissingOrMalformedArrays) {
  {
    rkv_test::GgufWriter v;
    v.add_string("tokenizer.ggml.model", "gpt2");
    v.add_string_array("tokenizer.ggml.tokens", byte_tokens());
    expect_error(v, {"tokenizer.ggml.merges"});  // BPE without merges
  }
  {
    rkv_test::GgufWriter v;
    v.add_string("tokenizer.ggml.model", "gpt2");
    v.add_string_array("tokenizer.ggml.tokens", byte_tokens());
    v.add_string_array("tokenizer.ggml.merges", {"ab"});
    expect_error(v, {"tokenizer.ggml.merges[0]", "'ab'"});
  }
  {
    rkv_test::GgufWriter v;
    v.add_string("tokenizer.ggml.model", "gpt2");
    v.add_string_array("tokenizer.ggml.tokens", byte_tokens());
    v.add_string_array("tokenizer.ggml.merges", {});
    v.add_string_array("tokenizer.ggml.token_type", {"normal"});
    expect_error(v, {"tokenizer.ggml.token_type"});
  }
  {
    rkv_test::GgufWriter v;
    v.add_string("tokenizer.ggml.model", "llama");
    v.add_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
    v.add_f32_array("tokenizer.ggml.scores", {0.0f, 0.0f});
    expect_error(v, {"tokenizer.ggml.scores", "2 entries for 3 tokens"});
  }
  {
    rkv_test::GgufWriter v;
    v.add_string("tokenizer.ggml.model", "llama");
    v.add_string("tokenizer.ggml.tokens", "not an array");
    expect_error(v, {"tokenizer.ggml.tokens"});
  }
  {
    rkv_test::GgufWriter v;
    v.add_string("tokenizer.ggml.model", "gpt2");
    v.add_string_array("tokenizer.ggml.tokens", {"a", "b", "a"});
    v.add_string_array("tokenizer.ggml.merges", {});
    expect_error(v, {"duplicate token", "'a'", "0 and 2"});
  }
}

TEST(TokenizerGguf, TruncatedFileIsAnInputError) {
  auto bytes = bpe_writer().bytes();
  bytes.resize(bytes.size() / 2);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("rkv_tok_trunc_" + std::to_string(::getpid()) + ".gguf")).string();
  rkv_test::GgufWriter::write_file(path, bytes);
  EXPECT_THROW(rkv::Tokenizer::from_path(path), rkv::InputError);
  std::filesystem::remove(path);
  EXPECT_THROW(rkv::Tokenizer::from_path("/nonexistent/model.gguf"), rkv::InputError);
}

TEST(TokenizerGguf, SpmDefaultsAndSpacePrefixKey) {
  rkv_test::GgufWriter w;
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\xE2\x96\x81" "a", "a"});
  w.add_f32_array("tokenizer.ggml.scores", {0, 0, 0, -1, -2});
  w.add_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 1, 1});
  {
    const auto tok = load(w);
    EXPECT_EQ(tok.bos(), 1);  // llama.cpp's SPM defaults
    EXPECT_EQ(tok.eos(), 2);
    EXPECT_EQ(tok.unk(), 0);
    EXPECT_TRUE(tok.add_bos_by_default());
    EXPECT_EQ(tok.encode("a", true, false), (Ids{1, 3}));  // "▁a"
    EXPECT_EQ(tok.decode({3}), "a");
  }
  w.add_bool("tokenizer.ggml.add_space_prefix", false);
  const auto tok = load(w);
  EXPECT_EQ(tok.encode("a", false, false), (Ids{4}));
  EXPECT_EQ(tok.decode({3}), " a");
  // No byte tokens: a character outside the vocabulary becomes <unk>.
  EXPECT_EQ(tok.encode("ab", false, false), (Ids{4, 0}));
}

}  // namespace
