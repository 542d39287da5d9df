// SnapKV scorer (Li et al., "SnapKV: LLM Knows What You are Looking for Before Generation", 2024; reference:
// FasterDecoding/SnapKV snapkv_utils.py, and KVCache-Factory), as docs/ARCHITECTURE.md "snapkv" states it:
//
//   observation window = the last w prompt positions (w clamped to T by the host); while decoding (decode policy
//                        "periodic") the tokens decoded since the last compression, at most w of them
//   a[h, j]  = sum_{t = T-w}^{T-1} A[h, t, j]               for the non-window keys j < T - w   (host statistic)
//   p[h, j]  = pool_k(a[h, .])[j]                            stride 1, same padding (pad = k / 2, k odd):
//              max: max over a[h, j-pad .. j+pad] with -inf padding          (torch max_pool1d)
//              avg: sum over the in-range part of that window / k            (torch avg_pool1d, zero padding
//                                                                             counted in the divisor)
//   s[g, j]  = mean or max over the G query heads h of KV head g of p[h, j]  (gqa = mean | max)
//
// The window itself is protected (recent = w) and counts inside b_l; the host keeps it and fills the rest of b_l
// with the top s. Window positions get score 0 here (never used: protected positions are enforced by the host).
// The pooled sums run over the in-range entries in increasing index order, so equal inputs give equal outputs
// bit for bit and ties then go to the earlier position (the host's rule).
#include <ripplekv/sdk.hpp>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

namespace {

using rkv::sdk::Error;
using rkv::sdk::Param;

class SnapKV final : public rkv::sdk::Scorer {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.scorer.snapkv", RKV_KIND_SCORER, "1.0.0",
                                "SnapKV: observation-window attention votes, pooled, per KV head")
        .param(Param::Int("window", 32,
                          "observation window w in positions (the last w prompt positions vote and are kept)")
                   .min(1)
                   .max(1 << 20))
        .param(Param::Int("kernel", 7, "pooling kernel size in positions along the keys (odd; 1 = no pooling)")
                   .min(1)
                   .max(1025))
        .param(Param::Choice("pooling", "max", {"max", "avg"},
                             "pooling of the votes along the keys: max (-inf padding) or avg (zero padding counted)"))
        .param(Param::Choice("gqa", "mean", {"mean", "max"},
                             "aggregation of the G query heads that share a KV head: mean or max"));
  }

  SnapKV(const rkv::sdk::Params& p, const rkv::sdk::Host&)
      : window_(p.get_int("window")),
        kernel_(p.get_int("kernel")),
        max_pool_(p.get_string("pooling") == "max"),
        gqa_max_(p.get_string("gqa") == "max") {
    if (kernel_ % 2 == 0)
      throw Error(RKV_ERROR_INVALID_ARGUMENT,
                  "snapkv: kernel must be odd (same padding k / 2 keeps the length only for odd k), got " +
                      std::to_string(kernel_));
  }

  rkv_scorer_requirements requirements(const rkv_attention_shape& shape) override {
    if (shape.n_heads < 1 || shape.n_kv_heads < 1 || shape.n_heads % shape.n_kv_heads != 0)
      throw Error(RKV_ERROR_INVALID_ARGUMENT, "snapkv: n_heads must be a positive multiple of n_kv_heads");
    n_heads_ = shape.n_heads;
    n_kv_heads_ = shape.n_kv_heads;
    rkv_scorer_requirements r{};
    r.stats = RKV_STAT_WINDOW_ATTENTION;
    r.window = window_;
    r.sinks = 0;
    r.recent = window_;
    r.decode_scoring = 1;  // at decode time the window is the tokens decoded since the last compression
    r.decode_stats = RKV_STAT_WINDOW_ATTENTION;
    return r;
  }

  void score(const rkv_scorer_inputs& in, float* scores, int64_t n_kv_heads, int64_t T,
             rkv::sdk::Diagnostics&) override {
    if (n_heads_ < 1) throw Error(RKV_ERROR_INVALID_ARGUMENT, "snapkv: score() before requirements()");
    if (n_kv_heads != n_kv_heads_)
      throw Error(RKV_ERROR_INVALID_ARGUMENT, "snapkv: scores have " + std::to_string(n_kv_heads) +
                                                  " KV heads, the model shape said " + std::to_string(n_kv_heads_));
    // After prefill the window is min(window, T); while decoding it may be shorter (the tokens decoded since the
    // last compression, which are the last entries held).
    if (in.window < 1 || in.window > std::min(window_, T))
      throw Error(RKV_ERROR_INVALID_ARGUMENT, "snapkv: window attention over " + std::to_string(in.window) +
                                                  " queries, expected 1 .. min(window, T) = " +
                                                  std::to_string(std::min(window_, T)));
    rkv::sdk::require_tensor(in.window_attention, "window_attention", kDLFloat, 32, {n_heads_, T});
    const float* a = rkv::sdk::tensor_data<const float>(in.window_attention);
    const int64_t G = n_heads_ / n_kv_heads;
    const int64_t n = T - std::min(in.window, T);  // non-window keys 0 .. n-1
    std::vector<float> pooled(static_cast<size_t>(n));
    for (int64_t g = 0; g < n_kv_heads; ++g) {
      float* s = scores + g * T;
      std::fill(s, s + T, 0.0f);
      for (int64_t c = 0; c < G; ++c) {
        pool(a + (g * G + c) * T, n, pooled.data());
        for (int64_t j = 0; j < n; ++j) {
          const float p = pooled[static_cast<size_t>(j)];
          if (gqa_max_) s[j] = (c == 0) ? p : std::max(s[j], p);
          else s[j] += p;
        }
      }
      if (!gqa_max_)
        for (int64_t j = 0; j < n; ++j) s[j] /= static_cast<float>(G);
    }
  }

 private:
  /// out[j] = pool over in[j - k/2 .. j + k/2] (see the file comment), for j in [0, n).
  void pool(const float* in, int64_t n, float* out) const {
    const int64_t pad = kernel_ / 2;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t lo = std::max<int64_t>(0, j - pad), hi = std::min<int64_t>(n - 1, j + pad);
      if (max_pool_) {
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t i = lo; i <= hi; ++i) m = std::max(m, in[i]);
        out[j] = m;
      } else {
        float sum = 0.0f;
        for (int64_t i = lo; i <= hi; ++i) sum += in[i];
        out[j] = sum / static_cast<float>(kernel_);
      }
    }
  }

  int64_t window_, kernel_;
  bool max_pool_, gqa_max_;
  int64_t n_heads_ = 0, n_kv_heads_ = 0;
};

}  // namespace

RKV_PLUGIN(SnapKV)
