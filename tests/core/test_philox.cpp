// Philox4x32-10 against Random123's published known-answer vectors (kat_vectors, "philox4x32 10" lines), and the
// Box-Muller normals' moments.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/philox.hpp"

namespace {

void expect_kat(rkv::Philox4x32 ctr, uint32_t k0, uint32_t k1, rkv::Philox4x32 want) {
  const rkv::Philox4x32 got = rkv::philox4x32_10(ctr, k0, k1);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got.v[i], want.v[i]) << "word " << i;
}

TEST(Philox, Random123KnownAnswers) {
  expect_kat({{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}});
  expect_kat({{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}}, 0xffffffff, 0xffffffff,
             {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}});
  expect_kat({{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}}, 0xa4093822, 0x299f31d0,
             {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}});
}

TEST(Philox, NoiseIsAPureFunctionOfItsKey) {
  std::vector<float> a(64), b(64), c(64);
  rkv::perturbation_noise(7, 0, 1, 2, 0, 5, 64, a.data());
  rkv::perturbation_noise(7, 0, 1, 2, 0, 5, 64, b.data());
  rkv::perturbation_noise(7, 0, 1, 2, 0, 6, 64, c.data());  // another position
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(Philox, NormalMomentsOverManyDraws) {
  // 256 positions x 64 dims = 16384 draws: mean within 4 sigma/sqrt(n) = 0.031 of 0, variance within 0.05 of 1.
  double sum = 0, sq = 0;
  const int n_pos = 256, d = 64;
  std::vector<float> eps(d);
  for (int u = 0; u < n_pos; ++u) {
    rkv::perturbation_noise(123, 1, 0, 3, 2, static_cast<uint32_t>(u), d, eps.data());
    for (float e : eps) sum += e, sq += double(e) * e;
  }
  const double n = n_pos * d, mean = sum / n, var = sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.031);
  EXPECT_NEAR(var, 1.0, 0.05);
}

}  // namespace
