// CAKE's layer preference, a per-prompt signal (rkv.prompt_signal/1, ABI minor 7): how spread out and how shifting
// the observation window's attention is in each layer of the prompt being compressed.
//
// Source: Qin et al., "CAKE: Cascading and Adaptive KV Cache Eviction with Layer Preferences" (ICLR 2025,
// antgroup/cakekv); the formula as FFY0/DefensiveKV at 9251b95e7e282a6c18dd98ef6318dd489e639a58 ports it,
// kvpress/presses/cake_global_press.py (CakeGlobalPress.score), which is the code the DefensiveKV paper's CAKE rows
// come from. With A[h, t, j] the window's attention rows over the n = T - w positions before it (window_rows.hpp):
//   H_l   = - sum_{h, t < w, j < n} A[h, t, j] log(A[h, t, j] + 1e-10)              (spatial dispersion: entropy)
//   V_l   = sum_{h, j < n} var_t A[h, t, j]      (temporal shift: torch.var over the w queries, unbiased, 1/(w - 1))
//   s_l   = H_l^(1 / tau1) V_l^(1 / tau2)                                           (the layer preference P_l)
// CAKE's allocator (allocators/cake) keeps each layer's window and splits the rest of the budget in proportion to s_l.
// Conventions: computed in double (the reference: float32); with w = 1 (a prompt no longer than one window position
// beyond it) V_l is 0, where torch's unbiased variance of one sample is NaN; with n = 0 (the prompt is the window)
// s_l = 0. Both leave the layer only its window.
#include <ripplekv/sdk.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "window_rows.hpp"

namespace {

using rkv::sdk::Error;
using rkv::sdk::Param;

class Cake final : public rkv::sdk::PromptSignal {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.signal.cake", RKV_KIND_SIGNAL, "1.0.0",
                                "CAKE layer preference (per prompt): window-attention entropy^(1/tau1) x "
                                "variance^(1/tau2)")
        .param(Param::Int("window", 32, "observation window w in positions (its queries' attention rows)")
                   .min(1)
                   .max(1 << 16))
        .param(Param::Float("tau1", 1.6, "temperature of the entropy (spatial dispersion); below 0.1 the power "
                            "overflows double").min(0.1).max(1e3))
        .param(Param::Float("tau2", 0.6, "temperature of the variance (temporal shift); below 0.1 every layer's "
                            "power underflows to 0").min(0.1).max(1e3))
        .flags(RKV_FLAG_PER_PROMPT);
  }

  Cake(const rkv::sdk::Params& p, const rkv::sdk::Host& host)
      : window_(p.get_int("window")), tau1_(p.get_float("tau1")), tau2_(p.get_float("tau2")), host_(host) {}

  rkv_scorer_requirements requirements(const rkv_attention_shape& shape) override {
    const rkv_scorer_requirements r = rkv_cake::window_requirements(shape, window_);
    shape_ = shape;
    return r;
  }

  /// s_l of one layer. Reads keys float32 [H_kv, T, d] and window_queries float32 [H, w, d] (CPU, borrowed for the
  /// call). Throws Error(INVALID_ARGUMENT) for a missing or misshaped input. Polls the host's cancellation once per
  /// query head. Thread rule: never called concurrently on one instance.
  double layer_value(const rkv_scorer_inputs& in, rkv::sdk::Diagnostics&) override {
    const int64_t H = shape_.n_heads, Hkv = shape_.n_kv_heads, d = shape_.head_dim;
    if (H < 1) throw Error(RKV_ERROR_INVALID_ARGUMENT, "cake: layer_value() before requirements()");
    const int64_t T = in.prefix_tokens, w = in.window, n = T - w;
    const int64_t W = rkv_cake::checked_window_inputs(in, window_, H, Hkv, d);
    if (n < 1) return 0.0;
    const float* Q = rkv::sdk::tensor_data<const float>(in.window_queries);
    const float* K = rkv::sdk::tensor_data<const float>(in.keys);
    double entropy = 0.0, variance = 0.0;
    std::vector<double> rows;
    for (int64_t h = 0; h < H; ++h) {
      host_.throw_if_cancelled();
      rkv_cake::window_rows(Q, K, h, H / Hkv, T, w, d, W, rows);
      for (double a : rows) entropy -= a * std::log(a + 1e-10);
      for (int64_t j = 0; j < n; ++j) {
        double mean = 0.0, var = 0.0;
        rkv_cake::column_moments(rows, w, n, j, mean, var);
        variance += var;
      }
    }
    return std::pow(std::max(entropy, 0.0), 1.0 / tau1_) * std::pow(variance, 1.0 / tau2_);
  }

 private:
  int64_t window_;
  double tau1_, tau2_;
  rkv::sdk::Host host_;
  rkv_attention_shape shape_{};
};

}  // namespace

RKV_PLUGIN(Cake)
