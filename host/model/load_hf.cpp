// Loading a model from a Hugging Face folder: config.json + model.safetensors, or shards listed in
// model.safetensors.index.json ("weight_map": {tensor name: file name}). Tensor names follow transformers'
// LlamaForCausalLM / MistralForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM / Olmo2ForCausalLM (model.embed_tokens,
// model.layers.N.self_attn.q_proj, ..., lm_head; model/architectures.hpp says which norms each has).
// With WeightStorage::quantized the F16 and BF16 matrices (embeddings, LM head, Q/K/V/O, gate, up, down) whose rows
// are whole blocks of 32 are requantized to Q8_0 at load, as the GGUF loader requantizes F16/BF16 GGUF matrices;
// F32 matrices, norms and biases stay float32 (model.hpp).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "core/cancel.hpp"
#include "core/errors.hpp"
#include "core/regular_file.hpp"
#include "model/architectures.hpp"
#include "model/gemma.hpp"
#include "model/ggml_types.hpp"
#include "model/model.hpp"
#include "model/model_check.hpp"
#include "model/safetensors.hpp"
#include "core/sha256.hpp"

namespace rkv {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json read_json(const fs::path& p) {
  const std::string text = read_regular_file(p.string(), "model folder file");  // no FIFO, device or folder
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw InputError(p.string() + ": invalid JSON: " + e.what());
  }
}

/// config.json integer field `key` (required unless `fallback`).
int64_t cfg_int(const json& cfg, const std::string& key, const std::string& src, std::optional<int64_t> fallback = std::nullopt) {
  if (cfg.contains(key) && !cfg[key].is_null()) {
    if (!cfg[key].is_number_integer()) throw InputError(src + ": '" + key + "' must be an integer");
    return cfg[key].get<int64_t>();
  }
  if (fallback) return *fallback;
  throw InputError(src + ": missing '" + key + "'");
}

double cfg_num(const json& cfg, const std::string& key, const std::string& src, double fallback) {
  if (cfg.contains(key) && !cfg[key].is_null()) {
    if (!cfg[key].is_number()) throw InputError(src + ": '" + key + "' must be a number");
    return cfg[key].get<double>();
  }
  return fallback;
}

bool cfg_bool(const json& cfg, const std::string& key, const std::string& src, bool fallback) {
  if (cfg.contains(key) && !cfg[key].is_null()) {
    if (!cfg[key].is_boolean()) throw InputError(src + ": '" + key + "' must be true or false");
    return cfg[key].get<bool>();
  }
  return fallback;
}

/// The safetensors files of a model folder, opened (headers parsed; tensor data mapped, not read).
struct Shards {
  std::vector<std::string> names;  ///< file names in the folder, sorted
  std::vector<SafetensorsFile> files;
  std::map<std::string, std::pair<size_t, const SafetensorsTensor*>> by_name;
};

/// The names of the folder's safetensors files, sorted: those model.safetensors.index.json lists, else
/// model.safetensors, else every *.safetensors. Throws InputError when there are none or the index is malformed.
std::vector<std::string> shard_names(const fs::path& dir) {
  std::vector<std::string> names;
  const fs::path index_path = dir / "model.safetensors.index.json";
  if (fs::exists(index_path)) {
    const json idx = read_json(index_path);
    if (!idx.contains("weight_map") || !idx["weight_map"].is_object()) {
      throw InputError(index_path.string() + ": no 'weight_map' object");
    }
    std::set<std::string> uniq;
    for (auto it = idx["weight_map"].begin(); it != idx["weight_map"].end(); ++it) {
      if (!it.value().is_string()) throw InputError(index_path.string() + ": weight_map entry '" + it.key() + "' is not a file name");
      const std::string fname = it.value().get<std::string>();
      if (fname.find('/') != std::string::npos || fname == "..") {
        throw InputError(index_path.string() + ": weight_map file '" + fname + "' is not a plain file name");
      }
      uniq.insert(fname);
    }
    names.assign(uniq.begin(), uniq.end());
  } else if (fs::exists(dir / "model.safetensors")) {
    names.push_back("model.safetensors");
  } else {
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.is_regular_file() && e.path().extension() == ".safetensors") names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
  }
  if (names.empty()) throw InputError(dir.string() + ": no *.safetensors files");
  return names;
}

