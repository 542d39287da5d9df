// DefensiveKV scorer: the worst case over the observation window instead of its mean, weighted by each entry's share
// of the value-output norm across KV heads, with a first stage that keeps the entries holding most of the window's
// attention (a budget-dependent scorer, ABI minor 6, RKV_BUDGET_ALLOCATION).
//
// Source: Feng et al., "DefensiveKV: Taming the Fragility of KV Cache Eviction in LLM Inference" (ICLR 2026); reference
// code FFY0/DefensiveKV at 9251b95e7e282a6c18dd98ef6318dd489e639a58, kvpress/presses/efficient_defensivekv_press.py
// (EfficientDefensiveKVPress.score with vwl1norm; efficient_layer_defensivekv_press.py scores identically). With w the
// window, n = T - w, k the kernel, G = H / H_kv, window queries q_{h,t} (t < w, at position n + t) and keys k_j after
// RoPE:
//   A[h, t, j]  = softmax_{j' <= n + t}(q_{h,t} . k_{j'} / sqrt(d))[j]                  (the reference's own window
//                                                                                       attention, 1/sqrt(d))
//   bias        = mean over h, t of sum_{n - w <= j < n} A[h, t, j]                    (window_bias, see below)
//   a[g, j]     = mean over the G heads h of group g and over t of A[h, t, j], j < n   (ave_attn_weights)
//   P[h, t, j]  = avgpool_k(A[h, t, .])[j] / sum_{j' < n} avgpool_k(A[h, t, .])[j'] * sum_{j' < n} A[h, t, j']
//   M[g, j]     = max over h in g, t of P[h, t, j];  M[g, j] = max(M[g, j], mean_{j' < n} M[g, j'])   (defensive)
//   m[g, j]     = mean over h in g of ||W_o,h v_j||_1 (the host's value-output norms)
//   s[g, j]     = M[g, j] m[g, j] / sum_{g'} m[g', j]                                   (the norm's share over KV heads)
//   stage 1: with b the layer's per-head budget (the mean of head_budgets: b_l), c_g = the number of leading entries
//            of a[g, .] / sum a[g, .], sorted descending, before their running sum first reaches 0.9 - bias,
//            capped at max(0, floor(n b / T) - w); those c_g positions and the window j >= n score
//            S = max_{g, j < n} s[g, j].
// Without head budgets (codec classes, the joint planner) the cap is n. The host protects the window (recent = w).
// On a sliding-window layer (rkv_scorer_inputs.attention_window W > 0) a query sees only its last W keys, as the
// model's attention does; the others get no attention.
// Scores are comparable across KV heads (the norm share), so an Ada split (`heads = "adakv"`, alpha_safeguard 0: the
// reference's EfficientAdaScorerPress, one top-k over a layer's heads) and a global one (`heads = "global_topk"`:
// Layer-DefensiveKV, EfficientAdaGlobalScorerPress) rank them; both get the scores budgeted with the layer's share.
//
// window_bias follows the reference code, not its comment: compute_window_attention first cuts the rows to the keys
// before the window (attn_weights[..., :-w]) and then sums their last w columns, so the share subtracted from 0.9 is
// the attention on the w positions just before the window, not on the window itself. The published results come
// from that code, so ripplekv computes the same (the `mass` param keeps the 0.9).
//
// The cap is the reference's int(q_len (1 - ratio) - w) with q_len read from the values it is given, the n positions
// before the window (vwl1norm(values[..., :-w])), so it is n (1 - ratio) - w, not T (1 - ratio) - w; with the
// integer budget b = T (1 - ratio) that is floor(n b / T) - w.
//
// Conventions (checked against the reference on tests/fixtures/kvpress): the reference computes in float32, ripplekv
// in double (scores agree to 1e-5); its cap rounds n (1 - ratio) in floating point, which can differ by one from
// n b / T in integers where that is an exact integer; a cap below zero (b < w) slices the reference's sorted
// positions from the end, here it keeps none by the first stage.
#include <ripplekv/sdk.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

