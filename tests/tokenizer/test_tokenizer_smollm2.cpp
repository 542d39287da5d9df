// SmolLM2-135M-Instruct's tokenizer from its GGUF (label `model`): the ids llama.cpp gives for a few pages of Austen
// and for the three reference prompts (tests/fixtures/llamacpp, made through llama-cpp-python), special ids and the
// end-of-generation set as llama.cpp derives them, the chat template rendered like jinja2 renders the file's own
// template, and the chat prompt tokenized with special tokens parsed.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "common/assets.hpp"
#include "model/gguf.hpp"
#include "tokenizer/chat_template.hpp"
#include "tokenizer/jinja_reference.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

rkv::Tokenizer smollm2() {
  const rkv::GgufFile file(rkv_test::smollm2_gguf().string());
  return rkv::Tokenizer::from_gguf(file);
}

#define REQUIRE_SMOLLM2()                                         \
  do {                                                            \
    const std::filesystem::path path = rkv_test::smollm2_gguf();  \
    RKV_REQUIRE_ASSET(path);                                      \
  } while (0)

nlohmann::json fixture(const std::string& name) {
  std::ifstream f(std::string(RKV_TEST_SOURCE_DIR) + "/tests/fixtures/llamacpp/" + name);
  if (!f) throw std::runtime_error("missing fixture tests/fixtures/llamacpp/" + name);
  return nlohmann::json::parse(f);
}

TEST(SmolLM2Tokenizer, AustenPagesMatchLlamaCpp) {
  REQUIRE_SMOLLM2();
  const auto tok = smollm2();
  const auto fx = fixture("austen_tokens.json");
  ASSERT_FALSE(fx["add_bos"].get<bool>());
  const std::string text = fx["text"];
  const auto expected = fx["ids"].get<std::vector<int32_t>>();
  const auto got = tok.encode(text, false, fx["parse_special"].get<bool>());
  EXPECT_EQ(got, expected);
  std::size_t same = 0;
  while (same < std::min(got.size(), expected.size()) && got[same] == expected[same]) ++same;
  std::cout << "[ austen   ] " << fx["source"].get<std::string>() << ": " << text.size() << " bytes, " << got.size()
            << " ids, first " << same << " equal to llama.cpp's " << expected.size() << "\n";
  EXPECT_EQ(tok.decode(expected), text);
}

TEST(SmolLM2Tokenizer, ReferencePromptsMatchLlamaCpp) {
  REQUIRE_SMOLLM2();
  const auto tok = smollm2();
  const auto fx = fixture("logits.json");
  ASSERT_EQ(fx["prompts"].size(), 3u);
  for (const auto& p : fx["prompts"]) {
    const std::string text = p["text"];
    EXPECT_EQ(tok.encode(text, false, p["parse_special"].get<bool>()), p["ids"].get<std::vector<int32_t>>())
        << p["name"];
  }
  // The chat prompt was rendered by jinja2 from the GGUF's template: the C++ template gives the same text.
  const auto& chat = fx["prompts"][0];
  ASSERT_EQ(chat["name"], "chat");
  const auto t = rkv::ChatTemplate::for_tokenizer(tok);
  EXPECT_EQ(t.apply({{"user", "What is the capital of France?"}}, true), chat["text"].get<std::string>());
}

TEST(SmolLM2Tokenizer, SpecialTokens) {
  REQUIRE_SMOLLM2();
  const auto tok = smollm2();
  EXPECT_EQ(tok.n_vocab(), 49152);
  EXPECT_EQ(tok.description(), "bpe/smollm");
  EXPECT_EQ(tok.token_text(tok.bos()), "<|im_start|>");  // bos_token_id 1
  EXPECT_EQ(tok.token_text(tok.eos()), "<|im_end|>");    // eos_token_id 2
  EXPECT_FALSE(tok.add_bos_by_default());                // add_bos_token = false in the file
  // llama.cpp's rules give: eos <|im_end|> (2), <|endoftext|> (0) from the EOG text list, and <reponame> (4) as the
  // FIM repo token (its text is on llama.cpp's fim_rep list; FIM tokens end generation).
  EXPECT_EQ(tok.end_of_generation_ids(), (std::vector<int32_t>{0, 2, 4}));
  EXPECT_FALSE(tok.is_end_of_generation(1));
}

TEST(SmolLM2Tokenizer, ChatPromptTokensAndRoundTrip) {
  REQUIRE_SMOLLM2();
  const auto tok = smollm2();
  const auto t = rkv::ChatTemplate::for_tokenizer(tok);
  EXPECT_EQ(t.name(), "chatml");
  EXPECT_EQ(t.default_system_prompt(), "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  const std::string prompt = t.apply({{"user", "What is the capital of France?"}}, true);
  const auto ids = tok.encode(prompt, false, /*parse_special=*/true);
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids[0], 1);  // <|im_start|>
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 1), 3);  // system, user, assistant turns
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 2);  // two <|im_end|>
  EXPECT_EQ(tok.decode(ids), prompt);
  // Without parse_special the markers are plain text: no id 1 or 2 appears.
  const auto plain = tok.encode(prompt, false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 1), 0);
  EXPECT_EQ(tok.decode(plain), prompt);
}

TEST(SmolLM2Tokenizer, OwnChatTemplateMatchesJinja2) {
  REQUIRE_SMOLLM2();
  {
    const std::filesystem::path path = rkv_test::venv_python();
    RKV_REQUIRE_ASSET(path);
  }
  const auto tok = smollm2();
  const auto t = rkv::ChatTemplate::for_tokenizer(tok);
  const auto cases = rkv_test::chat_cases();
  const auto expected = rkv_test::render_with_jinja(tok.chat_template(), tok.token_text(tok.bos()),
                                                    tok.token_text(tok.eos()), cases);
  ASSERT_EQ(expected.size(), cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    ASSERT_FALSE(expected[i].error) << expected[i].text;  // ChatML renders any conversation
    EXPECT_EQ(t.apply(cases[i].messages, cases[i].add_generation_prompt), expected[i].text) << "case " << i;
  }
}

}  // namespace
