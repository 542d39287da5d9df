// Chat templates: family detection, errors, Python-style strip, and the rendering of every family compared with
// jinja2 on the reference templates (tests/tokenizer/fixtures/chat_templates.json, and the template inside the Qwen2
// vocabulary test file). The jinja2 comparisons need the reference venv (scripts/fetch-assets) and skip without it.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "common/assets.hpp"
#include "core/errors.hpp"
#include "model/gguf.hpp"
#include "tokenizer/chat_template.hpp"
#include "tokenizer/jinja_reference.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

nlohmann::json reference_templates() {
  std::ifstream f(std::string(RKV_TEST_SOURCE_DIR) + "/tests/tokenizer/fixtures/chat_templates.json");
  return nlohmann::json::parse(f);
}

std::string qwen2_vocab_path() {
  return (rkv_test::tokenizer_vectors_dir() / "ggml-vocab-qwen2.gguf").string();
}

/// Compares ChatTemplate::apply with jinja2 on every case: same text, or both fail.
void expect_same_as_jinja(const rkv::ChatTemplate& t, const std::string& jinja, const std::string& bos,
                          const std::string& eos) {
  const auto cases = rkv_test::chat_cases();
  const auto expected = rkv_test::render_with_jinja(jinja, bos, eos, cases);
  ASSERT_EQ(expected.size(), cases.size());
  int compared = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    std::string what = t.name() + " case " + std::to_string(i / 2) + (cases[i].add_generation_prompt ? " +gen" : "");
    if (expected[i].error) {
      EXPECT_THROW(t.apply(cases[i].messages, cases[i].add_generation_prompt), rkv::InputError)
          << what << ": jinja2 raised " << expected[i].text;
    } else {
      std::string got;
      EXPECT_NO_THROW(got = t.apply(cases[i].messages, cases[i].add_generation_prompt)) << what;
      EXPECT_EQ(got, expected[i].text) << what;
    }
    ++compared;
  }
  EXPECT_EQ(compared, 20);
}

TEST(ChatTemplate, DetectsTheReferenceFamilies) {
  const auto refs = reference_templates();
  for (const auto& name : {"llama3", "llama2", "mistral-v0.1", "mistral-v0.2", "gemma-7b-it", "phi-3-mini", "phi-3-medium"}) {
    const auto& r = refs[name];
    const auto t = rkv::ChatTemplate::detect(r["template"].get<std::string>(), r["bos"], r["eos"]);
    EXPECT_EQ(t.name(), r["family"].get<std::string>()) << name;
  }
}