/// A soft-cap of config.json: null is none (0), absent is `fallback` (transformers' class default), checked to be
/// 0 or a positive number that is finite as a float32.
float cfg_softcap(const json& cfg, const std::string& key, const std::string& src, double fallback) {
  if (cfg.contains(key) && cfg[key].is_null()) return 0.0f;
  const double cap = cfg_num(cfg, key, src, fallback);
  const float f = static_cast<float>(cap);
  if (!(cap >= 0.0) || !std::isfinite(f) || (cap > 0.0 && f == 0.0f))
    throw InputError(src + ": '" + key + "' must be null, 0 or a positive number within float range");
  return f;
}

/// Gemma 2's and Gemma 3's fields (transformers Gemma2Config / Gemma3TextConfig, whose defaults fill absent keys):
/// sliding_window on the layers "layer_types" names "sliding_attention" (absent: gemma2's layers 0, 2, 4, ...;
/// gemma3's period sliding_window_pattern, default 6), attention scale query_pre_attn_scalar^-1/2 (default 256),
/// attn_logit_softcapping and final_logit_softcapping (defaults 50 and 30 for gemma2, none for gemma3; null: none),
/// gemma3's sliding-window RoPE base rope_local_base_freq (default 10000; the global layers keep rope_theta and
/// rope_scaling), embeddings times sqrt(D), GeGLU. c.architecture, n_layers, d_model and head_dim are read.
void read_gemma_hf(const json& cfg, const std::string& src, ModelConfig& c) {
  const bool gemma3 = c.architecture == "gemma3";
  c.sliding_window = cfg_int(cfg, "sliding_window", src);
  if (c.sliding_window <= 0) throw InputError(src + ": 'sliding_window' must be positive");
  if (cfg.contains("layer_types") && !cfg["layer_types"].is_null() && !cfg["layer_types"].is_array())
    throw InputError(src + ": 'layer_types' must be an array of \"sliding_attention\" / \"full_attention\"");
  if (cfg.contains("layer_types") && cfg["layer_types"].is_array()) {
    const json& types = cfg["layer_types"];
    if (static_cast<int64_t>(types.size()) != c.n_layers)
      throw InputError(src + ": 'layer_types' has " + std::to_string(types.size()) + " entries, the model has " +
                       std::to_string(c.n_layers) + " layers");
    for (const auto& t : types) {
      if (t != "sliding_attention" && t != "full_attention")
        throw InputError(src + ": 'layer_types' entry " + t.dump() + " is not sliding_attention or full_attention");
      c.layer_sliding.push_back(t == "sliding_attention");
    }
  } else {
    const int64_t period = gemma3 ? cfg_int(cfg, "sliding_window_pattern", src, 6) : 2;
    if (period < 1)  // transformers computes (i + 1) % period
      throw InputError(src + ": 'sliding_window_pattern' must be a positive integer, got " + std::to_string(period));
    c.layer_sliding = sliding_pattern(c.n_layers, period);
  }
  if (gemma3) {
    c.rope_theta_swa = cfg_num(cfg, "rope_local_base_freq", src, 10000.0);
    if (!(c.rope_theta_swa > 0.0) || !std::isfinite(c.rope_theta_swa))
      throw InputError(src + ": 'rope_local_base_freq' must be positive");
  }
  const double scalar = cfg_num(cfg, "query_pre_attn_scalar", src, 256.0);
  c.attn_scale = static_cast<float>(1.0 / std::sqrt(scalar));
  if (!(scalar > 0.0) || !std::isfinite(c.attn_scale) || c.attn_scale <= 0.0f)
    throw InputError(src + ": 'query_pre_attn_scalar' must be positive, with 1/sqrt of it within float range");
  c.attn_logit_softcap = cfg_softcap(cfg, "attn_logit_softcapping", src, gemma3 ? 0.0 : 50.0);
  c.final_logit_softcap = cfg_softcap(cfg, "final_logit_softcapping", src, gemma3 ? 0.0 : 30.0);
  c.embed_scale = std::sqrt(static_cast<float>(c.d_model));
  c.ffn_act = FfnActivation::gelu_tanh;
}

