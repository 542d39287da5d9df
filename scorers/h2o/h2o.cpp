// H2O scorer (Zhang et al., "H2O: Heavy-Hitter Oracle for Efficient Generative Inference of Large Language
// Models", NeurIPS 2023), prefill one-shot as in KVCache-Factory's H2O, as docs/ARCHITECTURE.md "h2o" states it:
//
//   a[h, j] = sum_{t = j}^{T-1} A[h, t, j]                  accumulated attention of key j (host statistic)
//   a[h, j] = a[h, j] / (T - j)                             when normalize = true (T - j queries see key j)
//   s[g, j] = mean over the G query heads h of KV head g of a[h, j]
//
// The last `recent` positions are protected (the host keeps them inside b_l); heavy hitters fill the rest.
#include <ripplekv/sdk.hpp>

#include <string>

namespace {

using rkv::sdk::Error;
using rkv::sdk::Param;

class H2O final : public rkv::sdk::Scorer {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.scorer.h2o", RKV_KIND_SCORER, "1.0.0",
                                "H2O: heavy hitters by accumulated attention over all prompt queries, plus a recent window")
        .param(Param::Int("recent", 32, "most recent positions always kept (inside the budget)").min(0).max(1 << 20))
        .param(Param::Bool("normalize", false,
                           "divide the accumulated attention of key j by the number of queries that see it (T - j)"));
  }

  H2O(const rkv::sdk::Params& p, const rkv::sdk::Host&)
      : recent_(p.get_int("recent")), normalize_(p.get_bool("normalize")) {}

  rkv_scorer_requirements requirements(const rkv_attention_shape& shape) override {
    if (shape.n_heads < 1 || shape.n_kv_heads < 1 || shape.n_heads % shape.n_kv_heads != 0)
      throw Error(RKV_ERROR_INVALID_ARGUMENT, "h2o: n_heads must be a positive multiple of n_kv_heads");
    n_heads_ = shape.n_heads;
    n_kv_heads_ = shape.n_kv_heads;
    rkv_scorer_requirements r{};
    r.stats = RKV_STAT_CUMULATIVE_ATTENTION;
    r.window = 0;
    r.sinks = 0;
    r.recent = recent_;
    // While decoding the host accumulates the attention of every query so far; the normalizer T - j counts prompt
    // queries only, so a normalized h2o scores the prompt alone.
    r.decode_scoring = normalize_ ? 0 : 1;
    r.decode_stats = normalize_ ? 0 : RKV_STAT_CUMULATIVE_ATTENTION;
    return r;
  }

  void score(const rkv_scorer_inputs& in, float* scores, int64_t n_kv_heads, int64_t T,
             rkv::sdk::Diagnostics&) override {
    if (n_heads_ < 1) throw Error(RKV_ERROR_INVALID_ARGUMENT, "h2o: score() before requirements()");
    if (n_kv_heads != n_kv_heads_)
      throw Error(RKV_ERROR_INVALID_ARGUMENT, "h2o: scores have " + std::to_string(n_kv_heads) +
                                                  " KV heads, the model shape said " + std::to_string(n_kv_heads_));
    rkv::sdk::require_tensor(in.cumulative_attention, "cumulative_attention", kDLFloat, 32, {n_heads_, T});
    const float* a = rkv::sdk::tensor_data<const float>(in.cumulative_attention);
    const int64_t G = n_heads_ / n_kv_heads;
    for (int64_t g = 0; g < n_kv_heads; ++g) {
      float* s = scores + g * T;
      for (int64_t j = 0; j < T; ++j) {
        float sum = 0.0f;
        for (int64_t c = 0; c < G; ++c) sum += a[(g * G + c) * T + j];
        float mean = sum / static_cast<float>(G);
        if (normalize_) mean /= static_cast<float>(T - j);
        s[j] = mean;
      }
    }
  }

 private:
  int64_t recent_;
  bool normalize_;
  int64_t n_heads_ = 0, n_kv_heads_ = 0;
};

}  // namespace

RKV_PLUGIN(H2O)