TEST(ChatTemplate, ChatmlDefaultSystemPromptComesFromTheTemplate) {
  // SmolLM2's template text (GGUF tokenizer.chat_template), newline written as a real newline.
  const std::string smollm2 =
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
      "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' "
      "+ message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt "
      "%}{{ '<|im_start|>assistant\n' }}{% endif %}";
  const auto t = rkv::ChatTemplate::detect(smollm2, "<|im_start|>", "<|im_end|>");
  EXPECT_EQ(t.name(), "chatml");
  EXPECT_EQ(t.default_system_prompt(), "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  // Worked by hand from the template: the default system block, the message, the generation prompt.
  EXPECT_EQ(t.apply({{"user", "Hi"}}, true),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t.apply({{"system", "S"}, {"user", "Hi"}}, false),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
  // The same prompt written with the escape \n inside the Jinja string.
  const auto escaped = rkv::ChatTemplate::detect("{{ '<|im_start|>system\\nBe kind.<|im_end|>\\n' }}", "", "");
  EXPECT_EQ(escaped.default_system_prompt(), "Be kind.");
  // A plain ChatML template has none.
  const auto plain = rkv::ChatTemplate::by_name("chatml", "", "", "");
  EXPECT_EQ(plain.apply({{"user", "Hi"}}, false), "<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplate, HandWorkedLlama2AndMistral) {
  const auto l2 = rkv::ChatTemplate::by_name("llama2", "", "<s>", "</s>");
  EXPECT_EQ(l2.apply({{"system", "S"}, {"user", " u1 "}, {"assistant", "a1"}, {"user", "u2"}}, true),
            "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\n u1 [/INST] a1 </s><s>[INST] u2 [/INST]");  // strip() is outer only
  EXPECT_THROW(l2.apply({}, true), rkv::InputError);  // the template reads messages[0]
  EXPECT_THROW(l2.apply({{"user", "a"}, {"user", "b"}}, false), rkv::InputError);
  const auto m = rkv::ChatTemplate::by_name("mistral", "", "<s>", "</s>");
  EXPECT_EQ(m.apply({{"user", "u1"}, {"assistant", "a1"}, {"user", "u2"}}, true),
            "<s>[INST] u1 [/INST]a1</s>[INST] u2 [/INST]");
  EXPECT_THROW(m.apply({{"system", "s"}, {"user", "u"}}, false), rkv::InputError);
}

TEST(ChatTemplate, HandWorkedGemmaAndPhi3) {
  const auto g = rkv::ChatTemplate::by_name("gemma", "{{ bos_token }}<start_of_turn>", "<bos>", "<eos>");
  EXPECT_EQ(g.apply({{"user", " u1 "}, {"assistant", "a1"}, {"user", "u2"}}, true),
            "<bos><start_of_turn>user\nu1<end_of_turn>\n<start_of_turn>model\na1<end_of_turn>\n"
            "<start_of_turn>user\nu2<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_THROW(g.apply({{"system", "s"}, {"user", "u"}}, false), rkv::InputError);
  EXPECT_THROW(g.apply({{"user", "a"}, {"user", "b"}}, false), rkv::InputError);
  const auto p = rkv::ChatTemplate::by_name("phi3", "", "<s>", "<|endoftext|>");  // Phi-3-medium: no BOS
  EXPECT_EQ(p.apply({{"system", "dropped"}, {"user", "u1"}, {"assistant", " a1 "}, {"user", "u2"}}, false),
            "<|user|>\nu1<|end|>\n<|assistant|>\n a1 <|end|>\n<|user|>\nu2<|end|>\n<|assistant|>\n");
}

TEST(ChatTemplate, UnknownTemplatesAndNamesListTheKnownOnes) {
  try {
    rkv::ChatTemplate::detect("{% for m in messages %}<|turn|>{{ m['content'] }}{% endfor %}", "", "");
    FAIL() << "expected an error";
  } catch (const rkv::InputError& e) {
    const std::string msg = e.what();
    for (const auto& n : rkv::ChatTemplate::known_names()) EXPECT_NE(msg.find(n), std::string::npos) << msg;
    EXPECT_NE(msg.find("--chat-template"), std::string::npos) << msg;
  }
  EXPECT_THROW(rkv::ChatTemplate::by_name("vicuna", "", "", ""), rkv::InputError);
  // Llama 3.1-style templates (dated system preamble, tools) are not the llama3 family.
  EXPECT_THROW(rkv::ChatTemplate::detect("<|start_header_id|><|end_header_id|>Cutting Knowledge Date: ", "", ""),
               rkv::InputError);
}

TEST(ChatTemplate, PythonStrip) {
  EXPECT_EQ(rkv::python_strip("  a b \n"), "a b");
  EXPECT_EQ(rkv::python_strip("\xE3\x80\x80\xC2\xA0x\xE2\x80\x83\x1F"), "x");  // U+3000, U+00A0, U+2003, U+001F
  EXPECT_EQ(rkv::python_strip("\xE2\x80\x8Bx"), "\xE2\x80\x8Bx");                 // U+200B is not whitespace
  EXPECT_EQ(rkv::python_strip("\xC2\x85x\xC2\x85"), "x");                         // U+0085
  EXPECT_EQ(rkv::python_strip("  \xFF  "), "\xFF");                               // invalid byte kept
  EXPECT_EQ(rkv::python_strip(""), "");
  EXPECT_EQ(rkv::python_strip(" \t "), "");
}

// RKV_REQUIRE_ASSET's parameter is named `path`, so it is given a variable of that name (anything else breaks the
// macro's expansion).
#define REQUIRE_VENV()                                                \
  do {                                                                \
    const std::filesystem::path path = rkv_test::venv_python();       \
    RKV_REQUIRE_ASSET(path);                                          \
  } while (0)

TEST(ChatTemplateJinja, ReferenceTemplatesMatchJinja2) {
  REQUIRE_VENV();
  const auto refs = reference_templates();
  for (const auto& name : {"llama3", "llama2", "mistral-v0.1", "mistral-v0.2", "gemma-7b-it", "phi-3-mini", "phi-3-medium"}) {
    const auto& r = refs[name];
    const std::string jinja = r["template"];
    const auto t = rkv::ChatTemplate::detect(jinja, r["bos"], r["eos"]);
    SCOPED_TRACE(name);
    expect_same_as_jinja(t, jinja, r["bos"], r["eos"]);
  }
}

TEST(ChatTemplateJinja, Qwen2TemplateFromItsGgufMatchesJinja2) {
  REQUIRE_VENV();
  const std::string path = qwen2_vocab_path();
  RKV_REQUIRE_ASSET(path);
  const rkv::GgufFile file(path);
  const auto tok = rkv::Tokenizer::from_gguf(file);
  const auto t = rkv::ChatTemplate::for_tokenizer(tok);
  EXPECT_EQ(t.name(), "chatml");
  EXPECT_EQ(t.default_system_prompt(), "You are a helpful assistant");
  expect_same_as_jinja(t, tok.chat_template(), tok.token_text(tok.bos()), tok.token_text(tok.eos()));
}

}  // namespace
