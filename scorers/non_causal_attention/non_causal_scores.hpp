// Non-causal chunked attention z-scores (the formula of non_causal_attention.cpp's file comment), shared by the
// non_causal_attention and compactor scorers (header-only: each plugin is its own .so).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

namespace rkv_non_causal {

/// kvpress NonCausalAttnPress.score on the n positions j0 .. j0 + n - 1 (n >= 1) of one layer, the chunks starting
/// at j0: queries Q float32 [H, T, d] (after RoPE), keys K and values V float32 [H_kv, T, d] (keys after RoPE), chunk
/// length c. Returns double [H_kv, n]: the pooled attention x ||v||, z-normalized over all H_kv x n entries.
/// `poll` runs once per query head (cancellation). Dots and softmax in double.
inline std::vector<double> non_causal_z_scores(const float* Q, const float* K, const float* V, int64_t H,
                                               int64_t n_kv_heads, int64_t T, int64_t d, int64_t j0, int64_t n,
                                               int64_t c, const std::function<void()>& poll) {
  const int64_t G = H / n_kv_heads;
  std::vector<double> b(static_cast<size_t>(n_kv_heads * n), 0.0), logits(static_cast<size_t>(c));
  for (int64_t h = 0; h < H; ++h) {
    poll();
    const int64_t g = h / G;
    const float* Kg = K + (g * T + j0) * d;
    const float* Qh = Q + (h * T + j0) * d;
    for (int64_t c0 = 0; c0 < n; c0 += c) {
      const int64_t R = std::min(c, n - c0);  // real positions of this chunk; c - R padded ones (last chunk only)
      for (int64_t t = 0; t < R; ++t) {
        double mx = -INFINITY;
        for (int64_t j = 0; j < R; ++j) {
          double dot = 0.0;
          for (int64_t i = 0; i < d; ++i) dot += static_cast<double>(Qh[(c0 + t) * d + i]) * Kg[(c0 + j) * d + i];
          logits[static_cast<size_t>(j)] = dot;
          mx = std::max(mx, dot);
        }
        if (R < c) mx = std::max(mx, -1e-9);  // padded keys: logit -1e-9
        double z = static_cast<double>(c - R) * std::exp(-1e-9 - mx);
        for (int64_t j = 0; j < R; ++j) z += std::exp(logits[static_cast<size_t>(j)] - mx);
        for (int64_t j = 0; j < R; ++j)
          b[static_cast<size_t>(g * n + c0 + j)] += std::exp(logits[static_cast<size_t>(j)] - mx) / z / G;
      }
      if (R < c) {  // padded query rows: logits 0 on real keys, -1e-9 on padded ones
        const double z = static_cast<double>(R) + static_cast<double>(c - R) * std::exp(-1e-9);
        for (int64_t j = 0; j < R; ++j) b[static_cast<size_t>(g * n + c0 + j)] += static_cast<double>(c - R) / z / G;
      }
    }
  }
  std::vector<double> p(static_cast<size_t>(n_kv_heads * n));
  for (int64_t g = 0; g < n_kv_heads; ++g) {
    const float* Vg = V + (g * T + j0) * d;
    for (int64_t j = 0; j < n; ++j) {
      double ss = 0.0;
      for (int64_t i = 0; i < d; ++i) ss += static_cast<double>(Vg[j * d + i]) * Vg[j * d + i];
      b[static_cast<size_t>(g * n + j)] *= std::sqrt(ss);
    }
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t i = std::max<int64_t>(0, j - 1); i <= std::min(n - 1, j + 1); ++i) sum += b[static_cast<size_t>(g * n + i)];
      p[static_cast<size_t>(g * n + j)] = sum / 3.0;
    }
  }
  const double N = static_cast<double>(p.size());
  double mean = 0.0;
  for (double x : p) mean += x;
  mean /= N;
  double var = 0.0;
  for (double x : p) var += (x - mean) * (x - mean);
  const double sd = p.size() > 1 ? std::sqrt(var / (N - 1)) : 0.0;
  const double denom = std::max(sd, 1e-6);
  for (double& x : p) x = (x - mean) / denom;
  return p;
}

}  // namespace rkv_non_causal
