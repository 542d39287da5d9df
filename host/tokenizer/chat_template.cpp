// Chat template families (see chat_template.hpp).
#include "tokenizer/chat_template.hpp"

#include "core/errors.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/utf8.hpp"

namespace rkv {
namespace {

bool contains(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

std::string known_list() {
  std::string out;
  for (const auto& n : ChatTemplate::known_names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/// The default system prompt of a ChatML template: the text of the first literal
/// "<|im_start|>system" + newline + TEXT + "<|im_end|>" inside a Jinja string (newline written as a real newline or as
/// the escape \n), with Jinja string escapes undone; "" when there is none.
std::string chatml_default_system(std::string_view jinja) {
  const std::string_view head = "<|im_start|>system";
  for (std::size_t at = jinja.find(head); at != std::string_view::npos; at = jinja.find(head, at + 1)) {
    std::size_t p = at + head.size();
    if (jinja.substr(p, 1) == "\n") p += 1;
    else if (jinja.substr(p, 2) == "\\n") p += 2;
    else continue;
    const std::size_t end = jinja.find("<|im_end|>", p);
    if (end == std::string_view::npos) continue;
    const std::string_view body = jinja.substr(p, end - p);
    if (body.find_first_of("'\"{}") != std::string_view::npos) continue;  // not a plain literal
    std::string text;
    for (std::size_t i = 0; i < body.size(); ++i) {
      if (body[i] == '\\' && i + 1 < body.size()) {
        const char e = body[++i];
        text += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
      } else {
        text += body[i];
      }
    }
    return text;
  }
  return {};
}

[[noreturn]] void raise(const std::string& family, const std::string& message) {
  throw InputError("chat template '" + family + "': " + message);
}

}  // namespace

std::string python_strip(std::string_view s) {
  // Front: decode forward. Back: step back over continuation bytes to the start of the last character.
  std::size_t begin = 0, end = s.size();
  char32_t cp;
  while (begin < end) {
    const std::size_t n = utf8::decode(s.substr(0, end), begin, cp);
    if (n == 0 || !is_python_space(cp)) break;
    begin += n;
  }
  while (end > begin) {
    std::size_t start = end - 1;
    while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80 && end - start < 4) --start;
    const std::size_t n = utf8::decode(s.substr(0, end), start, cp);
    if (n != end - start || !is_python_space(cp)) break;
    end = start;
  }
  return std::string(s.substr(begin, end - begin));
}

const std::vector<std::string>& ChatTemplate::known_names() {
  static const std::vector<std::string> names = {"chatml", "llama3", "llama2", "mistral", "gemma", "phi3"};
  return names;
}

ChatTemplate ChatTemplate::by_name(std::string_view name, std::string_view jinja, std::string bos, std::string eos) {
  bool known = false;
  for (const auto& n : known_names()) known = known || n == name;
  if (!known)
    throw InputError("unknown chat template '" + std::string(name) + "' (known: " + known_list() + ")");
  ChatTemplate t;
  t.name_ = std::string(name);
  t.bos_ = std::move(bos);
  t.eos_ = std::move(eos);
  if (t.name_ == "chatml") t.default_system_ = chatml_default_system(jinja);
  if (t.name_ == "mistral") t.space_after_eos_ = contains(jinja, "eos_token + ' '");
  if (t.name_ == "gemma" || t.name_ == "phi3") t.leading_bos_ = contains(jinja, "{{ bos_token }}");
  return t;
}

ChatTemplate ChatTemplate::detect(std::string_view jinja, std::string bos, std::string eos) {
  std::string family;
  if (contains(jinja, "<|im_start|>") && !contains(jinja, "<|im_sep|>") && !contains(jinja, "<end_of_utterance>")) {
    family = "chatml";
  } else if (contains(jinja, "<|start_header_id|>") && contains(jinja, "<|end_header_id|>") &&
             !contains(jinja, "Cutting Knowledge Date")) {
    family = "llama3";  // 3.1+ templates add a dated system preamble and tools: not this family
  } else if (contains(jinja, "<start_of_turn>") && contains(jinja, "<end_of_turn>")) {
    family = "gemma";
  } else if (contains(jinja, "<|user|>") && contains(jinja, "<|end|>") && contains(jinja, "<|assistant|>") &&
             !contains(jinja, "<|system|>")) {
    family = "phi3";  // Phi-3 mini/medium drop system messages; templates that render <|system|> are another family
  } else if (contains(jinja, "[INST]") && !contains(jinja, "[SYSTEM_PROMPT]") && !contains(jinja, "[AVAILABLE_TOOLS]")) {
    family = contains(jinja, "<<SYS>>") ? "llama2" : "mistral";
  }
  if (family.empty())
    throw InputError("the model's chat template is not one of the known families (" + known_list() +
                     "); choose one by name (ripplekv: --chat-template NAME) to format prompts that way");
  return by_name(family, jinja, std::move(bos), std::move(eos));
}

ChatTemplate ChatTemplate::for_tokenizer(const Tokenizer& tokenizer, std::string_view name) {
  const std::string bos = tokenizer.bos() >= 0 ? tokenizer.token_text(tokenizer.bos()) : "";
  const std::string eos = tokenizer.eos() >= 0 ? tokenizer.token_text(tokenizer.eos()) : "";
  if (!name.empty()) return by_name(name, tokenizer.chat_template(), bos, eos);
  if (tokenizer.chat_template().empty())
    throw InputError("the model has no chat template; choose one by name (known: " + known_list() + ")");
  return detect(tokenizer.chat_template(), bos, eos);
}

std::string ChatTemplate::apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  std::string out;
  if (name_ == "chatml") {
    for (std::size_t i = 0; i < messages.size(); ++i) {
      if (i == 0 && messages[0].role != "system" && !default_system_.empty())
        out += "<|im_start|>system\n" + default_system_ + "<|im_end|>\n";
      out += "<|im_start|>" + messages[i].role + "\n" + messages[i].content + "<|im_end|>\n";
    }
    if (add_generation_prompt) out += "<|im_start|>assistant\n";
  } else if (name_ == "llama3") {
    for (std::size_t i = 0; i < messages.size(); ++i) {
      if (i == 0) out += bos_;
      out += "<|start_header_id|>" + messages[i].role + "<|end_header_id|>\n\n" + python_strip(messages[i].content) +
             "<|eot_id|>";
    }
    if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  } else if (name_ == "llama2") {
    if (messages.empty()) raise(name_, "no messages (the template reads messages[0])");
    const bool has_system = !messages.empty() && messages[0].role == "system";
    const std::size_t first = has_system ? 1 : 0;
    for (std::size_t i = first; i < messages.size(); ++i) {
      const std::size_t k = i - first;
      const ChatMessage& m = messages[i];
      if ((m.role == "user") != (k % 2 == 0))
        raise(name_, "Conversation roles must alternate user/assistant/user/assistant/...");
      std::string content = m.content;
      if (k == 0 && has_system) content = "<<SYS>>\n" + messages[0].content + "\n<</SYS>>\n\n" + content;
      if (m.role == "user") out += bos_ + "[INST] " + python_strip(content) + " [/INST]";
      else if (m.role == "assistant") out += " " + python_strip(content) + " " + eos_;
    }
  } else if (name_ == "gemma") {
    if (messages.empty()) raise(name_, "no messages (the template reads messages[0])");
    if (leading_bos_) out += bos_;
    if (messages[0].role == "system") raise(name_, "System role not supported");
    for (std::size_t i = 0; i < messages.size(); ++i) {
      const ChatMessage& m = messages[i];
      if ((m.role == "user") != (i % 2 == 0))
        raise(name_, "Conversation roles must alternate user/assistant/user/assistant/...");
      const std::string role = m.role == "assistant" ? "model" : m.role;
      out += "<start_of_turn>" + role + "\n" + python_strip(m.content) + "<end_of_turn>\n";
    }
    if (add_generation_prompt) out += "<start_of_turn>model\n";
  } else if (name_ == "phi3") {
    if (leading_bos_) out += bos_;
    for (const ChatMessage& m : messages) {  // other roles (system) are dropped, as the template drops them
      if (m.role == "user") out += "<|user|>\n" + m.content + "<|end|>\n<|assistant|>\n";
      else if (m.role == "assistant") out += m.content + "<|end|>\n";
    }
  } else {  // mistral
    out += bos_;
    for (std::size_t i = 0; i < messages.size(); ++i) {
      const ChatMessage& m = messages[i];
      if ((m.role == "user") != (i % 2 == 0))
        raise(name_, "Conversation roles must alternate user/assistant/user/assistant/...");
      if (m.role == "user") out += "[INST] " + m.content + " [/INST]";
      else if (m.role == "assistant") out += m.content + eos_ + (space_after_eos_ ? " " : "");
      else raise(name_, "Only user and assistant roles are supported!");
    }
  }
  return out;
}

}  // namespace rkv
