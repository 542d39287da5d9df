// Expected attention scorer: the attention that future queries are expected to pay each key, from the statistics of
// the prompt's queries, times ||v||.
//
// Source: kvpress 0.5.5, kvpress/presses/expected_attention_press.py (ExpectedAttentionPress); Devoto et al.,
// "Expected Attention: KV Cache Compression by Estimating Attention from Future Queries Distribution" (2025, arXiv
// 2510.00636). With s = n_sink, the prompt queries before RoPE q0[h, t] for t = s .. T - 1 (n = T - s of them), their
// mean mu[h] and biased covariance S[h] (RKV_STAT_QUERY_MOMENTS with query_skip = s, computed by the host in the
// prefill), and the rotation averaged over the next n_future_positions positions p = T .. T + F - 1,
//
//   Rbar     = (1/F) sum_p R(p),  R(p) the RoPE rotation at p (rotate_half layout: pair i couples x[i], x[i + d/2];
//              Rbar[i][i] = Rbar[i+d/2][i+d/2] = mean cos(p f_i), Rbar[i+d/2][i] = -Rbar[i][i+d/2] = mean sin(p f_i),
//              f = this layer's rkv_scorer_inputs.rope_inv_freq)
//   mu'[h]   = Rbar mu[h],   S'[h] = Rbar S[h] Rbar^T
//   e[h, j]  = k_j . mu'[h] / sqrt(d) + (1/2) k_j^T S'[h] k_j / d        (log E[exp(q . k / sqrt(d))] for Gaussian q;
//                                                                         the second term only with use_covariance)
//   a[h, j]  = softmax over j = s .. T - 1 of e[h, j]                    (k_j: the cached keys after RoPE)
//   r[g, j]  = mean over the G query heads h of KV head g of a[h, j]
//   s[g, j]  = (r[g, j] + epsilon) ||v_j||_2   (use_vnorm; else r[g, j]),   j >= s
//   s[g, j]  = max over the layer's scores + 1,                            j < s   (kvpress's padding of the sinks)
//
// The first n_sink positions are also protected (requirements().sinks), as kvpress keeps them by that padding.
// Prefill only. Sums in double, rounded once to float32. Checked against kvpress on tests/fixtures/kvpress.
// Conventions: kvpress computes the RoPE angles p f_i in float32 (transformers' rotary embedding), this port in
// double, as the host rotates its keys; on the fixture that moves the scores by up to 1e-4 relative (see
// tests/scorers/test_kvpress_fixtures.cpp). A prompt of T <= n_sink positions (kvpress asserts) gets score 1
// everywhere: every position is protected.
#include <ripplekv/sdk.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace {

using rkv::sdk::Error;
using rkv::sdk::Param;

