// Philox4x32-10 counter-based random numbers and Box-Muller normals (docs/ARCHITECTURE.md "perturbation_kl").
//
// Philox4x32-10: Salmon, Moraes, Dror, Shaw, "Parallel Random Numbers: As Easy as 1, 2, 3" (SC 2011), and its
// reference implementation Random123 (philox.h): 10 rounds of
//   (hi0, lo0) = mulhilo32(0xD2511F53, c0); (hi1, lo1) = mulhilo32(0xCD9E8D57, c2)
//   c = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0)
// with the key bumped by (0x9E3779B9, 0xBB67AE85) between rounds. Checked against Random123's known-answer vectors.
//
// The perturbation noise eps ~ N(0, I_d) for (seed, draw, example i, layer l, KV head h, position u) uses
// key = (seed low 32 bits, seed high 32 bits) and counter = (u, l << 16 | h, i, draw << 16 | block), where block
// b covers dimensions 4b..4b+3: the four 32-bit outputs (x0, x1, x2, x3) give two Box-Muller pairs
//   r = sqrt(-2 ln U(x0)), eps[4b] = r cos(2 pi U(x1)), eps[4b+1] = r sin(2 pi U(x1)), and likewise from (x2, x3),
// with U(x) = (x + 1) / 2^32 in (0, 1]. Limits: layer, head, draw and d/4 below 65536.
// Pure functions of their arguments: thread-safe, and usable from CUDA device code (RKV_HOST_DEVICE).
#pragma once
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define RKV_HOST_DEVICE __host__ __device__
#else
#define RKV_HOST_DEVICE
#endif

namespace rkv {

struct Philox4x32 {
  uint32_t v[4];
};

/// One Philox4x32-10 block: counter (4 words) and key (2 words) -> 4 words.
RKV_HOST_DEVICE inline Philox4x32 philox4x32_10(Philox4x32 ctr, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * ctr.v[0];
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * ctr.v[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    ctr = Philox4x32{{hi1 ^ ctr.v[1] ^ k0, lo1, hi0 ^ ctr.v[3] ^ k1, lo0}};
  }
  return ctr;
}

/// U(x) = (x + 1) / 2^32, a uniform in (0, 1] (never 0, so log is finite).
RKV_HOST_DEVICE inline double uniform_open0(uint32_t x) { return (static_cast<double>(x) + 1.0) * 2.3283064365386963e-10; }

/// Fills eps[0..d) (d a multiple of 4) with N(0, 1) draws keyed by (seed, draw, example, layer, head, position).
RKV_HOST_DEVICE inline void perturbation_noise(uint64_t seed, uint32_t draw, uint32_t example, uint32_t layer,
                                               uint32_t head, uint32_t position, int d, float* eps) {
  const double two_pi = 6.283185307179586;
  const uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int b = 0; b < d / 4; ++b) {
    const Philox4x32 ctr{{position, (layer << 16) | head, example, (draw << 16) | static_cast<uint32_t>(b)}};
    const Philox4x32 x = philox4x32_10(ctr, k0, k1);
    const double r0 = std::sqrt(-2.0 * std::log(uniform_open0(x.v[0])));
    const double r1 = std::sqrt(-2.0 * std::log(uniform_open0(x.v[2])));
    const double a0 = two_pi * uniform_open0(x.v[1]), a1 = two_pi * uniform_open0(x.v[3]);
    eps[4 * b + 0] = static_cast<float>(r0 * std::cos(a0));
    eps[4 * b + 1] = static_cast<float>(r0 * std::sin(a0));
    eps[4 * b + 2] = static_cast<float>(r1 * std::cos(a1));
    eps[4 * b + 3] = static_cast<float>(r1 * std::sin(a1));
  }
}

}  // namespace rkv
