// Loading a model from a GGUF file (llama.cpp naming: token_embd, blk.N.attn_q, ..., output_norm, output).
#include <algorithm>
#include <cmath>
#include <set>

#include "core/cancel.hpp"
#include "core/errors.hpp"
#include "model/architectures.hpp"
#include "model/dequant.hpp"
#include "model/gemma.hpp"
#include "model/ggml_types.hpp"
#include "model/model.hpp"
#include "model/model_check.hpp"
#include "core/sha256.hpp"

namespace rkv {

namespace {

struct GgufLoader {
  const GgufFile& f;
  const std::string& src;
  bool check_only = false;  ///< load() only checks that the tensor exists with its shape and type, and returns {}
  WeightStorage storage = WeightStorage::f32;  ///< where load_matrix() puts a matrix
  std::shared_ptr<const void> keep;            ///< owner of the mapped bytes a QuantMatrix view points into
  int64_t* elements = nullptr;  ///< when set, require() adds the element count of each tensor it finds (from its info)
  std::set<std::string>* used = nullptr;  ///< when set, require() adds the name of each tensor it finds

  /// Tensor shape in PyTorch order (ggml ne reversed).
  static std::vector<int64_t> torch_shape(const GgufTensorInfo& t) { return {t.ne.rbegin(), t.ne.rend()}; }

  const GgufTensorInfo& require(const std::string& name, const std::vector<int64_t>& expected,
                                const std::string& what) const {
    const GgufTensorInfo* t = f.find_tensor(name);
    if (!t) {
      throw InputError(src + ": missing tensor '" + name + "' (expected shape " + detail::shape_str(expected) + ", " +
                       what + ")");
    }
    detail::check_shape(src, name, torch_shape(*t), expected, what);
    check_type(*t);
    if (elements) *elements += t->n_elements();
    if (used) used->insert(name);
    return *t;
  }

  /// Throws InputError naming the tensor when its type is one this loader cannot read (checked from the tensor info,
  /// so a check-only pass finds it before any data is read).
  void check_type(const GgufTensorInfo& t) const {
    if (!can_dequantize(t.type)) {
      throw InputError(src + ": tensor '" + t.name + "' has type " + ggml_type_name(t.type) +
                       ", which this loader cannot dequantize (supported: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, "
                       "q5_1, iq4_nl, q4_K, q5_K, q6_K)");
    }
  }

  std::vector<float> dequant(const GgufTensorInfo& t) const {
    check_type(t);
    std::vector<float> out(static_cast<size_t>(t.n_elements()));
    dequantize_row(t.type, f.tensor_data(t), out.data(), t.n_elements());
    return out;
  }

  std::vector<float> load(const std::string& name, const std::vector<int64_t>& expected, const std::string& what) const {
    const GgufTensorInfo& t = require(name, expected, what);
    if (check_only) return {};
    throw_if_cancelled();  // a run's Ctrl-C / SIGTERM (core/cancel.hpp) stops the load between tensors
    std::vector<float> out = dequant(t);
    drop(t);
    return out;
  }

  /// Drops the mapped pages of tensor t, which the model holds a copy of (GgufFile::drop_pages; still readable).
  void drop(const GgufTensorInfo& t) const { f.drop_pages(f.tensor_data(t), static_cast<size_t>(t.n_bytes)); }
  void drop(const std::string& name) const {
    if (const GgufTensorInfo* t = f.find_tensor(name)) drop(*t);
  }

  /// A weight matrix [rows, cols]: into `q` (model/quant_matrix.hpp) when storing quantized weights and its type is
  /// not F32, else dequantized into `f32`. With check_only: only checks that it exists with its shape and type.
  void load_matrix(const std::string& name, const std::vector<int64_t>& expected, const std::string& what,
                   std::vector<float>& f32, QuantMatrix& q) const {
    const GgufTensorInfo& t = require(name, expected, what);
    if (check_only) return;
    throw_if_cancelled();
    if (storage == WeightStorage::quantized && can_quantize_matrix(t.type) && expected[1] % 32 == 0) {
      q = to_quant_matrix(t.type, f.tensor_data(t), expected[0], expected[1], keep);
      if (q.data != f.tensor_data(t)) drop(t);  // requantized: a copy
    } else {
      f32 = dequant(t);
      drop(t);
    }
  }

