#include "model/model_info.hpp"

#include "model/architectures.hpp"

#include <cmath>
#include <iomanip>
#include <map>
#include <sstream>
#include <string>

namespace rkv {

std::string human_count(int64_t n) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1);
  if (n >= 1000000000) {
    s << n / 1e9 << "B";
  } else if (n >= 1000000) {
    s << n / 1e6 << "M";
  } else {
    s << n;
  }
  return s.str();
}

std::string model_name(const Model& m) {
  if (!m.gguf) return "";
  const auto* name = m.gguf->find("general.name");
  return name && name->type == GgufType::STRING ? name->str : "";
}

namespace {

/// Bytes the f32 cache of layer set `sliding` (true: the sliding-window layers, false: the global ones) needs after T
/// tokens: sum of the layers' spans min(T, window) x H_kv x (2 d x 4 + 4) (keys, values and an int32 position).
int64_t span_bytes(const ModelConfig& c, int64_t T, bool sliding) {
  int64_t entries = 0;
  for (int64_t l = 0; l < c.n_layers; ++l)
    if (c.is_sliding(l) == sliding) entries += c.layer_span(l, T);
  return entries * c.n_kv_heads * (2 * c.head_dim * 4 + 4);
}

/// Layer types, window, attention scale and the KV bytes a windowed cache needs at 1K/4K/32K tokens.
void print_layer_types(const ModelConfig& c, std::ostream& os) {
  int64_t n_sliding = 0;
  std::string globals;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    if (c.is_sliding(l)) {
      ++n_sliding;
    } else {
      globals += (globals.empty() ? "" : ", ") + std::to_string(l);
    }
  }
  os << "layer types:       " << n_sliding << " sliding-window (window " << c.sliding_window << ": key visible iff "
     << "q_pos - k_pos < " << c.sliding_window << "), " << c.n_layers - n_sliding << " global"
     << (globals.empty() ? std::string() : " (layers " + globals + ")") << "\n";
  const int64_t entry_bytes = c.n_kv_heads * (2 * c.head_dim * 4 + 4);
  for (const int64_t T : {1024, 4096, 32768}) {
    const int64_t local = span_bytes(c, T, true), global = span_bytes(c, T, false);
    std::ostringstream line;
    line << std::fixed << std::setprecision(1) << "KV bytes at " << T << ":" << std::string(T < 10000 ? 2 : 1, ' ')
         << local + global << " (" << static_cast<double>(local + global) / static_cast<double>(T)
         << "/token; global layers " << 100.0 * static_cast<double>(global) / static_cast<double>(local + global)
         << "%); the forward keeps all " << T * c.n_layers * entry_bytes << " and masks by position\n";
    os << line.str();
  }
}

/// What the CPU backend holds with model.weights = "quantized" (the default) for this file.
std::string native_formats_note(const Model& m) {
  bool requantized = false, native = false;
  if (m.format != "gguf") {  // safetensors: F16/BF16 matrices are requantized, F32 ones stay float32
    for (const auto& t : m.source_tensors) requantized |= t.shape.size() == 2 && (t.type == "F16" || t.type == "BF16");
    return std::string(requantized ? "f16/bf16 matrices requantized to q8_0" : "f32 (an F32 folder stays f32)") +
           " (model.weights = \"quantized\", the default; \"f32\" dequantizes all)";
  }
  for (const auto& t : m.source_tensors) {
    if (t.shape.size() != 2) continue;
    const bool is_native = t.type == "q8_0" || t.type == "q4_0" || t.type == "q4_1";
    native |= is_native;
    requantized |= !is_native && t.type != "f32";
  }
  std::string s = native ? "matrices kept in their q8_0/q4_0/q4_1 blocks" : "no q8_0/q4_0/q4_1 matrices";
  if (requantized) s += "; other quantized/half matrices requantized to q8_0";
  return s + " (model.weights = \"quantized\", the default; \"f32\" dequantizes all)";
}

}  // namespace