/// config.json's "rope_scaling" (null, absent or {"rope_type" or "type": "default" | "linear" | "llama3", ...}) into
/// c.rope_scaling; anything else (longrope, yarn, dynamic, a non-object) is refused naming the key. Phi-3 takes none.
void read_rope_scaling(const json& cfg, const std::string& csrc, const std::string& model_type, ModelConfig& c) {
  if (cfg.contains("rope_scaling") && !cfg["rope_scaling"].is_null() && !cfg["rope_scaling"].is_object())
    throw InputError(csrc + ": 'rope_scaling' must be an object or null, got " + cfg["rope_scaling"].dump());
  if (cfg.contains("rope_scaling") && cfg["rope_scaling"].is_object()) {
    const json& rs = cfg["rope_scaling"];
    for (const char* key : {"rope_type", "type"})
      if (rs.contains(key) && !rs[key].is_string())
        throw InputError(csrc + ": 'rope_scaling." + key + "' must be a string, got " + rs[key].dump());
    std::string type = rs.value("rope_type", rs.value("type", std::string("default")));
    if (type == "default") {
      type = "none";
    } else if (type == "linear" || type == "llama3") {
      c.rope_scaling.factor = cfg_num(rs, "factor", csrc, 0.0);
      if (type == "llama3") {
        c.rope_scaling.low_freq_factor = cfg_num(rs, "low_freq_factor", csrc, 1.0);
        c.rope_scaling.high_freq_factor = cfg_num(rs, "high_freq_factor", csrc, 4.0);
        c.rope_scaling.original_context_length = cfg_num(rs, "original_max_position_embeddings", csrc, 8192.0);
      }
    } else {
      throw InputError(csrc + ": unsupported rope_scaling type '" + type + "' (supported: default, linear, llama3)");
    }
    if (model_type == "phi3" && type != "none")  // Phi3Config accepts only longrope, which is not supported here
      throw InputError(csrc + ": rope_scaling type '" + type + "' is not supported for phi3 (only none)");
    c.rope_scaling.type = type;
  }
}

