// The observation window's attention rows as CAKE's reference computes them, for the CAKE signal (signals/cake) and
// scorer (scorers/cake). Header-only; each plugin compiles its own copy.
//
// Source: FFY0/DefensiveKV at 9251b95e7e282a6c18dd98ef6318dd489e639a58, kvpress/presses/cake_global_press.py
// (CakeGlobalPress.compute_window_attention, the port of antgroup/cakekv that DefensiveKV compares with). With w the
// window, n = T - w, window queries q_{h,t} (t < w, at position n + t) and keys k_j after RoPE:
//   A[h, t, j] = softmax_{j' <= n + t}(q_{h,t} . k_{j'} / sqrt(d))[j]   for j < n
// the rows over all the keys a query sees, then cut to the n columns before the window without renormalising
// (attn_weights[..., :-window_size]). On a sliding-window layer (attention_window W > 0) a query at position p sees
// keys p - W + 1 .. p only (the others get no attention), as the model's attention does; the reference has no
// sliding window.
#pragma once
#include <ripplekv/sdk.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace rkv_cake {

/// A[h, t, j] of query head h (KV head h / G) into rows [w * n] (row-major, double), from Q float32 [H, w, d] and
/// K float32 [H_kv, T, d]. W: the layer's sliding window, 0 for full attention. Thread rule: pure.
inline void window_rows(const float* Q, const float* K, int64_t h, int64_t G, int64_t T, int64_t w, int64_t d,
                        int64_t W, std::vector<double>& rows) {
  const int64_t n = T - w, g = h / G;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  rows.assign(static_cast<size_t>(w * n), 0.0);
  std::vector<double> logit(static_cast<size_t>(T));
  for (int64_t t = 0; t < w; ++t) {
    const int64_t seen = n + t + 1;  // the query at position n + t sees keys j0 .. n + t
    const int64_t j0 = W > 0 ? std::max<int64_t>(0, seen - W) : 0;
    double mx = -INFINITY, z = 0.0;
    for (int64_t j = j0; j < seen; ++j) {
      double dot = 0.0;
      for (int64_t i = 0; i < d; ++i) dot += static_cast<double>(Q[(h * w + t) * d + i]) * K[(g * T + j) * d + i];
      logit[static_cast<size_t>(j)] = dot * scale;
      mx = std::max(mx, dot * scale);
    }
    for (int64_t j = j0; j < seen; ++j) z += std::exp(logit[static_cast<size_t>(j)] - mx);
    for (int64_t j = j0; j < std::min(seen, n); ++j)
      rows[static_cast<size_t>(t * n + j)] = std::exp(logit[static_cast<size_t>(j)] - mx) / z;
  }
}

/// The mean and the unbiased variance (torch.var: 1 / (w - 1); 0 when w = 1) over the w window queries of column j
/// of `rows` [w * n] (window_rows). Thread rule: pure.
inline void column_moments(const std::vector<double>& rows, int64_t w, int64_t n, int64_t j, double& mean,
                           double& variance) {
  mean = 0.0;
  for (int64_t t = 0; t < w; ++t) mean += rows[static_cast<size_t>(t * n + j)];
  mean /= static_cast<double>(w);
  double ss = 0.0;
  for (int64_t t = 0; t < w; ++t) {
    const double dev = rows[static_cast<size_t>(t * n + j)] - mean;
    ss += dev * dev;
  }
  variance = w > 1 ? ss / static_cast<double>(w - 1) : 0.0;
}

/// What both CAKE plugins ask the host for on a model of `shape`: keys and the window queries of `window` positions
/// (the scorer also protects them). Throws rkv::sdk::Error for a shape whose H is no positive multiple of H_kv.
inline rkv_scorer_requirements window_requirements(const rkv_attention_shape& shape, int64_t window) {
  if (shape.n_heads < 1 || shape.n_kv_heads < 1 || shape.n_heads % shape.n_kv_heads != 0)
    throw rkv::sdk::Error(RKV_ERROR_INVALID_ARGUMENT, "cake: n_heads must be a positive multiple of n_kv_heads");
  rkv_scorer_requirements r{};
  r.stats = RKV_STAT_KEYS | RKV_STAT_WINDOW_QUERIES;
  r.window = window;
  return r;
}

/// Reads the window queries and keys a CAKE plugin asked for: checks the window (min(window, T) queries) and their
/// shapes against the inputs (throws rkv::sdk::Error naming the tensor) and returns W, the layer's sliding window (0
/// when the host is older).
inline int64_t checked_window_inputs(const rkv_scorer_inputs& in, int64_t window, int64_t H, int64_t H_kv, int64_t d) {
  const int64_t T = in.prefix_tokens, w = in.window;
  if (w < 1 || w > std::min(window, T))
    throw rkv::sdk::Error(RKV_ERROR_INVALID_ARGUMENT, "cake: window queries over " + std::to_string(w) +
                                                          " positions, expected min(window, T) = " +
                                                          std::to_string(std::min(window, T)));
  rkv::sdk::require_tensor(in.keys, "keys", kDLFloat, 32, {H_kv, T, d});
  rkv::sdk::require_tensor(in.window_queries, "window_queries", kDLFloat, 32, {H, w, d});
  return RKV_HAS_FIELD(&in, rkv_scorer_inputs, attention_window) ? in.attention_window : 0;
}

}  // namespace rkv_cake
