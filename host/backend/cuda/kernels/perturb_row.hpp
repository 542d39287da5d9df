// The perturbation of one value row for the perturbation_kl signal (docs/ARCHITECTURE.md "perturbation_kl"), shared by the CUDA
// kernel and host code (RKV_HOST_DEVICE), so both backends compute the same bits:
//   eps = perturbation_noise(seed, draw, example, layer, head, position)   (Philox4x32-10 + Box-Muller, float32 [d])
//   n   = sqrt(sum_e double(v_e)^2)                                         (double, e = 0 .. d-1 in order)
//   v_e <- float( double(v_e) + (alpha * n) * double(eps_e) )              (double, one rounding to float)
// On the device the double products and sums use round-to-nearest intrinsics (no fused multiply-add), so host and
// device agree bit for bit except where the device's double log/sin/cos differ from the host libm in the last bit.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/philox.hpp"

namespace rkv {

/// Largest head dimension perturb_value_row() accepts.
constexpr int kPerturbMaxHeadDim = 256;

RKV_HOST_DEVICE inline double perturb_dmul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
RKV_HOST_DEVICE inline double perturb_dadd(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

/// Perturbs v[0..d) in place (d a multiple of 4, at most kPerturbMaxHeadDim) as described at the top of this file.
/// Pure; thread-safe.
RKV_HOST_DEVICE inline void perturb_value_row(float* v, int d, double alpha, uint64_t seed, uint32_t draw,
                                              uint32_t example, uint32_t layer, uint32_t head, uint32_t position) {
  float eps[kPerturbMaxHeadDim];
  perturbation_noise(seed, draw, example, layer, head, position, d, eps);
  double ss = 0.0;
  for (int e = 0; e < d; ++e) ss = perturb_dadd(ss, perturb_dmul(static_cast<double>(v[e]), static_cast<double>(v[e])));
  const double scale = perturb_dmul(alpha, sqrt(ss));
  for (int e = 0; e < d; ++e)
    v[e] = static_cast<float>(perturb_dadd(static_cast<double>(v[e]), perturb_dmul(scale, static_cast<double>(eps[e]))));
}

}  // namespace rkv
