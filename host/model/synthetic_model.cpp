#include "model/synthetic_model.hpp"

#include <cmath>

#include "model/architectures.hpp"
#include "model/gemma.hpp"
#include "model/rope.hpp"

namespace rkv {

namespace {
constexpr uint64_t kMul = 6364136223846793005ull, kAdd = 1442695040888963407ull;
}  // namespace

SyntheticRng::SyntheticRng(uint64_t seed) : state(seed * kMul + kAdd) {}

float SyntheticRng::next() {
  state = state * kMul + kAdd;
  return static_cast<float>(static_cast<double>(state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

std::vector<float> synthetic_uniform(SyntheticRng& rng, size_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (auto& x : v) x = offset + scale * rng.next();
  return v;
}

ModelConfig synthetic_config(const std::string& arch, int64_t H, int64_t Hkv, int64_t d, int64_t layers) {
  ModelConfig c;
  c.architecture = arch;
  c.n_layers = layers;
  c.n_heads = H;
  c.n_kv_heads = Hkv;
  c.head_dim = d;
  c.d_model = 16;
  c.d_ff = 24;
  c.vocab_size = 40;
  c.context_length = 256;
  c.rms_eps = 1e-5f;
  c.rope_theta = 10000.0;
  c.tied_embeddings = true;
  set_architecture_features(c, "synthetic model");  // bias, Q/K norm, pre/post norms (model/architectures.hpp)
  if (arch == "gemma2") {
    c.sliding_window = 16;
    c.layer_sliding = sliding_pattern(layers, 2);
    c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.d_model / H));  // not 1/sqrt(d): the field must be used
    c.embed_scale = std::sqrt(static_cast<float>(c.d_model));
    c.final_logit_softcap = 3.0f;
    c.attn_logit_softcap = 2.0f;  // small, so it bends most scores
    c.ffn_act = FfnActivation::gelu_tanh;
  }
  if (arch == "gemma3") {
    c.sliding_window = 16;
    c.layer_sliding = sliding_pattern(layers, 3);
    c.rope_theta = 1.0e6;
    c.rope_theta_swa = 1.0e4;
    c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.d_model / H));  // not 1/sqrt(d): the field must be used
    c.embed_scale = std::sqrt(static_cast<float>(c.d_model));
    c.final_logit_softcap = 3.0f;
    c.ffn_act = FfnActivation::gelu_tanh;
  }
  return c;
}

Model synthetic_model(const ModelConfig& c, uint64_t seed) {
  SyntheticRng r(seed);
  Model m;
  m.config = c;
  const size_t D = static_cast<size_t>(c.d_model), H = static_cast<size_t>(c.n_heads),
               Hkv = static_cast<size_t>(c.n_kv_heads), d = static_cast<size_t>(c.head_dim),
               F = static_cast<size_t>(c.d_ff), V = static_cast<size_t>(c.vocab_size);
  const float sD = 1.0f / std::sqrt(static_cast<float>(D)), sHd = 1.0f / std::sqrt(static_cast<float>(H * d)),
              sF = 1.0f / std::sqrt(static_cast<float>(F));
  m.tok_embd = synthetic_uniform(r, V * D, 1.0f);
  m.output_norm = synthetic_uniform(r, D, 0.2f, 1.0f);
  if (!c.tied_embeddings) m.lm_head = synthetic_uniform(r, V * D, sD);
  m.layers.resize(static_cast<size_t>(c.n_layers));
  for (auto& w : m.layers) {
    if (c.pre_norms) w.attn_norm = synthetic_uniform(r, D, 0.2f, 1.0f);
    w.wq = synthetic_uniform(r, H * d * D, 2.0f * sD);
    w.wk = synthetic_uniform(r, Hkv * d * D, 2.0f * sD);
    w.wv = synthetic_uniform(r, Hkv * d * D, sD);
    if (c.qkv_bias) {
      w.bq = synthetic_uniform(r, H * d, 0.5f);
      w.bk = synthetic_uniform(r, Hkv * d, 0.5f);
      w.bv = synthetic_uniform(r, Hkv * d, 0.5f);
    }
    w.wo = synthetic_uniform(r, D * H * d, sHd);
    if (c.pre_norms) w.ffn_norm = synthetic_uniform(r, D, 0.2f, 1.0f);
    w.w_gate = synthetic_uniform(r, F * D, 2.0f * sD);
    w.w_up = synthetic_uniform(r, F * D, 2.0f * sD);
    w.w_down = synthetic_uniform(r, D * F, sF);
    if (c.qk_norm != QkNorm::none) {
      const size_t whole = c.qk_norm == QkNorm::whole;
      w.q_norm = synthetic_uniform(r, whole ? H * d : d, 0.2f, 1.0f);
      w.k_norm = synthetic_uniform(r, whole ? Hkv * d : d, 0.2f, 1.0f);
    }
    if (c.post_norms) {
      w.post_attn_norm = synthetic_uniform(r, D, 0.2f, 1.0f);
      w.post_ffn_norm = synthetic_uniform(r, D, 0.2f, 1.0f);
    }
  }
  m.rope_inv_freq = rope_inv_freq(c.head_dim, c.rope_theta, c.rope_scaling);
  if (!c.layer_sliding.empty() && c.rope_theta_swa > 0.0) m.rope_inv_freq_swa = rope_inv_freq(c.head_dim, c.rope_theta_swa, RopeScaling{});
  return m;
}

}  // namespace rkv
