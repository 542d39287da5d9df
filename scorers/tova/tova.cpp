// TOVA scorer: the last prompt query's attention, averaged over all query heads (the same scores for every KV head).
//
// Source: kvpress 0.5.5, kvpress/presses/tova_press.py; Oren et al., "Transformers are Multi-State RNNs" (TOVA, 2024,
// arXiv 2401.06104):
//
//   s[g, j]   = (1 / H) sum_h A[h, T-1, j]     for j < T - 1, every KV head g   (host: window attention, w = 1)
//   s[g, T-1] = max_{g', j < T-1} s[g', j] + 1                                   (kvpress: the last position is kept)
//
// The last position is also protected (recent = 1). Checked against kvpress on tests/fixtures/kvpress with
// `attentions` given (eager attention); without them kvpress computes the same last-query attention itself
// (SnapKVPress.compute_window_attention with a window of 1), a path the fixture does not exercise.
#include <ripplekv/sdk.hpp>

#include <algorithm>
#include <string>

namespace {

using rkv::sdk::Error;

class TOVA final : public rkv::sdk::Scorer {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.scorer.tova", RKV_KIND_SCORER, "1.0.0",
                                "TOVA: attention of the last prompt query, mean over all query heads");
  }

  TOVA(const rkv::sdk::Params&, const rkv::sdk::Host&) {}

  rkv_scorer_requirements requirements(const rkv_attention_shape& shape) override {
    n_heads_ = shape.n_heads;
    rkv_scorer_requirements r{};
    r.stats = RKV_STAT_WINDOW_ATTENTION;
    r.window = 1;
    r.recent = 1;
    return r;
  }

  /// scores [H_kv, T] float32 from window_attention float32 [H, T] over the last query (CPU, borrowed). Throws
  /// Error(INVALID_ARGUMENT) for a missing or misshaped statistic. Thread rule: never called concurrently on one
  /// instance.
  void score(const rkv_scorer_inputs& in, float* scores, int64_t n_kv_heads, int64_t T,
             rkv::sdk::Diagnostics&) override {
    if (n_heads_ < 1) throw Error(RKV_ERROR_INVALID_ARGUMENT, "tova: score() before requirements()");
    if (in.window != 1)
      throw Error(RKV_ERROR_INVALID_ARGUMENT, "tova: window attention over " + std::to_string(in.window) +
                                                  " queries, expected the last one");
    rkv::sdk::require_tensor(in.window_attention, "window_attention", kDLFloat, 32, {n_heads_, T});
    const float* a = rkv::sdk::tensor_data<const float>(in.window_attention);
    float mx = 0.0f;
    for (int64_t j = 0; j + 1 < T; ++j) {
      float sum = 0.0f;
      for (int64_t h = 0; h < n_heads_; ++h) sum += a[h * T + j];
      const float s = sum / static_cast<float>(n_heads_);
      mx = j == 0 ? s : std::max(mx, s);
      for (int64_t g = 0; g < n_kv_heads; ++g) scores[g * T + j] = s;
    }
    for (int64_t g = 0; g < n_kv_heads; ++g) scores[g * T + T - 1] = mx + 1.0f;
  }

 private:
  int64_t n_heads_ = 0;
};

}  // namespace

RKV_PLUGIN(TOVA)
