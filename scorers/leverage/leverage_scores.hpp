// Approximate leverage scores of centred pre-RoPE keys with a right Gaussian sketch, shared by the leverage and
// compactor scorers (header-only: each plugin is its own .so).
//
// Source: kvpress 0.5.5, kvpress/presses/leverage_press.py (LeverageScorePress.compute_leverage_scores,
// chol_with_jitter); Chari & Van Durme, "Compactor: Calibrated Query-Agnostic KV Cache Compression with Approximate
// Leverage Scores" (2025, arXiv 2507.08143). For KV head g with pre-RoPE keys K0[g] over n positions [n, d] and the
// sketch Phi[g] [d, k]:
//
//   X      = (K0[g] - mean_j K0[g, j]) Phi[g]                      [n, k]  (sequence-centred, then sketched)
//   G      = (X^T X + (X^T X)^T) / 2 + eps I,  eps = 1e-2           (first try of chol_with_jitter; on a failed
//                                                                    Cholesky eps becomes 10 eps, up to 5 tries)
//   l[j]   = x_j^T G^{-1} x_j = || L^{-1} x_j ||^2,  G = L L^T      (kvpress: cholesky_solve, then clamp_min(0))
//   z      = (l - mean(l)) / max(std(l), 1e-6)   mean and unbiased std over every KV head and position together
//
// The sketch is kvpress's draw: Phi = torch.randn(1, H_kv, d, k) * (1 / sqrt(k)) from torch's CPU generator, which
// this header reproduces from a seed (torch_randn below), so with torch.manual_seed(seed) before press.score() the
// two sketches agree to float32 rounding of torch's vectorised log/sin/cos. Sums and the Cholesky run in double.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace rkv_leverage {

/// Box-Muller on 16 uniforms in place, as ATen's normal_fill_16 (float): pairs (j, j + 8), u1 = 1 - data[j].
inline void normal_fill_16(float* data) {
  for (int j = 0; j < 8; ++j) {
    const float u1 = 1.0f - data[j], u2 = data[j + 8];
    const float radius = std::sqrt(-2.0f * std::log(u1));
    const float theta = 2.0f * static_cast<float>(M_PI) * u2;
    data[j] = radius * std::cos(theta);
    data[j + 8] = radius * std::sin(theta);
  }
}

/// torch.randn(n) (float32, CPU) after torch.manual_seed(seed): torch's generator is MT19937 seeded with the low 32
/// bits of the seed; ATen's normal_fill draws n uniforms (x mod 2^24) 2^-24 first, turns each block of 16 into normals
/// (normal_fill_16), and when n is not a multiple of 16 redraws the last 16 values from 16 fresh uniforms. For n < 16
/// torch takes another (scalar) path; this draws 16 the same way and keeps the first n (a documented deviation).
inline std::vector<float> torch_randn(uint32_t seed, int64_t n) {
  std::mt19937 engine(seed);
  auto uniform = [&engine] { return static_cast<float>(engine() & 0xFFFFFFu) * (1.0f / 16777216.0f); };
  const int64_t m = std::max<int64_t>(n, 16);
  std::vector<float> x(static_cast<size_t>(m));
  for (float& u : x) u = uniform();
  for (int64_t i = 0; i + 16 <= m; i += 16) normal_fill_16(x.data() + i);
  if (m % 16 != 0) {
    float* tail = x.data() + m - 16;
    for (int j = 0; j < 16; ++j) tail[j] = uniform();
    normal_fill_16(tail);
  }
  x.resize(static_cast<size_t>(n));
  return x;
}

/// kvpress's sketch Phi [H_kv, d, k] = torch.randn(1, H_kv, d, k) * float32(1 / sqrt(k)) after manual_seed(seed).
inline std::vector<float> gaussian_sketch(uint32_t seed, int64_t n_kv_heads, int64_t d, int64_t k) {
  std::vector<float> phi = torch_randn(seed, n_kv_heads * d * k);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(k)));
  for (float& p : phi) p *= scale;
  return phi;
}

