// LagKV scorer: lag-relative min-max-normalized spread of keys and values, ranked within each partition.
//
// Source: kvpress 0.5.5, kvpress/presses/lagkv_press.py; Liang et al., "LagKV: Lag-Relative Information of the KV
// Cache Tells Which Tokens Are Important" (2025, arXiv 2504.04704). Per KV head g, with n = n_sink, L = lag_size:
//
//   T < n + 2L (too short to partition):  s[j] = 1 for j < n,  s[j] = (j - n) / (T - n) for j >= n  (keeps the most
//                                          recent positions)
//   otherwise: partitions P_p = [n + pL, n + (p+1)L) for p = 0 .. m-1, m = floor((T - n) / L); for p < m - 1 and
//   X in {K, V}:
//     lo[c], hi[c]  = min, max over the positions of P_{p+1} of X[., c]          (the next partition is the reference)
//     r_X[i]        = softmax over i in P_p of  std_c( (X[i, c] - lo[c]) / (hi[c] - lo[c]) )   (std: unbiased, d - 1)
//     u[i]          = (r_K[i] + r_V[i]) / 2
//     s[i]          = rank of u[i] within P_p / L   (rank 0 = smallest; cross_scoring = true: s[i] = u[i])
//   the first n positions and the tail [n + (m-1)L, T) (the last full partition plus the remainder, which have no
//   reference) get s = 1.
//
// Conventions: the first n_sink positions are also protected (sinks = n_sink), which changes nothing when b_l >= n;
// kvpress breaks the ties between the score-1 positions (sinks and tail) by torch.topk's order, ripplekv by the
// earlier position, so kept positions agree whenever b_l >= n_sink + tail length (the tail is then kept whole).
// Where hi[c] == lo[c] (a coordinate constant over the reference partition) kvpress divides by zero and its score is
// NaN or infinite; here that coordinate's normalized value is 0. Keys are the cached post-RoPE keys (as in kvpress).
// Computed in double, rounded once to float32. Checked against kvpress on tests/fixtures/kvpress.
#include <ripplekv/sdk.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