/// The model's configuration from config.json (`csrc` is its path, for messages), checked with check_sizes.
ModelConfig read_hf_config(const json& cfg, const std::string& csrc) {
  ModelConfig c;
  if (cfg.contains("model_type") && !cfg["model_type"].is_string())
    throw InputError(csrc + ": 'model_type' must be a string, got " + cfg["model_type"].dump());
  const std::string model_type = cfg.value("model_type", std::string());
  std::string arch_name = model_type;
  if (cfg.contains("architectures") && cfg["architectures"].is_array() && !cfg["architectures"].empty() &&
      cfg["architectures"][0].is_string()) {
    arch_name += arch_name.empty() ? "" : " / ";
    arch_name += cfg["architectures"][0].get<std::string>();
  }
  if (model_type == "llama" || model_type == "mistral") {
    c.architecture = "llama";
  } else if (model_type == "qwen2" || model_type == "qwen3" || model_type == "olmo2" || model_type == "gemma2" ||
             model_type == "phi3") {
    c.architecture = model_type;
  } else if (model_type == "gemma3_text") {  // Gemma3ForCausalLM (the multimodal "gemma3" nests it: not read here)
    c.architecture = "gemma3";
  } else {
    throw InputError(csrc + ": unsupported architecture '" + (arch_name.empty() ? "(no model_type)" : arch_name) +
                     "' (supported model_type: llama, mistral, qwen2, qwen3, olmo2, phi3, gemma2, gemma3_text)");
  }
  set_architecture_features(c, csrc);  // bias, Q/K norm, pre/post norms (model/architectures.hpp)
  c.n_layers = cfg_int(cfg, "num_hidden_layers", csrc);
  if (c.n_layers <= 0 || c.n_layers > detail::kMaxLayers)  // before anything is sized by it
    throw InputError(csrc + ": 'num_hidden_layers' must be in [1, " + std::to_string(detail::kMaxLayers) + "], got " +
                     std::to_string(c.n_layers));
  c.d_model = cfg_int(cfg, "hidden_size", csrc);
  c.d_ff = cfg_int(cfg, "intermediate_size", csrc);
  c.n_heads = cfg_int(cfg, "num_attention_heads", csrc);
  if (c.n_heads <= 0) throw InputError(csrc + ": 'num_attention_heads' must be positive");
  c.n_kv_heads = cfg_int(cfg, "num_key_value_heads", csrc, c.n_heads);
  // Absent keys take the transformers class's defaults (Gemma2/3: head_dim 256; Qwen3Config: 128; else D / H).
  const bool gemma = model_type == "gemma2" || model_type == "gemma3_text";
  c.head_dim = cfg_int(cfg, "head_dim", csrc, gemma ? 256 : model_type == "qwen3" ? 128 : c.d_model / c.n_heads);
  c.vocab_size = cfg_int(cfg, "vocab_size", csrc);
  c.context_length = cfg_int(cfg, "max_position_embeddings", csrc, 0);
  if (c.context_length < 0) throw InputError(csrc + ": 'max_position_embeddings' must not be negative");
  if (cfg.contains("rope_parameters")) {
    throw InputError(csrc + ": 'rope_parameters' (the transformers 5 layout) is not supported; give rope_theta and "
                     "rope_scaling as transformers 4 writes them");
  }
  c.rms_eps = static_cast<float>(
      cfg_num(cfg, "rms_norm_eps", csrc, model_type == "olmo2" || model_type == "phi3" ? 1e-5 : 1e-6));
  c.rope_theta = cfg_num(cfg, "rope_theta", csrc, model_type == "gemma3_text" ? 1e6 : 10000.0);
  if (!(c.rope_theta > 0.0) || !std::isfinite(c.rope_theta)) throw InputError(csrc + ": 'rope_theta' must be positive");
  // Absent means the model class's default in transformers: tied for Gemma 2 and 3 (their configs; save_pretrained then
  // leaves the key out), untied for LlamaConfig, MistralConfig, Qwen2/3Config, Olmo2Config and Phi3Config.
  c.tied_embeddings = cfg_bool(cfg, "tie_word_embeddings", csrc, model_type == "gemma2" || model_type == "gemma3_text");
  if (!c.qkv_bias && cfg_bool(cfg, "attention_bias", csrc, false)) {
    throw InputError(csrc + ": attention_bias = true is not supported for " + model_type);
  }
  if (cfg_bool(cfg, "mlp_bias", csrc, false)) throw InputError(csrc + ": mlp_bias = true is not supported");
  if (cfg_num(cfg, "partial_rotary_factor", csrc, 1.0) != 1.0)
    throw InputError(csrc + ": 'partial_rotary_factor' " + cfg["partial_rotary_factor"].dump() + " is not supported (partial RoPE)");
  if (model_type == "mistral" || model_type == "phi3") {  // every layer slides (transformers MistralAttention, Phi3Attention)
    c.sliding_window = cfg_int(cfg, "sliding_window", csrc, 0);
    if (c.sliding_window < 0) throw InputError(csrc + ": 'sliding_window' must be positive or null");
    if (c.sliding_window > 0) c.layer_sliding.assign(static_cast<size_t>(c.n_layers), 1);
  } else if ((model_type == "qwen2" || model_type == "qwen3") && cfg_bool(cfg, "use_sliding_window", csrc, false)) {
    c.sliding_window = cfg_int(cfg, "sliding_window", csrc, 0);
  }
  if (c.architecture == "gemma2" || c.architecture == "gemma3") read_gemma_hf(cfg, csrc, c);  // windows, scales, caps
  const char* act = c.ffn_act == FfnActivation::gelu_tanh ? "gelu_pytorch_tanh" : "silu";
  for (const char* key : {"hidden_act", "hidden_activation"}) {  // Gemma's MLP reads hidden_activation only
    if (gemma != (std::string(key) == "hidden_activation")) continue;
    if (cfg.contains(key) && !cfg[key].is_null() && cfg[key] != act) {
      throw InputError(csrc + ": " + key + " " + cfg[key].dump() + " is not supported for " + model_type + " (only \"" +
                       act + "\")");
    }
  }
  read_rope_scaling(cfg, csrc, model_type, c);
  detail::check_sizes(c, csrc);
  return c;
}

/// Reads the tensors of an opened folder into a Model, or (check_only) checks that each exists with its shape and a
/// readable dtype without reading its data, adding its element count to `elements`.
struct HfLoader {
  const std::string& folder;
  const Shards& sh;
  WeightStorage weights = WeightStorage::f32;
  bool check_only = false;
  int64_t elements = 0;  ///< check_only: element count of the tensors checked so far
  bool plus_one = false;  ///< load_norm adds 1 (gemma2, gemma3)
  std::set<std::string> used;  ///< check_only: the names of the tensors checked so far

