// Tokenizer::from_hf_dir: byte-level BPE from a Hugging Face tokenizer.json (format: HF tokenizers
// tokenizers/src/tokenizer/serialization.rs), with tokenizer_config.json and generation_config.json beside it.
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/errors.hpp"
#include "core/regular_file.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rkv {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// HF tokenizers pre_tokenizers/byte_level.rs (GPT-2's encoder.py pattern).
const char* const kByteLevelRegex = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";

json read_json(const fs::path& path) {
  const std::string text = read_regular_file(path.string(), "tokenizer file");  // no FIFO, device or folder
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw InputError(path.string() + ": not valid JSON (" + e.what() + ")");
  }
}

/// A PCRE2 pattern matching `s` literally.
std::string regex_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}-/#").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

struct PreSpec {
  std::vector<std::string> regexes;
  bool byte_level = false;
  std::string description;
};

void read_pre_tokenizer(const json& p, const std::string& where, PreSpec& spec) {
  if (!p.is_object() || !p.contains("type") || !p["type"].is_string())
    throw InputError(where + ": pre_tokenizer entry without a \"type\"");
  const std::string type = p["type"];
  spec.description += (spec.description.empty() ? "" : "+") + type;
  if (type == "Sequence") {
    if (!p.contains("pretokenizers") || !p["pretokenizers"].is_array())
      throw InputError(where + ": Sequence pre_tokenizer without a \"pretokenizers\" array");
    for (const auto& q : p["pretokenizers"]) read_pre_tokenizer(q, where, spec);
  } else if (type == "ByteLevel") {
    if (p.value("add_prefix_space", false))
      throw InputError(where + ": ByteLevel pre_tokenizer with add_prefix_space = true is not supported");
    if (p.value("use_regex", true)) spec.regexes.push_back(kByteLevelRegex);
    spec.byte_level = true;
  } else if (type == "Split") {
    const std::string behavior = p.value("behavior", "");
    if (behavior != "Isolated" || p.value("invert", false))
      throw InputError(where + ": Split pre_tokenizer with behavior '" + behavior +
                       "' (or invert = true) is not supported; only \"Isolated\"");
    const json& pattern = p.value("pattern", json::object());
    if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
      spec.regexes.push_back(pattern["Regex"].get<std::string>());
    } else if (pattern.contains("String") && pattern["String"].is_string()) {
      spec.regexes.push_back(regex_escape(pattern["String"].get<std::string>()));
    } else {
      throw InputError(where + ": Split pre_tokenizer without a Regex or String pattern");
    }
  } else if (type == "Digits") {
    spec.regexes.push_back(p.value("individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)");
  } else {
    throw InputError(where + ": pre_tokenizer type '" + type +
                     "' is not supported (supported: ByteLevel, Split with behavior Isolated, Digits, Sequence)");
  }
}

/// Text of a token named in tokenizer_config.json: a string, or an AddedToken object {"content": ...}; "" if absent.
std::string token_name(const json& cfg, const char* key) {
  if (!cfg.contains(key)) return {};
  const json& t = cfg[key];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_object() && t.contains("content") && t["content"].is_string()) return t["content"].get<std::string>();
  return {};
}

/// True when a TemplateProcessing post-processor (alone or in a Sequence) starts single sequences with `bos`.
bool post_processor_adds(const json& p, const std::string& bos) {
  if (!p.is_object() || bos.empty()) return false;
  const std::string type = p.value("type", "");
  if (type == "Sequence" && p.contains("processors") && p["processors"].is_array()) {
    for (const auto& q : p["processors"])
      if (post_processor_adds(q, bos)) return true;
    return false;
  }
  if (type != "TemplateProcessing" || !p.contains("single") || !p["single"].is_array() || p["single"].empty())
    return false;
  const json& first = p["single"][0];
  return first.is_object() && first.contains("SpecialToken") && first["SpecialToken"].is_object() &&
         first["SpecialToken"].value("id", "") == bos;
}

}  // namespace

