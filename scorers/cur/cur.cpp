// CUR scorer (CurDKV): approximate leverage of keys and values from their squared norms, locally normalized.
//
// Source: kvpress 0.5.5, kvpress/presses/cur_press.py; Sengupta et al., "Value-Guided KV Compression for LLMs via
// Approximated CUR Decomposition" (CurDKV, 2025, arXiv 2509.15038). Per KV head g:
//
//   k2[j] = ||K[g, j]||^2,   v2[j] = ||V[g, j]||^2
//   local (use_local_approximation, window w): positions are cut into blocks [bw, (b+1)w); each value is divided by
//     its block's sum (the last, shorter block by the sum of its own entries, as kvpress's zero padding gives)
//   e[j] = k2[j] | v2[j] | (k2[j] + v2[j]) / 2 | k2[j] * v2[j]     (leverage_type = key | value | kv_avg | kv_product)
//   s[j] = e[j] / sum_j e[j];   then s[j] = 1 for j < num_sinks
//
// The first num_sinks positions are also protected (sinks = num_sinks; kvpress gives them score 1, which is above
// every other score, so the kept positions are the same whenever b_l >= num_sinks). kvpress's use_random_leverage
// (a random Gaussian projection drawn from torch's unseeded generator on every call) is not ported: it is not a
// function of its inputs. Where a block's or the layer's sum is 0 (all-zero keys or values) kvpress returns NaN;
// here 0 / 0 is 0. Keys are the cached post-RoPE keys (the norm does not change under RoPE). Computed in double,
// rounded once to float32. Checked against kvpress on tests/fixtures/kvpress.
#include <ripplekv/sdk.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace {

using rkv::sdk::Error;
using rkv::sdk::Param;

double safe_div(double a, double b) { return b != 0.0 ? a / b : 0.0; }

class CUR final : public rkv::sdk::Scorer {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.scorer.cur", RKV_KIND_SCORER, "1.0.0",
                                "CurDKV: leverage of ||k||^2 and ||v||^2 with local normalization")
        .param(Param::Int("num_sinks", 4, "leading positions always kept (attention sinks), inside the budget")
                   .min(0)
                   .max(1 << 20))
        .param(Param::Choice("leverage_type", "kv_product", {"key", "value", "kv_avg", "kv_product"},
                             "which leverage: ||k||^2, ||v||^2, their mean, or their product"))
        .param(Param::Bool("use_local_approximation", true,
                           "normalize the squared norms within blocks of local_window_size positions first"))
        .param(Param::Int("local_window_size", 16, "block length w in positions for the local normalization")
                   .min(1)
                   .max(1 << 20));
  }

  CUR(const rkv::sdk::Params& p, const rkv::sdk::Host&)
      : sinks_(p.get_int("num_sinks")),
        type_(p.get_string("leverage_type")),
        local_(p.get_bool("use_local_approximation")),
        w_(p.get_int("local_window_size")) {}

  rkv_scorer_requirements requirements(const rkv_attention_shape& shape) override {
    head_dim_ = shape.head_dim;
    rkv_scorer_requirements r{};
    r.stats = RKV_STAT_KEYS | RKV_STAT_VALUES;
    r.sinks = sinks_;
    return r;
  }

  /// scores [H_kv, T] float32 from keys and values float32 [H_kv, T, d] (CPU, borrowed for the call). Throws
  /// Error(INVALID_ARGUMENT) for missing or misshaped inputs or a non-finite score. Thread rule: never called
  /// concurrently on one instance.
  void score(const rkv_scorer_inputs& in, float* scores, int64_t n_kv_heads, int64_t T,
             rkv::sdk::Diagnostics&) override {
    if (head_dim_ < 1) throw Error(RKV_ERROR_INVALID_ARGUMENT, "cur: score() before requirements()");
    const int64_t d = head_dim_;
    rkv::sdk::require_tensor(in.keys, "keys", kDLFloat, 32, {n_kv_heads, T, d});
    rkv::sdk::require_tensor(in.values, "values", kDLFloat, 32, {n_kv_heads, T, d});
    const float* K = rkv::sdk::tensor_data<const float>(in.keys);
    const float* V = rkv::sdk::tensor_data<const float>(in.values);
    std::vector<double> k2(static_cast<size_t>(T)), v2(static_cast<size_t>(T)), e(static_cast<size_t>(T));
    for (int64_t g = 0; g < n_kv_heads; ++g) {
      squared_norms(K + g * T * d, T, k2);
      squared_norms(V + g * T * d, T, v2);
      if (local_) {
        normalize_blocks(k2);
        normalize_blocks(v2);
      }
      double total = 0.0;
      for (int64_t j = 0; j < T; ++j) {
        const double a = k2[static_cast<size_t>(j)], b = v2[static_cast<size_t>(j)];
        const double x = type_ == "key" ? a : type_ == "value" ? b : type_ == "kv_avg" ? (a + b) / 2 : a * b;
        e[static_cast<size_t>(j)] = x;
        total += x;
      }
      for (int64_t j = 0; j < T; ++j) {
        const float s = j < sinks_ ? 1.0f : static_cast<float>(safe_div(e[static_cast<size_t>(j)], total));
        if (!std::isfinite(s))
          throw Error(RKV_ERROR_INVALID_ARGUMENT, "cur: non-finite score at KV head " + std::to_string(g) +
                                                      ", position " + std::to_string(j));
        scores[g * T + j] = s;
      }
    }
  }

 private:
  void squared_norms(const float* X, int64_t T, std::vector<double>& out) const {
    for (int64_t j = 0; j < T; ++j) {
      double ss = 0.0;
      for (int64_t i = 0; i < head_dim_; ++i) ss += static_cast<double>(X[j * head_dim_ + i]) * X[j * head_dim_ + i];
      out[static_cast<size_t>(j)] = ss;
    }
  }
  /// x[j] /= sum of x over j's block [b w, min((b+1) w, T)).
  void normalize_blocks(std::vector<double>& x) const {
    const int64_t T = static_cast<int64_t>(x.size());
    for (int64_t b0 = 0; b0 < T; b0 += w_) {
      const int64_t b1 = std::min(T, b0 + w_);
      double sum = 0.0;
      for (int64_t j = b0; j < b1; ++j) sum += x[static_cast<size_t>(j)];
      for (int64_t j = b0; j < b1; ++j) x[static_cast<size_t>(j)] = safe_div(x[static_cast<size_t>(j)], sum);
    }
  }

  int64_t sinks_;
  std::string type_;
  bool local_;
  int64_t w_;
  int64_t head_dim_ = 0;
};

}  // namespace

RKV_PLUGIN(CUR)