  /// The file and tensor `name`, after checking its shape against `expected` and its dtype.
  std::pair<const SafetensorsFile*, const SafetensorsTensor*> find(const std::string& name,
                                                                   const std::vector<int64_t>& expected,
                                                                   const std::string& what) {
    auto it = sh.by_name.find(name);
    if (it == sh.by_name.end()) {
      throw InputError(folder + ": missing tensor '" + name + "' (expected shape " + detail::shape_str(expected) + ", " +
                       what + ")");
    }
    const SafetensorsFile& f = sh.files[it->second.first];
    const SafetensorsTensor& t = *it->second.second;
    detail::check_shape(f.path(), name, t.shape, expected, what);
    check_weight_dtype(f, t);
    if (check_only) elements += t.n_elements(), used.insert(name);
    return {&f, &t};
  }

  /// A float32 tensor (norms, biases, matrices kept in f32); empty with check_only.
  std::vector<float> load(const std::string& name, const std::vector<int64_t>& expected, const std::string& what) {
    const auto [f, t] = find(name, expected, what);
    if (check_only) return {};
    throw_if_cancelled();  // a run's Ctrl-C / SIGTERM (core/cancel.hpp) stops the load between tensors
    std::vector<float> out = safetensors_to_f32(*f, *t);
    f->check_unchanged("loading the model");  // truncated meanwhile: the tensor read zeros (model/mapped_file.hpp)
    return out;
  }

  /// An RMSNorm weight [n] as the forward multiplies by it: Gemma's 1 + w (transformers GemmaRMSNorm stores w and
  /// computes x * (1 + w); llama.cpp's converter adds the 1 too), the stored w otherwise.
  std::vector<float> load_norm(const std::string& name, int64_t n, const std::string& what) {
    std::vector<float> w = load(name, {n}, what);
    if (plus_one)
      for (float& x : w) x += 1.0f;
    return w;
  }

  /// A weight matrix [rows, cols]: Q8_0 blocks into `q` when storing quantized weights and the tensor is F16 or BF16
  /// with cols a multiple of 32, else float32 into `f32`.
  void load_matrix(const std::string& name, const std::vector<int64_t>& expected, const std::string& what,
                   std::vector<float>& f32, QuantMatrix& q) {
    const auto [f, t] = find(name, expected, what);
    if (check_only) return;
    const bool half = t->dtype == "F16" || t->dtype == "BF16";
    if (weights != WeightStorage::quantized || !half || expected[1] % 32 != 0) {
      f32 = load(name, expected, what);
      return;
    }
    throw_if_cancelled();
    const GgmlType type = t->dtype == "F16" ? GgmlType::F16 : GgmlType::BF16;
    q = to_quant_matrix(static_cast<uint32_t>(type), f->data(*t), expected[0], expected[1], nullptr);
    f->check_unchanged("loading the model");
  }

