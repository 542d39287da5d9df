// SmolLM2-135M-Instruct's tokenizer from its GGUF (label `model`): special ids and end-of-generation set as llama.cpp
// derives them, the chat template rendered like jinja2 renders the file's own template, and the chat prompt
// tokenized with special tokens parsed.
#include <gtest/gtest.h>

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
