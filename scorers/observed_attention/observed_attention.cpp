// Observed-attention scorer: the mean attention each key receives from the prompt queries that see it.
//
// Source: kvpress 0.5.5, kvpress/presses/observed_attention_press.py (related to H2O, Zhang et al. 2023, arXiv
// 2306.14048):
//
//   s[g, j] = (1 / G) sum_{h in group g} ( sum_{t >= j} A[h, t, j] ) / (T - j)      (host: cumulative attention)
//
// T - j is the number of causal prompt queries that see key j. This is the h2o of docs/ARCHITECTURE.md "h2o" with normalize = true and no
// recent window; kept as its own plugin under kvpress's name so a kvpress config maps one to one. Nothing is
// protected. Checked against kvpress on tests/fixtures/kvpress.
#include <ripplekv/sdk.hpp>

#include <string>

namespace {

using rkv::sdk::Error;

class ObservedAttention final : public rkv::sdk::Scorer {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.scorer.observed_attention", RKV_KIND_SCORER, "1.0.0",
                                "ObservedAttention: attention received / number of queries that see the key");
  }

  ObservedAttention(const rkv::sdk::Params&, const rkv::sdk::Host&) {}

  rkv_scorer_requirements requirements(const rkv_attention_shape& shape) override {
    if (shape.n_heads < 1 || shape.n_kv_heads < 1 || shape.n_heads % shape.n_kv_heads != 0)
      throw Error(RKV_ERROR_INVALID_ARGUMENT, "observed_attention: n_heads must be a positive multiple of n_kv_heads");
    n_heads_ = shape.n_heads;
    rkv_scorer_requirements r{};
    r.stats = RKV_STAT_CUMULATIVE_ATTENTION;
    return r;
  }

  /// scores [H_kv, T] float32 from cumulative_attention float32 [H, T] (CPU, borrowed for the call). Throws
  /// Error(INVALID_ARGUMENT) for a missing or misshaped statistic. Thread rule: never called concurrently on one
  /// instance.
  void score(const rkv_scorer_inputs& in, float* scores, int64_t n_kv_heads, int64_t T,
             rkv::sdk::Diagnostics&) override {
    if (n_heads_ < 1) throw Error(RKV_ERROR_INVALID_ARGUMENT, "observed_attention: score() before requirements()");
    rkv::sdk::require_tensor(in.cumulative_attention, "cumulative_attention", kDLFloat, 32, {n_heads_, T});
    const float* a = rkv::sdk::tensor_data<const float>(in.cumulative_attention);
    const int64_t G = n_heads_ / n_kv_heads;
    for (int64_t g = 0; g < n_kv_heads; ++g)
      for (int64_t j = 0; j < T; ++j) {
        const float n_queries = static_cast<float>(T - j);
        float sum = 0.0f;
        for (int64_t c = 0; c < G; ++c) sum += a[(g * G + c) * T + j] / n_queries;
        scores[g * T + j] = sum / static_cast<float>(G);
      }
  }

 private:
  int64_t n_heads_ = 0;
};

}  // namespace

RKV_PLUGIN(ObservedAttention)