  void load_layer(const ModelConfig& c, int64_t l, LayerWeights& w) {
    const int64_t D = c.d_model, H = c.n_heads, Hkv = c.n_kv_heads, d = c.head_dim, F = c.d_ff;
    const std::string p = "model.layers." + std::to_string(l) + ".";
    if (c.architecture == "gemma2" || c.architecture == "gemma3") {  // four norms, each stored as w for x * (1 + w)
      w.attn_norm = load_norm(p + "input_layernorm.weight", D, "attention RMSNorm weight [hidden]");
      w.post_attn_norm = load_norm(p + "post_attention_layernorm.weight", D, "RMSNorm weight after attention [hidden]");
      w.ffn_norm = load_norm(p + "pre_feedforward_layernorm.weight", D, "MLP RMSNorm weight [hidden]");
      w.post_ffn_norm = load_norm(p + "post_feedforward_layernorm.weight", D, "RMSNorm weight after the MLP [hidden]");
    } else if (c.pre_norms) {
      w.attn_norm = load(p + "input_layernorm.weight", {D}, "attention RMSNorm weight [hidden]");
    }
    if (c.architecture == "phi3") {  // one fused [q; k; v] matrix
      std::vector<float> f32;
      QuantMatrix q;
      load_matrix(p + "self_attn.qkv_proj.weight", {(H + 2 * Hkv) * d, D},
                  "fused Q/K/V projection [(heads+2*kv_heads)*head_dim, hidden]", f32, q);
      detail::split_rows(f32, q, D, {{H * d, &w.wq, &w.quant.wq}, {Hkv * d, &w.wk, &w.quant.wk}, {Hkv * d, &w.wv, &w.quant.wv}});
    } else {
      load_matrix(p + "self_attn.q_proj.weight", {H * d, D}, "query projection [heads*head_dim, hidden]", w.wq, w.quant.wq);
      load_matrix(p + "self_attn.k_proj.weight", {Hkv * d, D}, "key projection [kv_heads*head_dim, hidden]", w.wk, w.quant.wk);
      load_matrix(p + "self_attn.v_proj.weight", {Hkv * d, D}, "value projection [kv_heads*head_dim, hidden]", w.wv, w.quant.wv);
    }
    if (c.qkv_bias) {
      w.bq = load(p + "self_attn.q_proj.bias", {H * d}, "query bias");
      w.bk = load(p + "self_attn.k_proj.bias", {Hkv * d}, "key bias");
      w.bv = load(p + "self_attn.v_proj.bias", {Hkv * d}, "value bias");
    }
    load_matrix(p + "self_attn.o_proj.weight", {D, H * d}, "output projection [hidden, heads*head_dim]", w.wo, w.quant.wo);
    if (c.architecture == "gemma2" || c.architecture == "gemma3") {
      // read above
    } else if (c.pre_norms) {  // transformers names the norm before the MLP "post_attention_layernorm"
      w.ffn_norm = load(p + "post_attention_layernorm.weight", {D}, "MLP RMSNorm weight [hidden]");
    } else {  // olmo2: the norms after attention and after the MLP
      w.post_attn_norm = load(p + "post_attention_layernorm.weight", {D}, "RMSNorm weight after attention [hidden]");
      w.post_ffn_norm = load(p + "post_feedforward_layernorm.weight", {D}, "RMSNorm weight after the MLP [hidden]");
    }
    if (c.qk_norm == QkNorm::per_head) {
      w.q_norm = load_norm(p + "self_attn.q_norm.weight", d, "per-head query RMSNorm weight [head_dim]");
      w.k_norm = load_norm(p + "self_attn.k_norm.weight", d, "per-head key RMSNorm weight [head_dim]");
    } else if (c.qk_norm == QkNorm::whole) {
      w.q_norm = load(p + "self_attn.q_norm.weight", {H * d}, "query RMSNorm weight [heads*head_dim]");
      w.k_norm = load(p + "self_attn.k_norm.weight", {Hkv * d}, "key RMSNorm weight [kv_heads*head_dim]");
    }
    if (c.architecture == "phi3") {  // one fused [gate; up] matrix (transformers Phi3MLP: gate, up = chunk(2))
      std::vector<float> f32;
      QuantMatrix q;
      load_matrix(p + "mlp.gate_up_proj.weight", {2 * F, D}, "fused MLP gate and up projection [2*ffn, hidden]", f32, q);
      detail::split_rows(f32, q, D, {{F, &w.w_gate, &w.quant.w_gate}, {F, &w.w_up, &w.quant.w_up}});
    } else {
      load_matrix(p + "mlp.gate_proj.weight", {F, D}, "MLP gate projection [ffn, hidden]", w.w_gate, w.quant.w_gate);
      load_matrix(p + "mlp.up_proj.weight", {F, D}, "MLP up projection [ffn, hidden]", w.w_up, w.quant.w_up);
    }
    load_matrix(p + "mlp.down_proj.weight", {D, F}, "MLP down projection [hidden, ffn]", w.w_down, w.quant.w_down);
  }

  /// The model-wide tensors: embeddings, final norm, LM head (untied only).
  void load_globals(Model& m) {
    const ModelConfig& c = m.config;
    const int64_t D = c.d_model, V = c.vocab_size;
    load_matrix("model.embed_tokens.weight", {V, D}, "token embeddings [vocab, hidden]", m.tok_embd, m.tok_embd_q);
    m.output_norm = load_norm("model.norm.weight", D, "final RMSNorm weight [hidden]");
    if (!c.tied_embeddings) load_matrix("lm_head.weight", {V, D}, "LM head [vocab, hidden]", m.lm_head, m.lm_head_q);
  }
};

