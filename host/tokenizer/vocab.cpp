// Completing a vocabulary: special ids by text, end-of-generation set, strip flags (see vocab.hpp). The token-text
// lists are llama.cpp's (src/llama-vocab.cpp, llama_vocab::impl::load).
#include "tokenizer/vocab.hpp"

#include <algorithm>
#include <set>
#include <string_view>
#include <unordered_map>

#include "core/errors.hpp"

namespace rkv {
namespace {

bool one_of(std::string_view s, std::initializer_list<std::string_view> list) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

/// Sets `id` to the first token (in id order) whose text is in `texts`, marking it control, when `id` is unset.
void find_by_text(VocabData& v, int32_t& id, std::initializer_list<std::string_view> texts) {
  if (id >= 0) return;
  for (int32_t i = 0; i < static_cast<int32_t>(v.tokens.size()); ++i) {
    if (one_of(v.tokens[i].text, texts)) {
      id = i;
      v.tokens[i].attr |= kTokenControl;
      return;
    }
  }
}

std::string lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

}  // namespace

std::vector<int32_t> finalize_vocab(VocabData& v) {
  const auto n = static_cast<int32_t>(v.tokens.size());
  {
    std::unordered_map<std::string_view, int32_t> seen;
    seen.reserve(v.tokens.size());
    for (int32_t i = 0; i < n; ++i) {
      auto [it, fresh] = seen.emplace(v.tokens[i].text, i);
      if (!fresh)
        throw InputError(v.source + ": duplicate token text '" + v.tokens[i].text + "' at ids " +
                         std::to_string(it->second) + " and " + std::to_string(i));
    }
  }
  for (int32_t* id : {&v.bos, &v.eos, &v.eot, &v.eom, &v.unk, &v.pad, &v.fim_pad, &v.fim_rep, &v.fim_sep})
    if (*id >= n) *id = -1;

  find_by_text(v, v.eot,
               {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>",
                "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"});
  find_by_text(v, v.eom, {"<|eom_id|>"});
  find_by_text(v, v.fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"});
  find_by_text(v, v.fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"});
  find_by_text(v, v.fim_sep, {"<|file_sep|>"});

  std::set<int32_t> eog;
  for (int32_t id : {v.fim_pad, v.fim_rep, v.fim_sep})
    if (id >= 0) eog.insert(id);
  for (int32_t i = 0; i < n; ++i) {
    if (one_of(v.tokens[i].text,
               {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
                "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
                "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
                "<｜end▁of▁sentence｜>", "[e~["})) {
      eog.insert(i);
      v.tokens[i].attr |= kTokenControl;
    }
  }
  for (int32_t i = 0; i < n; ++i)
    if (one_of(v.tokens[i].text, {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}))
      v.tokens[i].attr = kTokenUserDefined;
  for (int32_t id : {v.eos, v.eot, v.eom})
    if (id >= 0) eog.insert(id);
  for (int32_t id : v.extra_eog)
    if (id >= 0 && id < n) eog.insert(id);

  auto eog_with_text = [&](std::string_view text) -> int32_t {
    for (int32_t id : eog)
      if (v.tokens[id].text == text) return id;
    return -1;
  };
  const int32_t end_id = eog_with_text("<|end|>");
  const bool has_call = eog_with_text("<|call|>") >= 0 || eog_with_text("<|calls|>") >= 0;
  if (end_id >= 0 && has_call && (eog_with_text("<|return|>") >= 0 || eog_with_text("<|flush|>") >= 0)) {
    eog.erase(end_id);
    v.tokens[end_id].attr = kTokenUserDefined;
  }
  const int32_t s_id = eog_with_text("</s>");
  if (s_id >= 0 && eog_with_text("<|tool_response>") >= 0) {
    eog.erase(s_id);
    v.tokens[s_id].attr = kTokenNormal;
  }

  const std::string name = lower(v.model_name);
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (auto& t : v.tokens) {
      if (t.attr & (kTokenControl | kTokenUserDefined | kTokenUnknown)) t.attr |= kTokenRstrip;
      if (t.text == "</s>") t.attr |= kTokenRstrip;
      if (one_of(t.text, {"<unk>", "<s>", "<|endoftext|>"})) t.attr &= ~uint32_t(kTokenRstrip);
    }
  }
  return std::vector<int32_t>(eog.begin(), eog.end());
}

}  // namespace rkv