Tokenizer Tokenizer::from_hf_dir(const fs::path& dir) {
  const fs::path tok_path = dir / "tokenizer.json";
  const std::string where = tok_path.string();
  const json j = read_json(tok_path);
  try {
    VocabData v;
    v.source = where;
    v.type = VocabType::bpe;
    v.add_space_prefix = false;

    if (!j.contains("model") || !j["model"].is_object()) throw InputError(where + ": no \"model\" object");
    const json& model = j["model"];
    const std::string model_type = model.value("type", "BPE");
    if (model_type != "BPE")
      throw InputError(where + ": model type '" + model_type + "' is not supported (only byte-level \"BPE\")");

    if (j.contains("normalizer") && !j["normalizer"].is_null()) {
      const std::string norm = j["normalizer"].value("type", "");
      if (norm != "NFC")
        throw InputError(where + ": normalizer '" + norm +
                         "' is not supported (a SentencePiece-style tokenizer.json? load the GGUF instead)");
    }
    PreSpec pre;
    if (!j.contains("pre_tokenizer") || j["pre_tokenizer"].is_null())
      throw InputError(where + ": no pre_tokenizer; only byte-level BPE (ByteLevel pre_tokenizer) is supported");
    read_pre_tokenizer(j["pre_tokenizer"], where, pre);
    if (!pre.byte_level)
      throw InputError(where + ": pre_tokenizer has no ByteLevel step; only byte-level BPE is supported");
    v.pre_name = "hf:" + pre.description;
    v.pre_regexes = std::move(pre.regexes);
    v.ignore_merges = model.value("ignore_merges", false);

    // Vocabulary: model.vocab plus added_tokens, by id.
    if (!model.contains("vocab") || !model["vocab"].is_object()) throw InputError(where + ": model has no \"vocab\"");
    int64_t max_id = -1;
    auto check_id = [&](const json& id, const std::string& what) -> int64_t {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX - 1)
        throw InputError(where + ": " + what + " has an invalid id");
      return id.get<int64_t>();
    };
    for (const auto& [text, id] : model["vocab"].items()) max_id = std::max(max_id, check_id(id, "vocab entry '" + text + "'"));
    const json added = j.value("added_tokens", json::array());
    for (const auto& a : added) max_id = std::max(max_id, check_id(a.value("id", json()), "added token"));
    if (max_id < 0) throw InputError(where + ": the vocabulary is empty");
    v.tokens.resize(static_cast<std::size_t>(max_id) + 1);
    std::vector<bool> filled(v.tokens.size(), false);
    for (const auto& [text, id] : model["vocab"].items()) {
      v.tokens[id.get<std::size_t>()].text = text;
      filled[id.get<std::size_t>()] = true;
    }
    for (const auto& a : added) {
      const std::size_t id = a["id"].get<std::size_t>();
      if (!a.contains("content") || !a["content"].is_string())
        throw InputError(where + ": added token " + std::to_string(id) + " has no content");
      VocabToken& t = v.tokens[id];
      t.text = a["content"].get<std::string>();
      t.attr = a.value("special", false) ? kTokenControl : kTokenUserDefined;
      if (a.value("lstrip", false)) t.attr |= kTokenLstrip;
      if (a.value("rstrip", false)) t.attr |= kTokenRstrip;
      filled[id] = true;
    }
    for (std::size_t i = 0; i < v.tokens.size(); ++i) {
      if (!filled[i]) {  // an id no vocab entry uses: named [PADi] and marked unused, so encode never emits it (as llama.cpp does)
        v.tokens[i].text = "[PAD" + std::to_string(i) + "]";
        v.tokens[i].attr = kTokenUnused;
      }
    }

    // Merges: "left right" strings (older files) or [left, right] pairs (tokenizers >= 0.20).
    const json merges = model.value("merges", json::array());
    v.merges.reserve(merges.size());
    for (std::size_t r = 0; r < merges.size(); ++r) {
      const json& m = merges[r];
      if (m.is_string()) {
        const std::string line = m.get<std::string>();
        const std::size_t space = line.find(' ', 1);
        if (space == std::string::npos || space + 1 >= line.size())
          throw InputError(where + ": merges[" + std::to_string(r) + "] = '" + line + "' is not two tokens");
        v.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        v.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      } else {
        throw InputError(where + ": merges[" + std::to_string(r) + "] is neither \"a b\" nor [\"a\", \"b\"]");
      }
    }

    auto id_of = [&](const std::string& text) -> int32_t {
      for (std::size_t i = 0; i < v.tokens.size(); ++i)
        if (v.tokens[i].text == text) return static_cast<int32_t>(i);
      return -1;
    };

    std::string bos_text;
    const fs::path cfg_path = dir / "tokenizer_config.json";
    if (fs::exists(cfg_path)) {
      const json cfg = read_json(cfg_path);
      bos_text = token_name(cfg, "bos_token");
      if (!bos_text.empty()) v.bos = id_of(bos_text);
      const std::string eos_text = token_name(cfg, "eos_token");
      if (!eos_text.empty()) v.eos = id_of(eos_text);
      const std::string unk_text = token_name(cfg, "unk_token");
      if (!unk_text.empty()) v.unk = id_of(unk_text);
      const std::string pad_text = token_name(cfg, "pad_token");
      if (!pad_text.empty()) v.pad = id_of(pad_text);
      if (cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean()) {
        v.add_bos = cfg["add_bos_token"].get<bool>();
      } else {
        v.add_bos = post_processor_adds(j.value("post_processor", json()), bos_text);
      }
      if (cfg.contains("chat_template")) {
        const json& t = cfg["chat_template"];
        if (t.is_string()) {
          v.chat_template = t.get<std::string>();
        } else if (t.is_array()) {  // [{"name": ..., "template": ...}]: the "default" one, else the first
          for (const auto& e : t)
            if (e.value("name", "") == "default") v.chat_template = e.value("template", "");
          if (v.chat_template.empty() && !t.empty()) v.chat_template = t[0].value("template", "");
        }
      }
    }
    const fs::path gen_path = dir / "generation_config.json";
    if (fs::exists(gen_path)) {
      const json gen = read_json(gen_path);
      const json eos = gen.value("eos_token_id", json());
      std::vector<int32_t> ids;
      if (eos.is_number_integer()) ids.push_back(eos.get<int32_t>());
      if (eos.is_array())
        for (const auto& e : eos)
          if (e.is_number_integer()) ids.push_back(e.get<int32_t>());
      if (v.eos < 0 && !ids.empty()) v.eos = ids.front();
      v.extra_eog = ids;
      if (v.bos < 0 && gen.contains("bos_token_id") && gen["bos_token_id"].is_number_integer())
        v.bos = gen["bos_token_id"].get<int32_t>();
    }
    return from_vocab(std::move(v));
  } catch (const json::exception& e) {
    throw InputError(where + ": unexpected structure (" + e.what() + ")");
  }
}

}  // namespace rkv
