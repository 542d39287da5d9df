// KeyDiff scorer: keep the keys least similar to the layer's mean key direction.
//
// Source: kvpress 0.5.5, kvpress/presses/keydiff_press.py; Park et al., "KeyDiff: Key Similarity-Based KV Cache
// Eviction for Long-Context LLM Inference in Resource-Constrained Environments" (2025, arXiv 2504.15364):
//
//   a[g]     = mean_j  K[g, j] / max(||K[g, j]||_2, 1e-12)                  (torch F.normalize, eps 1e-12)
//   s[g, j]  = -cos(K[g, j], a[g]) = -(K[g, j] . a[g]) / (max(||K[g, j]||_2, 1e-8) max(||a[g]||_2, 1e-8))
//                                                       (torch F.cosine_similarity: each norm clamped to eps 1e-8)
//
// over the layer's cached (post-RoPE) keys, per KV head. Nothing is protected. kvpress's KeyDiff is the one-shot
// prefill form; the paper's block-wise iterative eviction is kvpress BlockPress, not ported here. Sums run in double
// and are rounded once to float32. Checked against kvpress on tests/fixtures/kvpress.
#include <ripplekv/sdk.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace {

using rkv::sdk::Error;

class KeyDiff final : public rkv::sdk::Scorer {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.scorer.keydiff", RKV_KIND_SCORER, "1.0.0",
                                "KeyDiff: keep the keys with the lowest cosine to the mean normalized key");
  }

  KeyDiff(const rkv::sdk::Params&, const rkv::sdk::Host&) {}

  rkv_scorer_requirements requirements(const rkv_attention_shape& shape) override {
    head_dim_ = shape.head_dim;
    rkv_scorer_requirements r{};
    r.stats = RKV_STAT_KEYS;
    return r;
  }

  /// scores [H_kv, T] float32 from K = inputs.keys float32 [H_kv, T, d] (CPU, borrowed). Throws
  /// Error(INVALID_ARGUMENT) for missing or misshaped keys. Thread rule: never called concurrently on one instance.
  void score(const rkv_scorer_inputs& in, float* scores, int64_t n_kv_heads, int64_t T,
             rkv::sdk::Diagnostics&) override {
    if (head_dim_ < 1) throw Error(RKV_ERROR_INVALID_ARGUMENT, "keydiff: score() before requirements()");
    rkv::sdk::require_tensor(in.keys, "keys", kDLFloat, 32, {n_kv_heads, T, head_dim_});
    const float* K = rkv::sdk::tensor_data<const float>(in.keys);
    const int64_t d = head_dim_;
    std::vector<double> norm(static_cast<size_t>(T)), anchor(static_cast<size_t>(d));
    for (int64_t g = 0; g < n_kv_heads; ++g) {
      const float* Kg = K + g * T * d;
      std::fill(anchor.begin(), anchor.end(), 0.0);
      for (int64_t j = 0; j < T; ++j) {
        double ss = 0.0;
        for (int64_t i = 0; i < d; ++i) ss += static_cast<double>(Kg[j * d + i]) * Kg[j * d + i];
        norm[static_cast<size_t>(j)] = std::sqrt(ss);
        const double inv = 1.0 / std::max(norm[static_cast<size_t>(j)], 1e-12);
        for (int64_t i = 0; i < d; ++i) anchor[static_cast<size_t>(i)] += Kg[j * d + i] * inv;
      }
      double anorm = 0.0;
      for (int64_t i = 0; i < d; ++i) {
        anchor[static_cast<size_t>(i)] /= static_cast<double>(T);
        anorm += anchor[static_cast<size_t>(i)] * anchor[static_cast<size_t>(i)];
      }
      anorm = std::sqrt(anorm);
      for (int64_t j = 0; j < T; ++j) {
        double dot = 0.0;
        for (int64_t i = 0; i < d; ++i) dot += Kg[j * d + i] * anchor[static_cast<size_t>(i)];
        const float s = static_cast<float>(-dot / (std::max(norm[static_cast<size_t>(j)], 1e-8) * std::max(anorm, 1e-8)));
        if (!std::isfinite(s))
          throw Error(RKV_ERROR_INVALID_ARGUMENT, "keydiff: non-finite key at KV head " + std::to_string(g) +
                                                      ", position " + std::to_string(j));
        scores[g * T + j] = s;
      }
    }
  }

 private:
  int64_t head_dim_ = 0;
};

}  // namespace

RKV_PLUGIN(KeyDiff)