namespace {

using rkv::sdk::Error;
using rkv::sdk::Param;

class LagKV final : public rkv::sdk::Scorer {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.scorer.lagkv", RKV_KIND_SCORER, "1.0.0",
                                "LagKV: lag-relative min-max-normalized spread of keys and values, ranked per chunk")
        .param(Param::Int("n_sink", 4, "leading positions always kept (attention sinks), inside the budget")
                   .min(0)
                   .max(1 << 20))
        .param(Param::Int("lag_size", 128, "partition length L in positions; each is scored against the next one")
                   .min(1)
                   .max(1 << 20))
        .param(Param::Bool("cross_scoring", false,
                           "true: the raw softmax scores (comparable across partitions) instead of ranks / L"));
  }

  LagKV(const rkv::sdk::Params& p, const rkv::sdk::Host&)
      : n_sink_(p.get_int("n_sink")), lag_(p.get_int("lag_size")), cross_(p.get_bool("cross_scoring")) {}

  rkv_scorer_requirements requirements(const rkv_attention_shape& shape) override {
    head_dim_ = shape.head_dim;
    rkv_scorer_requirements r{};
    r.stats = RKV_STAT_KEYS | RKV_STAT_VALUES;
    r.sinks = n_sink_;
    return r;
  }

  /// scores [H_kv, T] float32 from keys and values float32 [H_kv, T, d] (CPU, borrowed for the call). Throws
  /// Error(INVALID_ARGUMENT) for missing or misshaped inputs or non-finite results. Thread rule: never called
  /// concurrently on one instance.
  void score(const rkv_scorer_inputs& in, float* scores, int64_t n_kv_heads, int64_t T,
             rkv::sdk::Diagnostics&) override {
    if (head_dim_ < 1) throw Error(RKV_ERROR_INVALID_ARGUMENT, "lagkv: score() before requirements()");
    const int64_t d = head_dim_, n = n_sink_, L = lag_;
    rkv::sdk::require_tensor(in.keys, "keys", kDLFloat, 32, {n_kv_heads, T, d});
    rkv::sdk::require_tensor(in.values, "values", kDLFloat, 32, {n_kv_heads, T, d});
    const float* K = rkv::sdk::tensor_data<const float>(in.keys);
    const float* V = rkv::sdk::tensor_data<const float>(in.values);
    if (T < n + 2 * L) {
      for (int64_t g = 0; g < n_kv_heads; ++g)
        for (int64_t j = 0; j < T; ++j)
          scores[g * T + j] = j < n ? 1.0f : static_cast<float>(j - n) / static_cast<float>(T - n);
      return;
    }
    const int64_t m = (T - n) / L;
    std::vector<double> rk(static_cast<size_t>(L)), rv(static_cast<size_t>(L)), u(static_cast<size_t>(L));
    std::vector<int64_t> order(static_cast<size_t>(L));
    for (int64_t g = 0; g < n_kv_heads; ++g) {
      float* s = scores + g * T;
      std::fill(s, s + T, 1.0f);
      for (int64_t p = 0; p + 1 < m; ++p) {
        const int64_t start = n + p * L;
        spread_softmax(K + g * T * d, start, rk.data());
        spread_softmax(V + g * T * d, start, rv.data());
        for (int64_t i = 0; i < L; ++i) u[static_cast<size_t>(i)] = (rk[static_cast<size_t>(i)] + rv[static_cast<size_t>(i)]) / 2;
        if (cross_) {
          for (int64_t i = 0; i < L; ++i) s[start + i] = static_cast<float>(u[static_cast<size_t>(i)]);
          continue;
        }
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](int64_t a, int64_t b) { return u[static_cast<size_t>(a)] < u[static_cast<size_t>(b)]; });
        for (int64_t r = 0; r < L; ++r)
          s[start + order[static_cast<size_t>(r)]] = static_cast<float>(static_cast<double>(r) / static_cast<double>(L));
      }
      for (int64_t j = 0; j < T; ++j)
        if (!std::isfinite(s[j]))
          throw Error(RKV_ERROR_INVALID_ARGUMENT, "lagkv: non-finite score at KV head " + std::to_string(g) +
                                                      ", position " + std::to_string(j) + " (non-finite keys or values?)");
    }
  }

 private:
  /// out[i] = softmax_i std_c((X[start+i, c] - lo[c]) / (hi[c] - lo[c])), lo/hi over X[start+L .. start+2L).
  void spread_softmax(const float* X, int64_t start, double* out) const {
    const int64_t d = head_dim_, L = lag_;
    std::vector<double> lo(static_cast<size_t>(d)), hi(static_cast<size_t>(d));
    for (int64_t c = 0; c < d; ++c) {
      double a = X[(start + L) * d + c], b = a;
      for (int64_t i = 1; i < L; ++i) {
        const double x = X[(start + L + i) * d + c];
        a = std::min(a, x);
        b = std::max(b, x);
      }
      lo[static_cast<size_t>(c)] = a;
      hi[static_cast<size_t>(c)] = b;
    }
    double mx = -INFINITY;
    for (int64_t i = 0; i < L; ++i) {
      double mean = 0.0;
      std::vector<double> z(static_cast<size_t>(d));
      for (int64_t c = 0; c < d; ++c) {
        const double range = hi[static_cast<size_t>(c)] - lo[static_cast<size_t>(c)];
        z[static_cast<size_t>(c)] = range > 0 ? (X[(start + i) * d + c] - lo[static_cast<size_t>(c)]) / range : 0.0;
        mean += z[static_cast<size_t>(c)];
      }
      mean /= static_cast<double>(d);
      double var = 0.0;
      for (int64_t c = 0; c < d; ++c) var += (z[static_cast<size_t>(c)] - mean) * (z[static_cast<size_t>(c)] - mean);
      out[i] = d > 1 ? std::sqrt(var / static_cast<double>(d - 1)) : 0.0;
      mx = std::max(mx, out[i]);
    }
    double sum = 0.0;
    for (int64_t i = 0; i < L; ++i) sum += (out[i] = std::exp(out[i] - mx));
    for (int64_t i = 0; i < L; ++i) out[i] /= sum;
  }

  int64_t n_sink_, lag_;
  bool cross_;
  int64_t head_dim_ = 0;
};

}  // namespace

RKV_PLUGIN(LagKV)