void print_model_info(const Model& m, std::ostream& os) {
  const ModelConfig& c = m.config;
  os << "path:              " << m.path << "\n"
     << "format:            " << m.format << "\n"
     << "sha256:            " << (m.sha256.empty() ? "(not computed; --sha256 reads the whole file)" : m.sha256) << "\n"
     << "architecture:      " << c.architecture << "\n";
  if (const std::string name = model_name(m); !name.empty()) os << "name:              " << name << "\n";
  os << "layers:            " << c.n_layers << "\n"
     << "hidden size:       " << c.d_model << "\n"
     << "heads:             " << c.n_heads << "\n"
     << "KV heads:          " << c.n_kv_heads << " (group size " << c.group_size() << ")\n"
     << "head dim:          " << c.head_dim << "\n"
     << "feed-forward size: " << c.d_ff << "\n"
     << "vocab size:        " << c.vocab_size << "\n"
     << "context length:    " << c.context_length << "\n"
     << "rope:              theta " << c.rope_theta;
  if (!c.layer_sliding.empty() && c.rope_theta_swa > 0.0) os << " (global layers), " << c.rope_theta_swa << " (sliding-window layers)";
  os << ", rotate_half (NeoX) pairs, scaling " << c.rope_scaling.type;
  if (c.rope_scaling.type == "linear") os << " (factor " << c.rope_scaling.factor << ")";
  if (c.rope_scaling.type != "none" && c.rope_theta_swa > 0.0 && !c.layer_sliding.empty()) os << " on the global layers";
  if (c.rope_scaling.type == "llama3") {
    os << " (factor " << c.rope_scaling.factor << ", low " << c.rope_scaling.low_freq_factor << ", high "
       << c.rope_scaling.high_freq_factor << ", original context " << c.rope_scaling.original_context_length << ")";
  }
  if (c.rope_freq_factors) os << ", per-frequency factors from rope_freqs.weight";
  os << "\n"
     << "rms norm eps:      " << c.rms_eps << "\n"
     << "tied embeddings:   " << (c.tied_embeddings ? "yes" : "no") << "\n"
     << "qkv bias:          " << (c.qkv_bias ? "yes" : "no") << "\n";
  if (!c.layer_sliding.empty()) {
    print_layer_types(c, os);
  } else if (c.sliding_window > 0) {
    os << "sliding window:    " << c.sliding_window << " (not applied: longer contexts are refused)\n";
  }
  const float scale = c.attention_scale();
  os << "attention scale:   " << scale << " (1/sqrt(" << std::lround(1.0 / (static_cast<double>(scale) * scale))
     << ")" << (c.attn_scale > 0.0f ? "" : ": the head dim") << ")\n";
  if (c.embed_scale != 1.0f) os << "embedding scale:   " << c.embed_scale << " (sqrt(hidden size))\n";
  if (c.attn_logit_softcap > 0.0f)
    os << "score soft-cap:    " << c.attn_logit_softcap << " (c tanh(s / c) on every attention score before the softmax)\n";
  if (c.final_logit_softcap > 0.0f) os << "logit soft-cap:    " << c.final_logit_softcap << " (c tanh(logits / c))\n";
  os << "layer:             " << layer_features(c) << "\n";
  std::map<std::string, int> types;
  for (const auto& t : m.source_tensors) ++types[t.type];
  os << "tensor types:      ";
  bool first = true;
  for (const auto& [type, count] : types) {
    os << (first ? "" : ", ") << type << " x" << count;
    first = false;
  }
  os << " (" << m.source_tensors.size() << " tensors)\n"
     << "cpu weights:       " << native_formats_note(m) << "\n"
     << "parameters:        " << m.parameter_count() << " (" << human_count(m.parameter_count()) << ")\n"
     << "KV bytes/token:    " << c.kv_bytes_per_token() << " (f32 keys and values, all layers, full span)\n";
}


}  // namespace rkv
