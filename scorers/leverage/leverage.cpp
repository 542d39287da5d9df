// Leverage scorer: approximate statistical leverage of the layer's centred pre-RoPE keys, z-normalized.
//
// Source: kvpress 0.5.5, kvpress/presses/leverage_press.py (LeverageScorePress); Chari & Van Durme, "Compactor"
// (2025, arXiv 2507.08143). The formula and the sketch are in leverage_scores.hpp:
//
//   s[g, j] = z-score over the layer of  x_j^T (X^T X + 1e-2 I)^{-1} x_j,   X = (K0[g] - mean K0[g]) Phi[g]
//
// over all T positions, with K0 the keys before RoPE (RKV_STAT_PRE_ROPE_KEYS: the host turns each cached key back by
// its position). Nothing is protected (kvpress protects nothing). Prefill only.
//
// Convention (the sketch): kvpress draws Phi from torch's global generator, so its scores depend on whatever drew
// from it before (other layers, other presses). Here Phi is a function of the `seed` param: the draws torch.randn
// makes right after torch.manual_seed(seed), the same for every layer (per_layer = false) or seeded with seed + layer
// (per_layer = true). tests/fixtures/kvpress calls torch.manual_seed(seed) before each kvpress call, so the two
// sketches agree and the scores are compared directly. Checked against kvpress on tests/fixtures/kvpress.
#include <ripplekv/sdk.hpp>

#include <cmath>
#include <exception>
#include <string>
#include <vector>

#include "leverage_scores.hpp"

namespace {

using rkv::sdk::Error;
using rkv::sdk::Param;

class Leverage final : public rkv::sdk::Scorer {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.scorer.leverage", RKV_KIND_SCORER, "1.0.0",
                                "LeverageScore: sketched leverage of the centred pre-RoPE keys, z-normalized")
        .param(Param::Int("sketch_dimension", 48,
                          "k, columns of the Gaussian sketch Phi [d, k]; at most 256 (the Cholesky of the [k, k] Gram "
                          "matrix costs O(k^3) per KV head and layer)")
                   .min(1)
                   .max(256))
        .param(Param::Int("seed", 0, "sketch seed: Phi is torch.randn after torch.manual_seed(seed) (low 32 bits)")
                   .min(0)
                   .max(4294967295.0))
        .param(Param::Bool("per_layer", false, "false: every layer uses the same sketch; true: layer l uses seed + l"));
  }

  Leverage(const rkv::sdk::Params& p, const rkv::sdk::Host&)
      : k_(p.get_int("sketch_dimension")),
        seed_(static_cast<uint32_t>(p.get_int("seed"))),
        per_layer_(p.get_bool("per_layer")) {}

  rkv_scorer_requirements requirements(const rkv_attention_shape& shape) override {
    head_dim_ = shape.head_dim;
    rkv_scorer_requirements r{};
    r.stats = RKV_STAT_PRE_ROPE_KEYS;
    return r;
  }

  /// scores [H_kv, T] float32 from inputs.pre_rope_keys float32 [H_kv, T, d] (CPU, borrowed). Throws
  /// Error(INVALID_ARGUMENT) for missing or misshaped keys (a host before ABI minor 4 has none) or a failed
  /// Cholesky. Thread rule: never called concurrently on one instance.
  void score(const rkv_scorer_inputs& in, float* scores, int64_t n_kv_heads, int64_t T,
             rkv::sdk::Diagnostics&) override {
    if (head_dim_ < 1) throw Error(RKV_ERROR_INVALID_ARGUMENT, "leverage: score() before requirements()");
    if (!RKV_HAS_FIELD(&in, rkv_scorer_inputs, pre_rope_keys))
      throw Error(RKV_ERROR_UNSUPPORTED, "leverage: this host passes no pre-RoPE keys (needs plugin ABI 1.4)");
    rkv::sdk::require_tensor(in.pre_rope_keys, "pre_rope_keys", kDLFloat, 32, {n_kv_heads, T, head_dim_});
    const float* K0 = rkv::sdk::tensor_data<const float>(in.pre_rope_keys);
    const uint32_t seed = per_layer_ ? static_cast<uint32_t>(seed_ + static_cast<uint64_t>(in.layer)) : seed_;
    std::vector<double> z;
    try {
      z = rkv_leverage::leverage_z_scores(K0, n_kv_heads, T, head_dim_, 0, T,
                                          rkv_leverage::gaussian_sketch(seed, n_kv_heads, head_dim_, k_), k_);
    } catch (const std::runtime_error& e) {
      throw Error(RKV_ERROR_INVALID_ARGUMENT, std::string("leverage: ") + e.what());
    }
    for (size_t i = 0; i < z.size(); ++i) {
      scores[i] = static_cast<float>(z[i]);
      if (!std::isfinite(scores[i]))
        throw Error(RKV_ERROR_INVALID_ARGUMENT, "leverage: non-finite score (non-finite keys?)");
    }
  }

 private:
  int64_t k_;
  uint32_t seed_;
  bool per_layer_;
  int64_t head_dim_ = 0;
};

}  // namespace

RKV_PLUGIN(Leverage)
