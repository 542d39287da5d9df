#include "model/gemma.hpp"

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

/// The sliding-window flags from "<arch>.attention.sliding_window_pattern" (array or period), else `period`.
std::vector<uint8_t> read_pattern(const GgufFile& f, const std::string& src, const std::string& arch, int64_t L,
                                  int64_t period) {
  const std::string key = arch + ".attention.sliding_window_pattern";
  const GgufValue* v = f.find(key);
  if (!v) return sliding_pattern(L, period);
  if (!v->is_array()) {
    const auto p = f.get_i64(key);
    if (!p || *p < 0) throw InputError(src + ": " + key + " must be a non-negative integer or an array");
    return sliding_pattern(L, *p);
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

/// A soft-cap value `key` (absent: `fallback`), checked to be 0 (none) or positive and finite.
float read_softcap(const GgufFile& f, const std::string& src, const std::string& key, float fallback) {
  const float cap = f.get_f32(key).value_or(fallback);
  if (!(cap >= 0.0f) || !std::isfinite(cap)) throw InputError(src + ": " + key + " must be a finite number >= 0");
  return cap;
}

/// What Gemma 2 and 3 share: window, pattern, attention scale (llama.cpp's rule: 1/sqrt(D/H) for the model with
/// `big_layers` layers, 1/sqrt(d) otherwise, unless attention.scale is given), final soft-cap, embedding scale, GeGLU.
void read_gemma_common(const GgufFile& f, const std::string& src, ModelConfig& c, int64_t period, int64_t big_layers,
                       float final_cap) {
  const std::string a = c.architecture + ".";
  const auto window = f.get_i64(a + "attention.sliding_window");
  if (!window) throw InputError(src + ": missing GGUF metadata key '" + a + "attention.sliding_window'");
  if (*window <= 0) throw InputError(src + ": " + a + "attention.sliding_window must be positive, got " + std::to_string(*window));
  c.sliding_window = *window;
  c.layer_sliding = read_pattern(f, src, c.architecture, c.n_layers, period);
  if (const auto s = f.get_f32(a + "attention.scale")) {
    if (!(*s > 0.0f) || !std::isfinite(*s)) throw InputError(src + ": " + a + "attention.scale must be positive and finite");
    c.attn_scale = *s;
  } else {
    const int64_t scalar = c.n_layers == big_layers ? c.d_model / c.n_heads : c.head_dim;
    c.attn_scale = 1.0f / std::sqrt(static_cast<float>(scalar));
  }
  c.final_logit_softcap = read_softcap(f, src, a + "final_logit_softcapping", final_cap);
  c.embed_scale = std::sqrt(static_cast<float>(c.d_model));
  c.ffn_act = FfnActivation::gelu_tanh;
}

}  // namespace

void read_gemma3_config(const GgufFile& f, const std::string& src, ModelConfig& c) {
  read_gemma_common(f, src, c, 6, 62, 0.0f);
  c.rope_theta_swa = f.get_f64("gemma3.rope.freq_base_swa").value_or(10000.0);
  if (!(c.rope_theta_swa > 0.0) || !std::isfinite(c.rope_theta_swa))
    throw InputError(src + ": gemma3.rope.freq_base_swa must be positive and finite");
}

void read_gemma2_config(const GgufFile& f, const std::string& src, ModelConfig& c) {
  read_gemma_common(f, src, c, 2, 46, 30.0f);  // llama.cpp's llama_hparams defaults: 50 and 30
  c.attn_logit_softcap = read_softcap(f, src, "gemma2.attn_logit_softcapping", 50.0f);
  if (const auto base = f.get_f64("gemma2.rope.freq_base_swa")) {
    if (!(*base > 0.0) || !std::isfinite(*base))
      throw InputError(src + ": gemma2.rope.freq_base_swa must be positive and finite");
    c.rope_theta_swa = *base;
  }
}

}  // namespace rkv