  /// Integer hyperparameter `<arch>.<key>`; required unless a fallback is given.
  int64_t hparam(const std::string& key, std::optional<int64_t> fallback = std::nullopt) const {
    const auto v = f.get_i64(key);
    if (v) return *v;
    if (fallback) return *fallback;
    throw InputError(src + ": missing GGUF metadata key '" + key + "'");
  }
};

/// Loads the tensors of layer `l` into `w` (with ld.check_only: only checks that they exist with their shapes and
/// types, reading no tensor data).
void load_layer(const GgufLoader& ld, const ModelConfig& c, int64_t l, LayerWeights& w) {
  const int64_t D = c.d_model, H = c.n_heads, Hkv = c.n_kv_heads, d = c.head_dim, F = c.d_ff;
  const std::string p = "blk." + std::to_string(l) + ".";
  if (c.pre_norms) w.attn_norm = ld.load(p + "attn_norm.weight", {D}, "attention RMSNorm weight [hidden]");
  if (c.architecture == "phi3") {  // one fused [q; k; v] matrix
    std::vector<float> f32;
    QuantMatrix q;
    ld.load_matrix(p + "attn_qkv.weight", {(H + 2 * Hkv) * d, D}, "fused Q/K/V projection [(heads+2*kv_heads)*head_dim, hidden]",
                   f32, q);
    detail::split_rows(f32, q, D, {{H * d, &w.wq, &w.quant.wq}, {Hkv * d, &w.wk, &w.quant.wk}, {Hkv * d, &w.wv, &w.quant.wv}});
  } else {
    ld.load_matrix(p + "attn_q.weight", {H * d, D}, "query projection [heads*head_dim, hidden]", w.wq, w.quant.wq);
    ld.load_matrix(p + "attn_k.weight", {Hkv * d, D}, "key projection [kv_heads*head_dim, hidden]", w.wk, w.quant.wk);
    ld.load_matrix(p + "attn_v.weight", {Hkv * d, D}, "value projection [kv_heads*head_dim, hidden]", w.wv, w.quant.wv);
  }
  if (c.qkv_bias) {
    w.bq = ld.load(p + "attn_q.bias", {H * d}, "query bias");
    w.bk = ld.load(p + "attn_k.bias", {Hkv * d}, "key bias");
    w.bv = ld.load(p + "attn_v.bias", {Hkv * d}, "value bias");
  }
  ld.load_matrix(p + "attn_output.weight", {D, H * d}, "output projection [hidden, heads*head_dim]", w.wo, w.quant.wo);
  if (c.pre_norms) w.ffn_norm = ld.load(p + "ffn_norm.weight", {D}, "MLP RMSNorm weight [hidden]");
  if (c.architecture == "phi3") {  // one fused [gate; up] matrix (llama.cpp LLM_FFN_SWIGLU on the fused rows)
    std::vector<float> f32;
    QuantMatrix q;
    ld.load_matrix(p + "ffn_up.weight", {2 * F, D}, "fused MLP gate and up projection [2*ffn, hidden]", f32, q);
    detail::split_rows(f32, q, D, {{F, &w.w_gate, &w.quant.w_gate}, {F, &w.w_up, &w.quant.w_up}});
  } else {
    ld.load_matrix(p + "ffn_gate.weight", {F, D}, "MLP gate projection [ffn, hidden]", w.w_gate, w.quant.w_gate);
    ld.load_matrix(p + "ffn_up.weight", {F, D}, "MLP up projection [ffn, hidden]", w.w_up, w.quant.w_up);
  }
  ld.load_matrix(p + "ffn_down.weight", {D, F}, "MLP down projection [hidden, ffn]", w.w_down, w.quant.w_down);
  if (c.qk_norm == QkNorm::per_head) {
    w.q_norm = ld.load(p + "attn_q_norm.weight", {d}, "per-head query RMSNorm weight [head_dim]");
    w.k_norm = ld.load(p + "attn_k_norm.weight", {d}, "per-head key RMSNorm weight [head_dim]");
  } else if (c.qk_norm == QkNorm::whole) {
    w.q_norm = ld.load(p + "attn_q_norm.weight", {H * d}, "query RMSNorm weight [heads*head_dim]");
    w.k_norm = ld.load(p + "attn_k_norm.weight", {Hkv * d}, "key RMSNorm weight [kv_heads*head_dim]");
  }
  if (c.post_norms) {
    w.post_attn_norm = ld.load(p + "post_attention_norm.weight", {D}, "RMSNorm weight after attention [hidden]");
    w.post_ffn_norm = ld.load(p + "post_ffw_norm.weight", {D}, "RMSNorm weight after the MLP [hidden]");
  }
  if (find_architecture(c.architecture)->gguf_permuted_qk && !ld.check_only) {  // undo llama.cpp's permutation (model.hpp)
    if (w.quant.wq.empty()) {
      unpermute_qk_rows(w.wq, H, d, D);
    } else {  // the reordered copy replaces the view: its mapped pages are not read again
      w.quant.wq = unpermute_qk_rows(w.quant.wq, H, d);
      ld.drop(p + "attn_q.weight");
    }
    if (w.quant.wk.empty()) {
      unpermute_qk_rows(w.wk, Hkv, d, D);
    } else {
      w.quant.wk = unpermute_qk_rows(w.quant.wk, Hkv, d);
      ld.drop(p + "attn_k.weight");
    }
  }
}

/// Checks, without reading tensor data, that the file holds every tensor the model needs with its shape and a
/// loadable type: the layers' first (so a corrupt block_count or head size is refused before anything is sized by it;
/// found by fuzz/fuzz_gguf.cpp), then the embeddings, final norm and LM head. Sets c.tied_embeddings (no
/// output.weight). Returns the element count of those tensors (tied embeddings counted once): the model's parameters.
int64_t check_tensors(const GgufFile& f, const std::string& src, ModelConfig& c) {
  int64_t elements = 0;
  std::set<std::string> used;
  if (c.architecture == "llama") used.insert("rope_freqs.weight");  // llama3 factors: read by describe_gguf_from
  GgufLoader ld{f, src, /*check_only=*/true, WeightStorage::f32, nullptr, &elements, &used};
  LayerWeights none;
  for (int64_t l = 0; l < c.n_layers; ++l) load_layer(ld, c, l, none);
  const int64_t V = c.vocab_size, D = c.d_model;
  ld.load_matrix("token_embd.weight", {V, D}, "token embeddings [vocab, hidden]", none.wq, none.quant.wq);
  ld.load("output_norm.weight", {D}, "final RMSNorm weight [hidden]");
  c.tied_embeddings = f.find_tensor("output.weight") == nullptr;
  if (!c.tied_embeddings) ld.load_matrix("output.weight", {V, D}, "LM head [vocab, hidden]", none.wq, none.quant.wq);
  // A tensor the architecture does not read means the file is another model than its metadata says (llama.cpp
  // refuses such a file too: "wrong number of tensors").
  for (const auto& t : f.tensors())
    if (!used.count(t.name))
      throw InputError(src + ": tensor '" + t.name + "' is not part of a " + c.architecture + " model as ripplekv reads "
                       "it (" + layer_features(c) + "): the file holds another architecture than its metadata says");
  return elements;
}

/// The model of `file` without its weights (describe_gguf_model): configuration, source tensors, parameter count,
/// RoPE frequencies. Reads the metadata and tensor infos parsed into `file`, and of the tensor data only the tiny
/// rope_freqs.weight factors.
Model describe_gguf_from(const std::shared_ptr<const GgufFile>& file) {
  const GgufFile& f = *file;
  const std::string& path = f.path();
  const std::string& src = path;
  GgufLoader ld{f, src, false, WeightStorage::f32, nullptr};

  Model m;
  m.path = path;
  m.format = "gguf";
  m.gguf = file;
  for (const auto& t : f.tensors()) m.source_tensors.push_back({t.name, ggml_type_name(t.type), GgufLoader::torch_shape(t)});

  ModelConfig& c = m.config;
  c.architecture = f.get_string_or("general.architecture", "");
  if (c.architecture.empty()) throw InputError(src + ": missing GGUF metadata key 'general.architecture'");
  set_architecture_features(c, src);  // bias, Q/K norm, pre/post norms (model/architectures.hpp)
  const std::string a = c.architecture + ".";
  c.n_layers = ld.hparam(a + "block_count");
  if (c.n_layers <= 0 || c.n_layers > detail::kMaxLayers)  // before a window pattern is sized by it
    throw InputError(src + ": " + a + "block_count must be in [1, " + std::to_string(detail::kMaxLayers) + "], got " +
                     std::to_string(c.n_layers));
  c.d_model = ld.hparam(a + "embedding_length");
  c.d_ff = ld.hparam(a + "feed_forward_length");
  c.n_heads = ld.hparam(a + "attention.head_count");
  c.n_kv_heads = ld.hparam(a + "attention.head_count_kv", c.n_heads);
  c.context_length = ld.hparam(a + "context_length", 0);
  if (c.n_heads <= 0) throw InputError(src + ": " + a + "attention.head_count must be positive");
  c.head_dim = ld.hparam(a + "attention.key_length", c.d_model / c.n_heads);
  if (ld.hparam(a + "attention.value_length", c.head_dim) != c.head_dim) {
    throw InputError(src + ": " + a + "attention.value_length differs from the key length (not supported)");
  }
  if (ld.hparam(a + "rope.dimension_count", c.head_dim) != c.head_dim) {
    throw InputError(src + ": " + a + "rope.dimension_count " + std::to_string(ld.hparam(a + "rope.dimension_count")) +
                     " differs from the head dimension " + std::to_string(c.head_dim) + " (partial RoPE is not supported)");
  }
  c.rms_eps = f.get_f32(a + "attention.layer_norm_rms_epsilon").value_or(1e-5f);
  c.rope_theta = f.get_f64(a + "rope.freq_base").value_or(10000.0);
  if (!(c.rope_theta > 0.0) || !std::isfinite(c.rope_theta))
    throw InputError(src + ": " + a + "rope.freq_base must be positive and finite");
  c.sliding_window = ld.hparam(a + "attention.sliding_window", 0);
  if (c.architecture == "gemma3") read_gemma3_config(f, src, c);  // window, layer pattern, scales (gemma.hpp)
  if (c.architecture == "gemma2") read_gemma2_config(f, src, c);
  if (c.architecture == "phi3") {
    // transformers' Phi3 applies its window on every layer; llama.cpp currently ignores it (its PR 13676), so a long
    // prompt here follows transformers, not llama.cpp.
    if (c.sliding_window > 0) c.layer_sliding.assign(static_cast<size_t>(c.n_layers), 1);
    for (const char* name : {"rope_factors_long.weight", "rope_factors_short.weight"})
      if (f.find_tensor(name))
        throw InputError(src + ": tensor '" + name + "': Phi-3's longrope scaling is not supported");
  }
  const std::string scaling = f.get_string_or(a + "rope.scaling.type", "none");
  if (scaling == "linear") {
    c.rope_scaling.type = "linear";
    if (const auto fs = f.get_f64(a + "rope.scaling.factor")) {
      c.rope_scaling.factor = *fs;
    } else if (const auto fr = f.get_f64(a + "rope.scale_linear")) {
      c.rope_scaling.factor = *fr;
    } else {
      throw InputError(src + ": linear rope scaling without " + a + "rope.scaling.factor");
    }
  } else if (scaling != "none") {
    throw InputError(src + ": unsupported rope scaling type '" + scaling + "' (supported: none, linear, llama3)");
  }

  const int64_t D = c.d_model, d = c.head_dim;
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd) throw InputError(src + ": missing tensor 'token_embd.weight' (the token embeddings, [vocab, " + std::to_string(D) + "])");
  c.vocab_size = ld.hparam(a + "vocab_size", embd->ne.size() == 2 ? embd->ne[1] : 0);

