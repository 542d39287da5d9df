// Chat templates: turning a conversation into the prompt text a chat model was trained on.
//
// Models ship their template as Jinja (GGUF tokenizer.chat_template, tokenizer_config.json chat_template). ripplekv
// does not run Jinja; it recognizes the template's family from marker strings (as llama.cpp's llm_chat_detect_template
// does) and renders that family in C++, reproducing the reference template of each family character for character
// (the tests render the same conversations with jinja2 and compare):
//
//   chatml   <|im_start|>{role}\n{content}<|im_end|>\n ... [<|im_start|>assistant\n]
//            Reference: SmolLM2-Instruct and Qwen2-Instruct. When the template carries a default system prompt (a
//            literal "<|im_start|>system\n...<|im_end|>" block, e.g. SmolLM2's "You are a helpful AI assistant named
//            SmolLM, trained by Hugging Face"), it is inserted before the first message when that message is not a
//            system message.
//   llama3   {bos}<|start_header_id|>{role}<|end_header_id|>\n\n{content, trimmed}<|eot_id|> ...
//            [<|start_header_id|>assistant<|end_header_id|>\n\n]. Reference: Meta-Llama-3-8B-Instruct.
//   llama2   {bos}[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user, stripped} [/INST] {assistant, stripped} {eos}...
//            Reference: Llama-2-7b-chat-hf. Roles must alternate user/assistant after an optional system message; an
//            empty conversation is an error (the template reads messages[0]).
//   mistral  {bos}[INST] {user} [/INST]{assistant}{eos}[ ] ... Reference: Mistral-7B-Instruct-v0.1 (with a space after
//            each EOS) and v0.2 (without). Only user and assistant roles; they must alternate.
//   gemma    [{bos}]<start_of_turn>{user|model}\n{content, trimmed}<end_of_turn>\n ... [<start_of_turn>model\n].
//            Reference: gemma-7b-it (Gemma 2's instruct template is the same after a {{ bos_token }}). No system role;
//            user and assistant must alternate; an empty conversation is an error (the template reads messages[0]).
//   phi3     [{bos}]<|user|>\n{user}<|end|>\n<|assistant|>\n{assistant}<|end|>\n ... Reference: Phi-3-mini (with
//            {{ bos_token }}) and Phi-3-medium (without). System messages are dropped; the generation prompt is
//            part of every user turn.
//
// For llama2, mistral and phi3 the text that ends a user turn is the generation prompt, so add_generation_prompt
// changes nothing (as in their Jinja). The rendered text contains special-token texts (BOS, <|im_start|>...): tokenize it with
// parse_special = true and add_bos = false.
//
// "Trim"/"strip" is Python's str.strip() (what Jinja's trim filter and .strip() run): it removes code points that
// Python counts as whitespace (U+0009..U+000D, U+001C..U+0020, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029,
// U+202F, U+205F, U+3000) from both ends.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace rkv {

class Tokenizer;

struct ChatMessage {
  std::string role;     ///< "system", "user", "assistant" (chatml and llama3 accept any role)
  std::string content;  ///< UTF-8 text
};

class ChatTemplate {
 public:
  /// The family names, in a fixed order: chatml, llama3, llama2, mistral, gemma, phi3.
  static const std::vector<std::string>& known_names();

  /// Recognizes the family of a Jinja template. `bos` and `eos` are the texts of the model's BOS/EOS tokens (used by
  /// the llama3, llama2 and mistral families). Throws rkv::InputError when no family matches, listing the known names
  /// and saying how to choose one (by_name / the CLI's --chat-template).
  static ChatTemplate detect(std::string_view jinja, std::string bos, std::string eos);

  /// The family `name` (one of known_names()); `jinja` (may be empty) only supplies chatml's default system prompt.
  /// Throws rkv::InputError for an unknown name, listing the known ones.
  static ChatTemplate by_name(std::string_view name, std::string_view jinja, std::string bos, std::string eos);

  /// The template of a loaded model: by_name(name, ...) when `name` is not empty, else detect() on the model's own
  /// template; BOS/EOS texts come from the tokenizer. Throws rkv::InputError when the model has no template and no
  /// name is given, or as detect()/by_name().
  static ChatTemplate for_tokenizer(const Tokenizer& tokenizer, std::string_view name = "");

  /// The prompt text for `messages`; with `add_generation_prompt`, the opening of the assistant's turn is appended.
  /// Throws rkv::InputError when the family's reference template would raise (roles that do not alternate, a role the
  /// family does not support), with the template's own message.
  std::string apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

  const std::string& name() const { return name_; }
  /// chatml's default system prompt ("" when none).
  const std::string& default_system_prompt() const { return default_system_; }

 private:
  ChatTemplate() = default;
  std::string name_;
  std::string bos_, eos_;
  std::string default_system_;   // chatml
  bool space_after_eos_ = false; // mistral v0.1
  bool leading_bos_ = false;     // gemma, phi3: the template starts with {{ bos_token }}
};

/// Python's str.strip() on UTF-8 text (see the file comment). Invalid bytes are kept.
std::string python_strip(std::string_view s);

}  // namespace rkv