/// Opens `folder`: config.json read and checked, the shards' headers parsed, every tensor checked without reading
/// its data (the layers' first: a corrupt num_hidden_layers or head size would otherwise ask for terabytes; see
/// fuzz/fuzz_gguf.cpp for the GGUF twin). Fills m (no weights) and sh.
void open_hf(const std::string& folder, Model& m, Shards& sh) {
  const fs::path dir(folder);
  const fs::path cfg_path = dir / "config.json";
  if (!fs::exists(cfg_path)) throw InputError(folder + ": no config.json (expected a Hugging Face model folder)");
  const std::string csrc = cfg_path.string();
  const json cfg = read_json(cfg_path);
  if (!cfg.is_object()) throw InputError(csrc + ": not a JSON object");

  m.path = folder;
  m.format = "safetensors";
  try {
    m.config = read_hf_config(cfg, csrc);
  } catch (const json::exception& e) {  // a value of an unexpected JSON type the reads above did not check
    throw InputError(csrc + ": " + e.what());
  }

  sh.names = shard_names(dir);
  sh.files.reserve(sh.names.size());
  for (const auto& n : sh.names) sh.files.emplace_back((dir / n).string());
  for (size_t k = 0; k < sh.files.size(); ++k) {
    for (const auto& t : sh.files[k].tensors()) {
      auto [it, fresh] = sh.by_name.emplace(t.name, std::make_pair(k, &t));
      if (!fresh) {
        throw InputError(folder + ": tensor '" + t.name + "' appears in both " + sh.names[it->second.first] + " and " +
                         sh.names[k]);
      }
      m.source_tensors.push_back({t.name, t.dtype, t.shape});
    }
  }

  HfLoader check{folder, sh, WeightStorage::f32, /*check_only=*/true, 0, false, {}};
  LayerWeights none;
  for (int64_t l = 0; l < m.config.n_layers; ++l) check.load_layer(m.config, l, none);
  check.load_globals(m);  // check_only: leaves its weights empty
  // A tensor the architecture does not read means the folder holds another model than config.json says (transformers
  // warns of unused weights; llama.cpp refuses them). Old checkpoints' rotary_emb.inv_freq buffers are recomputed,
  // and a tied model's lm_head.weight is ignored, as transformers ignores both.
  for (const auto& [name, where] : sh.by_name) {
    const bool buffer = name.size() >= 19 && name.compare(name.size() - 19, 19, "rotary_emb.inv_freq") == 0;
    if (check.used.count(name) || buffer || (m.config.tied_embeddings && name == "lm_head.weight")) continue;
    throw InputError(folder + ": tensor '" + name + "' (in " + sh.names[where.first] + ") is not part of a " +
                     m.config.architecture + " model as config.json describes it (" + layer_features(m.config) +
                     "): the folder holds another architecture than its config.json says");
  }
  m.source_parameters = check.elements;
  detail::finish_config(m, csrc);
}

/// Identity of a folder: SHA-256 of the lines "<file> <sha256 of file>\n" of config.json and the shards `names`,
/// sorted by name (streaming reads of every byte).
std::string hf_identity(const fs::path& dir, std::vector<std::string> names) {
  names.push_back("config.json");
  std::sort(names.begin(), names.end());
  std::string manifest;
  for (const auto& n : names) manifest += n + " " + sha256_file((dir / n).string()) + "\n";
  return sha256_hex(manifest.data(), manifest.size());
}

}  // namespace

Model describe_hf_model(const std::string& folder) {
  Model m;
  Shards sh;
  open_hf(folder, m, sh);
  return m;
}

std::string hf_model_sha256(const std::string& folder) { return hf_identity(fs::path(folder), shard_names(folder)); }

Model load_hf_model(const std::string& folder, WeightStorage weights) {
  Model m;
  Shards sh;
  open_hf(folder, m, sh);
  m.weights = weights;
  HfLoader ld{folder, sh, weights, /*check_only=*/false, 0, false, {}};
  ld.plus_one = m.config.architecture == "gemma2" || m.config.architecture == "gemma3";
  ld.load_globals(m);
  m.layers.resize(static_cast<size_t>(m.config.n_layers));
  for (int64_t l = 0; l < m.config.n_layers; ++l) ld.load_layer(m.config, l, m.layers[static_cast<size_t>(l)]);
  m.sha256 = hf_identity(fs::path(folder), sh.names);
  return m;
}

}  // namespace rkv
