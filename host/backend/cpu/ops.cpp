#include "backend/cpu/ops.hpp"

#include <cmath>
#include <cstring>

namespace rkv::cpu {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define RKV_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define RKV_CLONES
#endif

RKV_CLONES void rmsnorm_row(const float* x, const float* w, float eps, int64_t n, float* y) {
  constexpr int64_t W = 8;  // independent double lanes: deterministic and vectorizable
  double lane[W] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    for (int64_t k = 0; k < W; ++k) lane[k] += static_cast<double>(x[i + k]) * static_cast<double>(x[i + k]);
  }
  double ss = 0.0;
  for (int64_t k = 0; k < W; ++k) ss += lane[k];
  for (; i < n; ++i) ss += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + static_cast<double>(eps)));
  for (i = 0; i < n; ++i) y[i] = x[i] * scale * w[i];
}

namespace {

/// exp(v) as described at exp_inplace (inlined into the vectorized loops below).
inline float exp_approx(float v) {
  const float log2e = 1.44269504088896341f;
  const float ln2_hi = 0.693359375f;  // Cody-Waite split of ln 2 (Cephes expf)
  const float ln2_lo = -2.12194440e-4f;
  const bool under = v < -87.3f;
  const bool over = v > 88.7f;
  v = v < -87.3f ? -87.3f : (v > 88.7f ? 88.7f : v);
  const float kf = std::nearbyint(v * log2e);
  const float r = (v - kf * ln2_hi) - kf * ln2_lo;
  // exp(r) for |r| <= 0.3466: Taylor to r^6 (truncation error < 2e-8 relative).
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t k = static_cast<int32_t>(kf);
  // 2^k built in two halves so that k down to -126 and up to 128 stay representable.
  const int32_t k1 = k / 2, k2 = k - k1;
  const uint32_t b1 = static_cast<uint32_t>(k1 + 127) << 23, b2 = static_cast<uint32_t>(k2 + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, 4);
  std::memcpy(&s2, &b2, 4);
  float e = p * s1 * s2;
  e = under ? 0.0f : e;
  e = over ? INFINITY : e;
  return e;
}

}  // namespace

RKV_CLONES void exp_inplace(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = exp_approx(x[i]);
}

RKV_CLONES float softmax_unnormalized(float* x, int64_t n) {
  // Two passes over the row: the max, then exp(x - max) with the sum. Reductions use 16 independent lanes (a fixed,
  // deterministic order the compiler can vectorize).
  constexpr int64_t W = 16;
  float lane[W];
  for (int64_t k = 0; k < W; ++k) lane[k] = -INFINITY;
  int64_t j = 0;
  for (; j + W <= n; j += W) {
    for (int64_t k = 0; k < W; ++k) lane[k] = x[j + k] > lane[k] ? x[j + k] : lane[k];
  }
  float mx = -INFINITY;
  for (int64_t k = 0; k < W; ++k) mx = lane[k] > mx ? lane[k] : mx;
  for (; j < n; ++j) mx = x[j] > mx ? x[j] : mx;
  for (int64_t k = 0; k < W; ++k) lane[k] = 0.0f;
  for (j = 0; j + W <= n; j += W) {
    for (int64_t k = 0; k < W; ++k) {
      const float e = exp_approx(x[j + k] - mx);
      x[j + k] = e;
      lane[k] += e;
    }
  }
  double sum = 0.0;
  for (int64_t k = 0; k < W; ++k) sum += lane[k];
  for (; j < n; ++j) {
    x[j] = exp_approx(x[j] - mx);
    sum += x[j];
  }
  return static_cast<float>(sum);
}

RKV_CLONES void softmax_row(float* x, int64_t n) {
  const float inv = 1.0f / softmax_unnormalized(x, n);
  for (int64_t j = 0; j < n; ++j) x[j] *= inv;
}

RKV_CLONES void silu_mul(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + exp_approx(-gate[i])) * up[i];
}

void gelu_tanh_mul(float* gate, const float* up, int64_t n) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = 0.5f * g * (1.0f + std::tanh(k * (g + 0.044715f * g * g * g))) * up[i];
  }
}

void softcap(float* x, float cap, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

void add_bias(float* y, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += b[i];
}

}  // namespace rkv::cpu
