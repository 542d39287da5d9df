// CAKE's eviction indicator, a scorer: how much attention an entry gets from the observation window and how much
// that attention shifts between the window's queries.
//
// Source: Qin et al., "CAKE: Cascading and Adaptive KV Cache Eviction with Layer Preferences" (ICLR 2025,
// antgroup/cakekv), as FFY0/DefensiveKV at 9251b95e7e282a6c18dd98ef6318dd489e639a58 ports it,
// kvpress/presses/cake_global_press.py (CakeGlobalPress.score, hh_score). With A[h, t, j] the window's attention rows
// over the n = T - w positions before it (signals/cake/window_rows.hpp), k the kernel and G = H / H_kv:
//   c[h, j]  = mean_t A[h, t, j] + gamma var_t A[h, t, j]        (torch.var over the w queries, unbiased)
//   s[g, j]  = mean over the G heads h of group g of avgpool_k(c[h, .])[j]   (zero padding counted, F.avg_pool1d)
// The window j >= n is protected (recent = w) and scores max s + 1, as the reference keeps it outside its top-k.
// Use it with the CAKE signal and allocator (`[signal] plugin = "cake"`, `[allocator] plugin = "cake"`) for the
// whole method, or alone under any allocator. Conventions: double (the reference: float32); with w = 1 the variance
// term is 0 (torch: NaN).
#include <ripplekv/sdk.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "../../signals/cake/window_rows.hpp"

namespace {

using rkv::sdk::Error;
using rkv::sdk::Param;

class CakeScorer final : public rkv::sdk::Scorer {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.scorer.cake", RKV_KIND_SCORER, "1.0.0",
                                "CAKE eviction indicator: window attention mean + gamma x its variance over the window")
        .param(Param::Int("window", 32, "observation window w in positions (protected)").min(1).max(1 << 16))
        .param(Param::Int("kernel", 5, "avg-pooling kernel over positions (odd)").min(1).max(1025))
        .param(Param::Float("gamma", 200.0, "weight of the variance over the window's queries").min(0.0).max(1e9));
  }

  CakeScorer(const rkv::sdk::Params& p, const rkv::sdk::Host& host)
      : window_(p.get_int("window")), kernel_(p.get_int("kernel")), gamma_(p.get_float("gamma")), host_(host) {
    if (kernel_ % 2 == 0)
      throw Error(RKV_ERROR_INVALID_ARGUMENT, "cake: kernel must be odd, got " + std::to_string(kernel_));
  }

  rkv_scorer_requirements requirements(const rkv_attention_shape& shape) override {
    rkv_scorer_requirements r = rkv_cake::window_requirements(shape, window_);
    r.recent = window_;  // the window is kept whatever the scores, as the reference keeps it outside its top-k
    shape_ = shape;
    return r;
  }

  /// scores [H_kv, T] float32. Reads keys float32 [H_kv, T, d] and window_queries float32 [H, w, d] (CPU, borrowed
  /// for the call). Throws Error(INVALID_ARGUMENT) for a missing or misshaped input. Polls the host's cancellation
  /// once per query head. Thread rule: never called concurrently on one instance.
  void score(const rkv_scorer_inputs& in, float* scores, int64_t n_kv_heads, int64_t T,
             rkv::sdk::Diagnostics&) override {
    const int64_t H = shape_.n_heads, d = shape_.head_dim;
    if (H < 1) throw Error(RKV_ERROR_INVALID_ARGUMENT, "cake: score() before requirements()");
    const int64_t w = in.window, n = T - w, G = H / n_kv_heads, pad = kernel_ / 2;
    const int64_t W = rkv_cake::checked_window_inputs(in, window_, H, n_kv_heads, d);
    if (n < 1) {  // the whole prompt is the window: all protected, nothing to rank
      std::fill(scores, scores + n_kv_heads * T, 1.0f);
      return;
    }
    const float* Q = rkv::sdk::tensor_data<const float>(in.window_queries);
    const float* K = rkv::sdk::tensor_data<const float>(in.keys);
    std::vector<double> s(static_cast<size_t>(n_kv_heads * n), 0.0), rows, c(static_cast<size_t>(n));
    for (int64_t h = 0; h < H; ++h) {
      host_.throw_if_cancelled();
      rkv_cake::window_rows(Q, K, h, G, T, w, d, W, rows);
      for (int64_t j = 0; j < n; ++j) {
        double mean = 0.0, var = 0.0;
        rkv_cake::column_moments(rows, w, n, j, mean, var);
        c[static_cast<size_t>(j)] = mean + gamma_ * var;
      }
      const int64_t g = h / G;
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0;
        for (int64_t i = std::max<int64_t>(0, j - pad); i <= std::min(n - 1, j + pad); ++i) sum += c[static_cast<size_t>(i)];
        s[static_cast<size_t>(g * n + j)] += sum / static_cast<double>(kernel_) / static_cast<double>(G);
      }
    }
    const double top = *std::max_element(s.begin(), s.end());
    for (int64_t g = 0; g < n_kv_heads; ++g) {
      for (int64_t j = 0; j < n; ++j) scores[g * T + j] = static_cast<float>(s[static_cast<size_t>(g * n + j)]);
      for (int64_t j = n; j < T; ++j) scores[g * T + j] = static_cast<float>(top + 1.0);
    }
  }

 private:
  int64_t window_, kernel_;
  double gamma_;
  rkv::sdk::Host host_;
  rkv_attention_shape shape_{};
};

}  // namespace

RKV_PLUGIN(CakeScorer)