  std::vector<float> freq_factors;
  if (const GgufTensorInfo* rf = c.architecture == "llama" ? f.find_tensor("rope_freqs.weight") : nullptr) {
    detail::check_shape(src, rf->name, GgufLoader::torch_shape(*rf), {d / 2}, "llama3 rope frequency factors");
    freq_factors = ld.dequant(*rf);  // d/2 floats: the one tensor whose data a description reads
    c.rope_freq_factors = true;
    c.rope_scaling.type = "none";  // the factors already encode the scaling
  }
  // Every tensor must be in the file with its shape before anything is sized by the hyperparameters: a corrupt
  // block_count or head size would otherwise ask for terabytes (found by fuzz/fuzz_gguf.cpp).
  detail::check_sizes(c, src);
  m.source_parameters = check_tensors(f, src, c);
  detail::finish_config(m, src, freq_factors);
  return m;
}

Model load_gguf_model_from(const std::shared_ptr<const GgufFile>& file, WeightStorage weights) {
  const GgufFile& f = *file;
  Model m = describe_gguf_from(file);  // configuration and every tensor checked, no weights read yet
  m.weights = weights;
  GgufLoader ld{f, f.path(), false, weights, file};
  const ModelConfig& c = m.config;
  const int64_t D = c.d_model, V = c.vocab_size;

  // The hash reads every page first; each tensor copied below (dequantized, requantized, Q/K-reordered) then drops
  // its mapped pages from the resident set, so the weights are never resident twice.
  Sha256 hash;
  constexpr size_t kChunk = size_t{16} << 20;  // poll cancellation between chunks
  for (size_t off = 0; off < f.file_size(); off += kChunk) {
    throw_if_cancelled();
    hash.update(f.file_data() + off, std::min<size_t>(kChunk, static_cast<size_t>(f.file_size()) - off));
  }
  m.sha256 = hash.hex_digest();

  ld.load_matrix("token_embd.weight", {V, D}, "token embeddings [vocab, hidden]", m.tok_embd, m.tok_embd_q);
  m.output_norm = ld.load("output_norm.weight", {D}, "final RMSNorm weight [hidden]");
  if (!c.tied_embeddings) ld.load_matrix("output.weight", {V, D}, "LM head [vocab, hidden]", m.lm_head, m.lm_head_q);

  m.layers.resize(static_cast<size_t>(c.n_layers));  // the file holds every layer (checked above)
  for (int64_t l = 0; l < c.n_layers; ++l) load_layer(ld, c, l, m.layers[static_cast<size_t>(l)]);
  f.check_unchanged("loading the model");  // every byte was read: a truncation meanwhile is known now
  return m;
}

/// Runs `read` (a describe or load of `file`); an InputError on a file truncated meanwhile is reported as the
/// truncation: such a file reads as zeros past its new end (model/mapped_file.hpp), not as what the zeros look like.
template <typename Read>
Model reporting_truncation(const GgufFile& file, Read read) {
  try {
    return read();
  } catch (const InputError&) {
    file.check_unchanged("loading the model");
    throw;
  }
}

}  // namespace

Model load_gguf_model(const std::string& path, WeightStorage weights) {
  return load_gguf_model(std::make_shared<const GgufFile>(path), weights);
}

Model load_gguf_model(const std::shared_ptr<const GgufFile>& file, WeightStorage weights) {
  return reporting_truncation(*file, [&] { return load_gguf_model_from(file, weights); });
}

Model describe_gguf_model(const std::shared_ptr<const GgufFile>& file) {
  return reporting_truncation(*file, [&] { return describe_gguf_from(file); });
}

}  // namespace rkv