namespace {

using rkv::sdk::Error;
using rkv::sdk::Param;

class DefensiveKV final : public rkv::sdk::Scorer {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.scorer.defensivekv", RKV_KIND_SCORER, "1.0.0",
                                "DefensiveKV: worst case over the window x the value-output norm share, two stages")
        .param(Param::Int("window", 32, "observation window w in positions (protected)").min(1).max(1 << 16))
        .param(Param::Int("kernel", 5, "avg-pooling kernel over positions (odd)").min(1).max(1025))
        .param(Param::Float("mass", 0.9,
                            "stage 1 keeps the entries holding this share of the window's attention, less the share "
                            "on the w positions before the window (the reference's window_bias)")
                   .min(0.0)
                   .max(1.0));
  }

  DefensiveKV(const rkv::sdk::Params& p, const rkv::sdk::Host& host)
      : window_(p.get_int("window")), kernel_(p.get_int("kernel")), mass_(p.get_float("mass")), host_(host) {
    if (kernel_ % 2 == 0)
      throw Error(RKV_ERROR_INVALID_ARGUMENT, "defensivekv: kernel must be odd, got " + std::to_string(kernel_));
  }

  rkv_scorer_requirements requirements(const rkv_attention_shape& shape) override {
    if (shape.n_heads < 1 || shape.n_kv_heads < 1 || shape.n_heads % shape.n_kv_heads != 0)
      throw Error(RKV_ERROR_INVALID_ARGUMENT, "defensivekv: n_heads must be a positive multiple of n_kv_heads");
    n_heads_ = shape.n_heads;
    head_dim_ = shape.head_dim;
    rkv_scorer_requirements r{};
    r.stats = RKV_STAT_KEYS | RKV_STAT_WINDOW_QUERIES | RKV_STAT_VALUE_OUTPUT_NORMS;
    r.window = window_;
    r.recent = window_;
    r.budget_dependent = RKV_BUDGET_ALLOCATION;  // its Ada / global split ranks these budgeted scores
    return r;
  }

  /// scores [H_kv, T] float32. Reads keys float32 [H_kv, T, d], window_queries float32 [H, w, d], value_output_norms
  /// float32 [H, T] and, when given, head_budgets int64 [H_kv]; all CPU, borrowed for the call. Throws
  /// Error(INVALID_ARGUMENT) for a missing or misshaped input. Polls the host's cancellation once per query head.
  /// Thread rule: never called concurrently on one instance.
  void score(const rkv_scorer_inputs& in, float* scores, int64_t n_kv_heads, int64_t T,
             rkv::sdk::Diagnostics&) override {
    if (n_heads_ < 1) throw Error(RKV_ERROR_INVALID_ARGUMENT, "defensivekv: score() before requirements()");
    const int64_t w = in.window, n = T - w, H = n_heads_, G = H / n_kv_heads, d = head_dim_;
    if (w < 1 || w > std::min(window_, T))
      throw Error(RKV_ERROR_INVALID_ARGUMENT, "defensivekv: window queries over " + std::to_string(w) +
                                                  " positions, expected min(window, T) = " +
                                                  std::to_string(std::min(window_, T)));
    if (n < 1) {  // the whole prompt is the window: all protected, nothing to rank
      std::fill(scores, scores + n_kv_heads * T, 1.0f);
      return;
    }
    rkv::sdk::require_tensor(in.keys, "keys", kDLFloat, 32, {n_kv_heads, T, d});
    rkv::sdk::require_tensor(in.window_queries, "window_queries", kDLFloat, 32, {H, w, d});
    rkv::sdk::require_tensor(in.value_output_norms, "value_output_norms", kDLFloat, 32, {H, T});
    const float* K = rkv::sdk::tensor_data<const float>(in.keys);
    const float* Q = rkv::sdk::tensor_data<const float>(in.window_queries);
    const float* norms = rkv::sdk::tensor_data<const float>(in.value_output_norms);

    const int64_t W = RKV_HAS_FIELD(&in, rkv_scorer_inputs, attention_window) ? in.attention_window : 0;
    const WindowVotes v = window_votes(Q, K, n_kv_heads, T, w, W);
    std::vector<double> s = norm_share(v.worst, norms, n_kv_heads, T, n);
    const double top = *std::max_element(s.begin(), s.end());
    const int64_t cap = stage_one_cap(in, n_kv_heads, n, w);
    for (int64_t g = 0; g < n_kv_heads; ++g) {
      for (int64_t j : stage_one(v.mean.data() + g * n, n, mass_ - v.bias, cap)) s[static_cast<size_t>(g * n + j)] = top;
      for (int64_t j = 0; j < n; ++j) scores[g * T + j] = static_cast<float>(s[static_cast<size_t>(g * n + j)]);
      for (int64_t j = n; j < T; ++j) scores[g * T + j] = static_cast<float>(top);
    }
  }

 private:
  /// What the window's queries say about the n = T - w positions before it.
  struct WindowVotes {
    std::vector<double> worst;  ///< M[g, j], [H_kv, n]: the defensive aggregate, floored at its mean over j
    std::vector<double> mean;   ///< a[g, j], [H_kv, n]: the mean attention over the group's heads and the window
    double bias = 0.0;          ///< the reference's window_bias
  };

  /// A, P, M, a and bias of the file comment from the window queries Q [H, w, d] and keys K [H_kv, T, d] (double);
  /// with a sliding window W > 0 a query at position p sees keys p - W + 1 .. p only (the others get no attention).
  WindowVotes window_votes(const float* Q, const float* K, int64_t n_kv_heads, int64_t T, int64_t w,
                           int64_t W) const {
    const int64_t n = T - w, H = n_heads_, G = H / n_kv_heads, d = head_dim_, pad = kernel_ / 2;
    WindowVotes v;
    v.worst.assign(static_cast<size_t>(n_kv_heads * n), 0.0);
    v.mean.assign(static_cast<size_t>(n_kv_heads * n), 0.0);
    std::vector<double> row(static_cast<size_t>(T)), pooled(static_cast<size_t>(n));
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    for (int64_t h = 0; h < H; ++h) {
      host_.throw_if_cancelled();
      const int64_t g = h / G;
      for (int64_t t = 0; t < w; ++t) {
        const int64_t seen = n + t + 1;  // the query at position n + t sees keys j0 .. n + t
        const int64_t j0 = W > 0 ? std::max<int64_t>(0, seen - W) : 0;
        std::fill(row.begin(), row.begin() + j0, 0.0);
        double mx = -INFINITY, z = 0.0, base = 0.0, pooled_sum = 0.0;
        for (int64_t j = j0; j < seen; ++j) {
          double dot = 0.0;
          for (int64_t i = 0; i < d; ++i) dot += static_cast<double>(Q[(h * w + t) * d + i]) * K[(g * T + j) * d + i];
          row[static_cast<size_t>(j)] = dot * scale;
          mx = std::max(mx, dot * scale);
        }
        for (int64_t j = j0; j < seen; ++j) z += (row[static_cast<size_t>(j)] = std::exp(row[static_cast<size_t>(j)] - mx));
        for (int64_t j = j0; j < seen; ++j) {
          row[static_cast<size_t>(j)] /= z;
          if (j < n) base += row[static_cast<size_t>(j)];
          if (j >= n - w && j < n) v.bias += row[static_cast<size_t>(j)];  // the reference's window_bias
        }
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0.0;
          for (int64_t i = std::max<int64_t>(0, j - pad); i <= std::min(n - 1, j + pad); ++i) sum += row[static_cast<size_t>(i)];
          pooled[static_cast<size_t>(j)] = sum / static_cast<double>(kernel_);
          pooled_sum += pooled[static_cast<size_t>(j)];
          v.mean[static_cast<size_t>(g * n + j)] += row[static_cast<size_t>(j)] / static_cast<double>(G * w);
        }
        for (int64_t j = 0; j < n; ++j) {
          const double p = pooled_sum > 0.0 ? pooled[static_cast<size_t>(j)] / pooled_sum * base : 0.0;
          v.worst[static_cast<size_t>(g * n + j)] = std::max(v.worst[static_cast<size_t>(g * n + j)], p);
        }
      }
    }
    v.bias /= static_cast<double>(H * w);
    for (int64_t g = 0; g < n_kv_heads; ++g) {  // defensive floor: the mean over positions
      double* Mg = v.worst.data() + g * n;
      const double mean = std::accumulate(Mg, Mg + n, 0.0) / static_cast<double>(n);
      for (int64_t j = 0; j < n; ++j) Mg[j] = std::max(Mg[j], mean);
    }
    return v;
  }

  /// s[g, j] = M[g, j] m[g, j] / sum_g' m[g', j], m the group mean of the norms [H, T], over j < n.
  std::vector<double> norm_share(const std::vector<double>& M, const float* norms, int64_t n_kv_heads, int64_t T,
                                 int64_t n) const {
    const int64_t G = n_heads_ / n_kv_heads;
    std::vector<double> s(static_cast<size_t>(n_kv_heads * n)), m(static_cast<size_t>(n_kv_heads));
    for (int64_t j = 0; j < n; ++j) {
      double total = 0.0;
      for (int64_t g = 0; g < n_kv_heads; ++g) {
        m[static_cast<size_t>(g)] = 0.0;
        for (int64_t c = 0; c < G; ++c) m[static_cast<size_t>(g)] += norms[(g * G + c) * T + j];
        m[static_cast<size_t>(g)] /= static_cast<double>(G);
        total += m[static_cast<size_t>(g)];
      }
      for (int64_t g = 0; g < n_kv_heads; ++g)
        s[static_cast<size_t>(g * n + j)] =
            total > 0.0 ? M[static_cast<size_t>(g * n + j)] * m[static_cast<size_t>(g)] / total : 0.0;
    }
    return s;
  }

  /// Stage 1 of one KV head: the positions of a[0 .. n) in descending order (ties to the earlier) before the running
  /// share a / sum a first reaches `threshold` (none when it never does), at most `cap` of them.
  static std::vector<int64_t> stage_one(const double* a, int64_t n, double threshold, int64_t cap) {
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return a[x] > a[y]; });
    const double total = std::accumulate(a, a + n, 0.0);
    int64_t count = 0;
    double run = 0.0;
    for (int64_t k = 0; k < n; ++k) {
      run += total > 0.0 ? a[order[static_cast<size_t>(k)]] / total : 0.0;
      if (run >= threshold) {
        count = k;
        break;
      }
    }
    order.resize(static_cast<size_t>(std::min(count, cap)));
    return order;
  }

  /// max(0, floor(n b / T) - w) with b the mean of the head budgets (the layer's per-head budget b_l), or n without
  /// budgets.
  static int64_t stage_one_cap(const rkv_scorer_inputs& in, int64_t n_kv_heads, int64_t n, int64_t w) {
    const int64_t* b = rkv::sdk::head_budgets(in, n_kv_heads);
    if (!b) return n;
    const int64_t b_l = std::accumulate(b, b + n_kv_heads, int64_t{0}) / n_kv_heads;
    return std::max<int64_t>(0, n * b_l / (n + w) - w);
  }

  int64_t window_, kernel_;
  double mass_;
  rkv::sdk::Host host_;
  int64_t n_heads_ = 0, head_dim_ = 0;
};

}  // namespace

RKV_PLUGIN(DefensiveKV)
