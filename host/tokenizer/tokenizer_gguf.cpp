// Tokenizer::from_gguf: the vocabulary from GGUF metadata (keys as written by llama.cpp's convert_hf_to_gguf.py and
// read by llama_vocab::impl::load).
#include <algorithm>

#include "core/errors.hpp"
#include "model/gguf.hpp"
#include "tokenizer/pre_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rkv {
namespace {

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string supported_pre_names() {
  std::vector<std::string> names;
  for (const auto& fam : pre_tokenizer_families())
    for (const auto& a : fam.aliases) names.push_back(a);
  return join(names);
}

uint32_t attr_of_token_type(int32_t type) {
  switch (type) {
    case 1: return kTokenNormal;
    case 2: return kTokenUnknown;
    case 3: return kTokenControl;
    case 4: return kTokenUserDefined;
    case 5: return kTokenUnused;
    case 6: return kTokenByte;
    default: return 0;  // undefined
  }
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const GgufFile& file) {
  const std::string& path = file.path();
  VocabData v;
  v.source = path;

  const std::string model = file.get_string("tokenizer.ggml.model");
  if (model == "gpt2") {
    v.type = VocabType::bpe;
  } else if (model == "llama") {
    v.type = VocabType::spm;
  } else if (model == "no_vocab" || model == "none") {
    throw InputError(path + ": the file has no vocabulary (tokenizer.ggml.model = '" + model + "')");
  } else {
    throw InputError(path + ": tokenizer.ggml.model '" + model +
                     "' is not supported (supported: 'gpt2' = byte-level BPE, 'llama' = SentencePiece-style)");
  }

  const std::vector<std::string>& texts = file.string_array_ref("tokenizer.ggml.tokens");
  const std::size_t n = texts.size();
  if (n == 0) throw InputError(path + ": tokenizer.ggml.tokens is empty");
  if (n > static_cast<std::size_t>(INT32_MAX)) throw InputError(path + ": tokenizer.ggml.tokens is too long");
  v.tokens.resize(n);
  for (std::size_t i = 0; i < n; ++i)
    v.tokens[i].text = texts[i].empty() ? "[EMPTY_" + std::to_string(i) + "]" : texts[i];

  if (file.has("tokenizer.ggml.scores")) {
    const std::vector<float> scores = file.get_f32_array("tokenizer.ggml.scores");
    if (scores.size() < n)
      throw InputError(path + ": tokenizer.ggml.scores has " + std::to_string(scores.size()) + " entries for " +
                       std::to_string(n) + " tokens");
    for (std::size_t i = 0; i < n; ++i) v.tokens[i].score = scores[i];
  }
  if (file.has("tokenizer.ggml.token_type")) {
    const std::vector<int32_t> types = file.get_i32_array("tokenizer.ggml.token_type");
    if (types.size() < n)
      throw InputError(path + ": tokenizer.ggml.token_type has " + std::to_string(types.size()) + " entries for " +
                       std::to_string(n) + " tokens");
    for (std::size_t i = 0; i < n; ++i) v.tokens[i].attr = attr_of_token_type(types[i]);
  }

  if (v.type == VocabType::bpe) {
    const std::string pre = file.get_string_or("tokenizer.ggml.pre", "default");
    const PreTokenizerFamily* fam = find_pre_tokenizer_family(pre);
    if (!fam) {
      const auto& unsupported = unsupported_pre_tokenizer_names();
      if (std::find(unsupported.begin(), unsupported.end(), pre) != unsupported.end())
        throw InputError(path + ": pre-tokenizer '" + pre + "' (tokenizer.ggml.pre) needs custom code in llama.cpp and " +
                         "is not supported; supported: " + supported_pre_names());
      throw InputError(path + ": unknown pre-tokenizer '" + pre + "' (tokenizer.ggml.pre); supported: " +
                       supported_pre_names());
    }
    v.pre_name = pre;
    v.pre_regexes = fam->regexes;
    v.ignore_merges = fam->ignore_merges;
    v.add_bos = fam->add_bos;
    v.add_space_prefix = false;

    const std::vector<std::string>& merges = file.string_array_ref("tokenizer.ggml.merges");
    v.merges.reserve(merges.size());
    for (std::size_t r = 0; r < merges.size(); ++r) {
      const std::string& line = merges[r];
      const std::size_t space = line.find(' ', 1);
      if (space == std::string::npos || space + 1 >= line.size())
        throw InputError(path + ": tokenizer.ggml.merges[" + std::to_string(r) + "] = '" + line +
                         "' is not two tokens separated by a space");
      v.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
    }
  } else {
    v.bos = 1;
    v.eos = 2;
    v.unk = 0;
    v.add_bos = true;
    v.add_space_prefix = file.get_bool("tokenizer.ggml.add_space_prefix").value_or(true);
  }

  // Special ids: a key naming an id outside the vocabulary is ignored (the default stays), as in llama.cpp.
  auto read_id = [&](const char* key, int32_t& id) {
    const std::optional<uint32_t> value = file.get_u32(key);
    if (value && *value < n) id = static_cast<int32_t>(*value);
  };
  read_id("tokenizer.ggml.bos_token_id", v.bos);
  read_id("tokenizer.ggml.eos_token_id", v.eos);
  read_id("tokenizer.ggml.eot_token_id", v.eot);
  read_id("tokenizer.ggml.eom_token_id", v.eom);
  read_id("tokenizer.ggml.unknown_token_id", v.unk);
  read_id("tokenizer.ggml.padding_token_id", v.pad);
  read_id("tokenizer.ggml.fim_pad_token_id", v.fim_pad);
  read_id("tokenizer.ggml.fim_rep_token_id", v.fim_rep);
  read_id("tokenizer.ggml.fim_sep_token_id", v.fim_sep);
  if (const auto add_bos = file.get_bool("tokenizer.ggml.add_bos_token")) v.add_bos = *add_bos;

  v.chat_template = file.get_string_or("tokenizer.chat_template", "");
  v.model_name = file.get_string_or("general.name", "");
  return from_vocab(std::move(v));
}

}  // namespace rkv
