#include "model/gemma3.hpp"

#include <cmath>

#include "core/errors.hpp"

namespace rkv {

std::vector<uint8_t> sliding_pattern(int64_t n_layers, int64_t period) {
  if (period < 0) throw InputError("sliding-window pattern period " + std::to_string(period) + " is negative");
  std::vector<uint8_t> sliding(static_cast<size_t>(n_layers));
  for (int64_t l = 0; l < n_layers; ++l) sliding[static_cast<size_t>(l)] = period == 0 || l % period < period - 1;
  return sliding;
}

namespace {

/// The sliding-window flags from "gemma3.attention.sliding_window_pattern" (array or period), else period 6.
std::vector<uint8_t> read_pattern(const GgufFile& f, const std::string& src, int64_t L) {
  const std::string key = "gemma3.attention.sliding_window_pattern";
  const GgufValue* v = f.find(key);
  if (!v) return sliding_pattern(L, 6);
  if (!v->is_array()) {
    const auto period = f.get_i64(key);
    if (!period || *period < 0) throw InputError(src + ": " + key + " must be a non-negative integer or an array");
    return sliding_pattern(L, *period);
  }
  const std::vector<int64_t> flags = f.get_i64_array(key);
  if (static_cast<int64_t>(flags.size()) != L) {
    throw InputError(src + ": " + key + " has " + std::to_string(flags.size()) + " entries, the model has " +
                     std::to_string(L) + " layers");
  }
  std::vector<uint8_t> sliding(flags.size());
  for (size_t l = 0; l < flags.size(); ++l) sliding[l] = flags[l] != 0;
  return sliding;
}

}  // namespace

void read_gemma3_config(const GgufFile& f, const std::string& src, ModelConfig& c) {
  const std::string a = "gemma3.";
  const auto window = f.get_i64(a + "attention.sliding_window");
  if (!window) throw InputError(src + ": missing GGUF metadata key '" + a + "attention.sliding_window'");
  if (*window <= 0) throw InputError(src + ": " + a + "attention.sliding_window must be positive, got " + std::to_string(*window));
  c.sliding_window = *window;
  c.layer_sliding = read_pattern(f, src, c.n_layers);
  c.rope_theta_swa = f.get_f64(a + "rope.freq_base_swa").value_or(10000.0);
  if (!(c.rope_theta_swa > 0.0)) throw InputError(src + ": " + a + "rope.freq_base_swa must be positive");
  if (const auto s = f.get_f32(a + "attention.scale")) {
    if (!(*s > 0.0f)) throw InputError(src + ": " + a + "attention.scale must be positive");
    c.attn_scale = *s;
  } else {
    const int64_t scalar = c.n_layers == 62 ? c.d_model / c.n_heads : c.head_dim;  // llama.cpp: 27B uses D/H
    c.attn_scale = 1.0f / std::sqrt(static_cast<float>(scalar));
  }
  const float cap = f.get_f32(a + "final_logit_softcapping").value_or(0.0f);
  if (cap < 0.0f || !std::isfinite(cap)) throw InputError(src + ": " + a + "final_logit_softcapping must be >= 0");
  c.final_logit_softcap = cap;
  c.embed_scale = std::sqrt(static_cast<float>(c.d_model));
  c.qk_norm = QkNorm::per_head;
  c.post_norms = true;
  c.ffn_act = FfnActivation::gelu_tanh;
}

}  // namespace rkv
