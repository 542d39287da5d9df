// Key-norm scorer, built in (KnormPress). The out-of-tree SDK demo plugins/examples/knorm is the same formula under
// the third-party id org.example.scorer.keynorm.
//
// Source: kvpress 0.5.5, kvpress/presses/knorm_press.py (`scores = -torch.linalg.vector_norm(keys, dim=-1)`, in at
// least float32); Devoto et al., "A Simple and Effective L2 Norm-Based Strategy for KV Cache Compression" (2024).
//
//   score[g, j] = -||K[g, j, :]||_2        g = KV head, j = prompt position, K = the layer's cached keys (post-RoPE)
//
// RoPE rotates pairs of coordinates, so the norm is the same before and after it (up to rounding). Nothing is
// protected (as in kvpress). Checked against kvpress on tests/fixtures/kvpress (tests/scorers/test_kvpress_fixtures).
#include <ripplekv/sdk.hpp>

#include <cmath>
#include <string>

namespace {

using rkv::sdk::Error;

class Knorm final : public rkv::sdk::Scorer {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.scorer.knorm", RKV_KIND_SCORER, "1.0.0",
                                "KnormPress: keep the positions whose keys have the smallest L2 norm");
  }

  Knorm(const rkv::sdk::Params&, const rkv::sdk::Host&) {}

  rkv_scorer_requirements requirements(const rkv_attention_shape& shape) override {
    head_dim_ = shape.head_dim;
    rkv_scorer_requirements r{};
    r.stats = RKV_STAT_KEYS;
    r.decode_scoring = 1;  // a held entry's key norm is its own: scores held entries and chunks alike
    r.decode_stats = RKV_STAT_KEYS;
    return r;
  }

  /// scores [H_kv, T] float32 = -||K[g, j]||_2, K = inputs.keys float32 [H_kv, T, d] (CPU, borrowed for the call);
  /// the norm is accumulated in double and rounded once. Throws Error(INVALID_ARGUMENT) when the keys are missing,
  /// misshaped, or a norm is not finite. Thread rule: never called concurrently on one instance.
  void score(const rkv_scorer_inputs& in, float* scores, int64_t n_kv_heads, int64_t T,
             rkv::sdk::Diagnostics&) override {
    if (head_dim_ < 1) throw Error(RKV_ERROR_INVALID_ARGUMENT, "knorm: score() before requirements()");
    rkv::sdk::require_tensor(in.keys, "keys", kDLFloat, 32, {n_kv_heads, T, head_dim_});
    const float* K = rkv::sdk::tensor_data<const float>(in.keys);
    for (int64_t g = 0; g < n_kv_heads; ++g)
      for (int64_t j = 0; j < T; ++j) {
        const float* k = K + (g * T + j) * head_dim_;
        double sum_sq = 0.0;
        for (int64_t i = 0; i < head_dim_; ++i) sum_sq += static_cast<double>(k[i]) * k[i];
        const float s = static_cast<float>(-std::sqrt(sum_sq));
        if (!std::isfinite(s))
          throw Error(RKV_ERROR_INVALID_ARGUMENT, "knorm: the key of KV head " + std::to_string(g) + ", position " +
                                                      std::to_string(j) + " has no finite norm");
        scores[g * T + j] = s;
      }
  }

 private:
  int64_t head_dim_ = 0;
};

}  // namespace

RKV_PLUGIN(Knorm)