class ExpectedAttention final : public rkv::sdk::Scorer {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.scorer.expected_attention", RKV_KIND_SCORER, "1.0.0",
                                "ExpectedAttention: softmax of future queries' expected attention (prompt query "
                                "mean/covariance, averaged RoPE) x ||v||")
        .param(Param::Int("n_future_positions", 512, "F, future positions the RoPE rotation is averaged over")
                   .min(1)
                   .max(1 << 20))
        .param(Param::Int("n_sink", 4, "leading positions protected and left out of the query statistics")
                   .min(0)
                   .max(1 << 20))
        .param(Param::Bool("use_covariance", true, "add the query covariance term (1/2) k^T S k / d"))
        .param(Param::Bool("use_vnorm", true, "multiply by ||v||_2 (after adding epsilon)"))
        .param(Param::Float("epsilon", 0.0, "added to the expected attention before the ||v|| rescaling")
                   .min(0.0)
                   .max(1e6));
  }

  ExpectedAttention(const rkv::sdk::Params& p, const rkv::sdk::Host& host)
      : future_(p.get_int("n_future_positions")),
        sink_(p.get_int("n_sink")),
        use_cov_(p.get_bool("use_covariance")),
        use_vnorm_(p.get_bool("use_vnorm")),
        epsilon_(p.get_float("epsilon")),
        host_(host) {}

  rkv_scorer_requirements requirements(const rkv_attention_shape& shape) override {
    if (shape.n_heads < 1 || shape.n_kv_heads < 1 || shape.n_heads % shape.n_kv_heads != 0 || shape.head_dim % 2 != 0)
      throw Error(RKV_ERROR_INVALID_ARGUMENT,
                  "expected_attention: n_heads must be a positive multiple of n_kv_heads and head_dim even");
    n_heads_ = shape.n_heads;
    head_dim_ = shape.head_dim;
    rkv_scorer_requirements r{};
    r.stats = RKV_STAT_KEYS | RKV_STAT_VALUES | RKV_STAT_QUERY_MOMENTS;
    r.sinks = sink_;
    r.query_skip = sink_;
    return r;
  }

  /// scores [H_kv, T] float32 from keys, values float32 [H_kv, T, d], query_mean [H, d], query_covariance [H, d, d]
  /// and rope_inv_freq float64 [d/2] (CPU, borrowed). Throws Error(UNSUPPORTED) on a host without them (before ABI
  /// minor 4), Error(INVALID_ARGUMENT) for misshaped inputs or non-finite scores, Error(CANCELLED) when the host asks
  /// to stop. Thread rule: never called concurrently on one instance.
  void score(const rkv_scorer_inputs& in, float* scores, int64_t n_kv_heads, int64_t T,
             rkv::sdk::Diagnostics&) override {
    if (n_heads_ < 1) throw Error(RKV_ERROR_INVALID_ARGUMENT, "expected_attention: score() before requirements()");
    if (!RKV_HAS_FIELD(&in, rkv_scorer_inputs, rope_inv_freq) || !in.rope_inv_freq)
      throw Error(RKV_ERROR_UNSUPPORTED, "expected_attention: this host passes no RoPE frequencies or query moments "
                                         "(needs plugin ABI 1.4)");
    const int64_t d = head_dim_, H = n_heads_;
    rkv::sdk::require_tensor(in.keys, "keys", kDLFloat, 32, {n_kv_heads, T, d});
    rkv::sdk::require_tensor(in.values, "values", kDLFloat, 32, {n_kv_heads, T, d});
    rkv::sdk::require_tensor(in.query_mean, "query_mean", kDLFloat, 32, {H, d});
    rkv::sdk::require_tensor(in.query_covariance, "query_covariance", kDLFloat, 32, {H, d, d});
    rkv::sdk::require_tensor(in.rope_inv_freq, "rope_inv_freq", kDLFloat, 64, {d / 2});
    if (T <= sink_) {
      std::fill(scores, scores + n_kv_heads * T, 1.0f);
      return;
    }
    const std::vector<double> R = averaged_rotation(rkv::sdk::tensor_data<const double>(in.rope_inv_freq), T);
    const std::vector<double> r = group_attention(in, n_kv_heads, T, R);
    finish(r, rkv::sdk::tensor_data<const float>(in.values), scores, n_kv_heads, T);
  }

 private:
  /// Rbar [d, d] (file comment): the RoPE rotation averaged over positions T .. T + F - 1, angles in double.
  std::vector<double> averaged_rotation(const double* inv_freq, int64_t T) const {
    const int64_t d = head_dim_, half = d / 2;
    std::vector<double> R(static_cast<size_t>(d * d), 0.0);
    for (int64_t i = 0; i < half; ++i) {
      double c = 0.0, s = 0.0;
      for (int64_t p = T; p < T + future_; ++p) {
        c += std::cos(static_cast<double>(p) * inv_freq[i]);
        s += std::sin(static_cast<double>(p) * inv_freq[i]);
      }
      c /= static_cast<double>(future_);
      s /= static_cast<double>(future_);
      R[static_cast<size_t>(i * d + i)] = R[static_cast<size_t>((i + half) * d + i + half)] = c;
      R[static_cast<size_t>((i + half) * d + i)] = s;
      R[static_cast<size_t>(i * d + i + half)] = -s;
    }
    return R;
  }

  /// r [H_kv, T - n_sink]: per query head the softmax of the expected logits e[h, j], averaged over the group.
  std::vector<double> group_attention(const rkv_scorer_inputs& in, int64_t n_kv_heads, int64_t T,
                                      const std::vector<double>& R) const {
    const int64_t d = head_dim_, H = n_heads_, G = H / n_kv_heads, n = T - sink_;
    const float* K = rkv::sdk::tensor_data<const float>(in.keys);
    const float* mu = rkv::sdk::tensor_data<const float>(in.query_mean);
    const float* S = rkv::sdk::tensor_data<const float>(in.query_covariance);
    std::vector<double> r(static_cast<size_t>(n_kv_heads * n), 0.0), m(static_cast<size_t>(d)),
        RS(static_cast<size_t>(d * d)), C(static_cast<size_t>(d * d)), e(static_cast<size_t>(n)), Ck(static_cast<size_t>(d));
    for (int64_t h = 0; h < H; ++h) {
      host_.throw_if_cancelled();
      const float* mh = mu + h * d;
      const float* Sh = S + h * d * d;
      for (int64_t a = 0; a < d; ++a) {  // m = Rbar mu
        double t = 0.0;
        for (int64_t b = 0; b < d; ++b) t += R[static_cast<size_t>(a * d + b)] * mh[b];
        m[static_cast<size_t>(a)] = t;
      }
      if (use_cov_) {  // C = Rbar S Rbar^T
        for (int64_t a = 0; a < d; ++a)
          for (int64_t b = 0; b < d; ++b) {
            double t = 0.0;
            for (int64_t c = 0; c < d; ++c) t += R[static_cast<size_t>(a * d + c)] * Sh[c * d + b];
            RS[static_cast<size_t>(a * d + b)] = t;
          }
        for (int64_t a = 0; a < d; ++a)
          for (int64_t b = 0; b < d; ++b) {
            double t = 0.0;
            for (int64_t c = 0; c < d; ++c) t += RS[static_cast<size_t>(a * d + c)] * R[static_cast<size_t>(b * d + c)];
            C[static_cast<size_t>(a * d + b)] = t;
          }
      }
      const float* Kg = K + ((h / G) * T + sink_) * d;
      double mx = -INFINITY;
      for (int64_t j = 0; j < n; ++j) {
        const float* k = Kg + j * d;
        double lin = 0.0, quad = 0.0;
        for (int64_t a = 0; a < d; ++a) lin += k[a] * m[static_cast<size_t>(a)];
        if (use_cov_) {
          for (int64_t a = 0; a < d; ++a) {
            double t = 0.0;
            for (int64_t b = 0; b < d; ++b) t += C[static_cast<size_t>(a * d + b)] * k[b];
            Ck[static_cast<size_t>(a)] = t;
          }
          for (int64_t a = 0; a < d; ++a) quad += k[a] * Ck[static_cast<size_t>(a)];
        }
        e[static_cast<size_t>(j)] = lin / std::sqrt(static_cast<double>(d)) + (use_cov_ ? quad / d / 2.0 : 0.0);
        mx = std::max(mx, e[static_cast<size_t>(j)]);
      }
      double z = 0.0;
      for (double& x : e) z += (x = std::exp(x - mx));
      for (int64_t j = 0; j < n; ++j) r[static_cast<size_t>((h / G) * n + j)] += e[static_cast<size_t>(j)] / z / G;
    }
    return r;
  }

  /// Scores from r [H_kv, T - n_sink]: (r + epsilon) ||v|| (use_vnorm), then the sinks padded with max + 1.
  void finish(const std::vector<double>& r, const float* V, float* scores, int64_t n_kv_heads, int64_t T) const {
    const int64_t d = head_dim_, n = T - sink_;
    double top = -INFINITY;
    std::vector<double> s(static_cast<size_t>(n_kv_heads * n));
    for (int64_t g = 0; g < n_kv_heads; ++g)
      for (int64_t j = 0; j < n; ++j) {
        double x = r[static_cast<size_t>(g * n + j)];
        if (use_vnorm_) {
          double ss = 0.0;
          const float* v = V + (g * T + sink_ + j) * d;
          for (int64_t i = 0; i < d; ++i) ss += static_cast<double>(v[i]) * v[i];
          x = (x + epsilon_) * std::sqrt(ss);
        }
        s[static_cast<size_t>(g * n + j)] = x;
        top = std::max(top, x);
      }
    for (int64_t g = 0; g < n_kv_heads; ++g)
      for (int64_t j = 0; j < T; ++j) {
        const float v = static_cast<float>(j < sink_ ? top + 1.0 : s[static_cast<size_t>(g * n + j - sink_)]);
        if (!std::isfinite(v))
          throw Error(RKV_ERROR_INVALID_ARGUMENT, "expected_attention: non-finite score at KV head " +
                                                      std::to_string(g) + ", position " + std::to_string(j) +
                                                      " (non-finite keys, values or query moments?)");
        scores[g * T + j] = v;
      }
  }

  int64_t future_, sink_;
  bool use_cov_, use_vnorm_;
  double epsilon_;
  rkv::sdk::Host host_;
  int64_t n_heads_ = 0, head_dim_ = 0;
};

}  // namespace

RKV_PLUGIN(ExpectedAttention)