/// In-place lower Cholesky factor of the symmetric k x k matrix `a` (row-major); false when a pivot is not positive.
inline bool cholesky(std::vector<double>& a, int64_t k) {
  for (int64_t j = 0; j < k; ++j) {
    double s = a[static_cast<size_t>(j * k + j)];
    for (int64_t p = 0; p < j; ++p) s -= a[static_cast<size_t>(j * k + p)] * a[static_cast<size_t>(j * k + p)];
    if (!(s > 0.0)) return false;
    const double l = std::sqrt(s);
    a[static_cast<size_t>(j * k + j)] = l;
    for (int64_t i = j + 1; i < k; ++i) {
      double t = a[static_cast<size_t>(i * k + j)];
      for (int64_t p = 0; p < j; ++p) t -= a[static_cast<size_t>(i * k + p)] * a[static_cast<size_t>(j * k + p)];
      a[static_cast<size_t>(i * k + j)] = t / l;
    }
  }
  return true;
}

/// Leverage z-scores (file comment) of positions j0 .. j0 + n - 1 of pre-RoPE keys K0 float32 [H_kv, T, d] with the
/// sketch `phi` [H_kv, d, k]: double [H_kv, n]. Throws std::runtime_error when the Cholesky fails after 5 jitters
/// (non-finite keys). n >= 1.
inline std::vector<double> leverage_z_scores(const float* K0, int64_t n_kv_heads, int64_t T, int64_t d, int64_t j0,
                                             int64_t n, const std::vector<float>& phi, int64_t k) {
  std::vector<double> lev(static_cast<size_t>(n_kv_heads * n)), X(static_cast<size_t>(n * k)), mean(static_cast<size_t>(d));
  std::vector<double> G(static_cast<size_t>(k * k)), L, y(static_cast<size_t>(k));
  for (int64_t g = 0; g < n_kv_heads; ++g) {
    const float* Kg = K0 + (g * T + j0) * d;
    const float* P = phi.data() + g * d * k;
    std::fill(mean.begin(), mean.end(), 0.0);
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < d; ++i) mean[static_cast<size_t>(i)] += Kg[j * d + i];
    for (double& m : mean) m /= static_cast<double>(n);
    std::fill(X.begin(), X.end(), 0.0);
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < d; ++i) {
        const double c = Kg[j * d + i] - mean[static_cast<size_t>(i)];
        for (int64_t c2 = 0; c2 < k; ++c2) X[static_cast<size_t>(j * k + c2)] += c * P[i * k + c2];
      }
    for (int64_t a = 0; a < k; ++a)
      for (int64_t b = a; b < k; ++b) {
        double s = 0.0;
        for (int64_t j = 0; j < n; ++j) s += X[static_cast<size_t>(j * k + a)] * X[static_cast<size_t>(j * k + b)];
        G[static_cast<size_t>(a * k + b)] = G[static_cast<size_t>(b * k + a)] = s;
      }
    double jitter = 1e-2;
    bool ok = false;
    for (int attempt = 0; attempt < 5 && !ok; ++attempt) {
      L = G;
      for (int64_t a = 0; a < k; ++a) L[static_cast<size_t>(a * k + a)] += jitter;
      ok = cholesky(L, k);
      if (!ok) jitter = std::max(1e-8, 10.0 * jitter);
    }
    if (!ok) throw std::runtime_error("Cholesky failed after 5 tries (non-finite keys?) at KV head " + std::to_string(g));
    for (int64_t j = 0; j < n; ++j) {  // l[j] = ||L^{-1} x_j||^2 by forward substitution
      double s = 0.0;
      for (int64_t a = 0; a < k; ++a) {
        double t = X[static_cast<size_t>(j * k + a)];
        for (int64_t p = 0; p < a; ++p) t -= L[static_cast<size_t>(a * k + p)] * y[static_cast<size_t>(p)];
        y[static_cast<size_t>(a)] = t / L[static_cast<size_t>(a * k + a)];
        s += y[static_cast<size_t>(a)] * y[static_cast<size_t>(a)];
      }
      lev[static_cast<size_t>(g * n + j)] = s;
    }
  }
  const double N = static_cast<double>(lev.size());
  double mu = 0.0, var = 0.0;
  for (double x : lev) mu += x;
  mu /= N;
  for (double x : lev) var += (x - mu) * (x - mu);
  const double denom = std::max(lev.size() > 1 ? std::sqrt(var / (N - 1)) : 0.0, 1e-6);
  for (double& x : lev) x = (x - mu) / denom;
  return lev;
}

}  // namespace rkv_leverage
