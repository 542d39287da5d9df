// RoPE frequencies (plain, linear, llama3) against hand-computed values, the rotate_half rotation, and key
// re-rotation (rope_rerotate: a key rotated at p moved to p').
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/errors.hpp"
#include "model/rope.hpp"

namespace {

TEST(Rope, PlainFrequencies) {
  // d = 8, theta = 10000: inv_freq[i] = 10000^(-2i/8) = 1, 0.1, 0.01, 0.001.
  const auto f = rkv::rope_inv_freq(8, 10000.0, {});
  ASSERT_EQ(f.size(), 4u);
  EXPECT_DOUBLE_EQ(f[0], 1.0);
  EXPECT_NEAR(f[1], 0.1, 1e-15);
  EXPECT_NEAR(f[2], 0.01, 1e-16);
  EXPECT_NEAR(f[3], 0.001, 1e-17);
  // SmolLM2: d = 64, theta = 100000: inv_freq[1] = 1e5^(-1/32) = exp(-ln(1e5)/32) = 0.69783...
  const auto s = rkv::rope_inv_freq(64, 100000.0, {});
  EXPECT_NEAR(s[1], 0.6978305848598663, 1e-15);
  EXPECT_NEAR(s[31], std::pow(1e5, -62.0 / 64.0), 1e-18);
}

TEST(Rope, LinearScaling) {
  rkv::RopeScaling sc;
  sc.type = "linear";
  sc.factor = 4.0;
  const auto f = rkv::rope_inv_freq(8, 10000.0, sc);
  EXPECT_DOUBLE_EQ(f[0], 0.25);
  EXPECT_NEAR(f[1], 0.025, 1e-15);
}

TEST(Rope, Llama3Scaling) {
  // d = 8, theta = 5e5, factor 8, low 1, high 4, original context 8192:
  //   low_wavelen = 8192, high_wavelen = 2048.
  //   i=0: f = 1,            wavelen 6.283   < 2048 -> 1
  //   i=1: f = 5e5^-0.25 = 0.0376060309, wavelen 167.08 < 2048 -> unchanged
  //   i=2: f = 5e5^-0.5 = 1.41421356e-3, wavelen 4442.88 (medium):
  //        s = (8192 / 4442.88 - 1) / 3 = 0.2812826; f' = (1 - s) f / 8 + s f = 5.2484616e-4
  //   i=3: f = 5e5^-0.75 = 5.31829e-5, wavelen 118143 > 8192 -> f / 8 = 6.6478699e-6
  rkv::RopeScaling sc;
  sc.type = "llama3";
  sc.factor = 8.0;
  sc.low_freq_factor = 1.0;
  sc.high_freq_factor = 4.0;
  sc.original_context_length = 8192.0;
  const auto f = rkv::rope_inv_freq(8, 500000.0, sc);
  EXPECT_DOUBLE_EQ(f[0], 1.0);
  EXPECT_NEAR(f[1], 0.0376060309, 1e-10);
  EXPECT_NEAR(f[2], 5.2484616e-4, 1e-11);
  EXPECT_NEAR(f[3], 6.6478699e-6, 1e-12);
}

TEST(Rope, RejectsBadInput) {
  EXPECT_THROW(rkv::rope_inv_freq(7, 10000.0, {}), rkv::InputError);
  EXPECT_THROW(rkv::rope_inv_freq(8, 0.0, {}), rkv::InputError);
  rkv::RopeScaling sc;
  sc.type = "yarn";
  EXPECT_THROW(rkv::rope_inv_freq(8, 10000.0, sc), rkv::InputError);
}

TEST(Rope, RotateHalfPairsIWithIPlusHalf) {
  // d = 4, inv_freq = {1, 0.01}, position 2: angles 2 and 0.02.
  // x = (1, 0, 0, 1): pair 0 = (x0, x2) = (1, 0) -> (cos 2, sin 2); pair 1 = (x1, x3) = (0, 1) -> (-sin .02, cos .02).
  const std::vector<double> inv = {1.0, 0.01};
  const int64_t pos = 2;
  std::vector<float> c, s;
  rkv::rope_tables(inv, &pos, 1, c, s);
  float x[4] = {1, 0, 0, 1};
  rkv::rope_rotate_half(x, 2, c.data(), s.data());
  EXPECT_NEAR(x[0], std::cos(2.0), 1e-7);
  EXPECT_NEAR(x[2], std::sin(2.0), 1e-7);
  EXPECT_NEAR(x[1], -std::sin(0.02), 1e-7);
  EXPECT_NEAR(x[3], std::cos(0.02), 1e-7);
}

// SmolLM2-135M: head_dim 64, rope_theta 100000 (its config; tests/model/test_smollm2.cpp reads them from the GGUF).
std::vector<double> smollm2_inv_freq() { return rkv::rope_inv_freq(64, 100000.0, {}); }

/// A seeded unrotated key of 64 values in [-4, 4] (the scale of SmolLM2's keys).
std::vector<float> seeded_key(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  std::vector<float> k(64);
  for (float& x : k) x = u(rng);
  return k;
}

/// The key rotated at `pos` the way the forward pass does it: rope_tables at that position, then rope_rotate_half.
std::vector<float> rotated_at(std::vector<float> k, const std::vector<double>& inv, int64_t pos) {
  std::vector<float> c, s;
  rkv::rope_tables(inv, &pos, 1, c, s);
  rkv::rope_rotate_half(k.data(), static_cast<int64_t>(inv.size()), c.data(), s.data());
  return k;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
  return m;
}

TEST(Rope, ReRotatingAKeyFrom700To100EqualsTheKeyRotatedAt100) {
  const std::vector<double> inv = smollm2_inv_freq();
  for (uint32_t seed : {1u, 2u, 3u}) {
    const std::vector<float> k = seeded_key(seed);
    std::vector<float> moved = rotated_at(k, inv, 700);
    const std::vector<float> direct = rotated_at(k, inv, 100);
    ASSERT_GT(max_abs_diff(moved, direct), 0.5) << "positions 700 and 100 must differ for the test to mean anything";
    rkv::rope_rerotate(moved.data(), inv, 700, 100);
    EXPECT_LE(max_abs_diff(moved, direct), 1e-5) << "seed " << seed;
  }
}

TEST(Rope, RotatingByAThenByBEqualsRotatingOnceByTheSum) {
  const std::vector<double> inv = smollm2_inv_freq();
  const std::vector<float> k = seeded_key(4);
  for (const auto& [a, b] : std::vector<std::pair<int64_t, int64_t>>{{700, -600}, {37, 1000}, {-5, 2047}, {3, 4}}) {
    std::vector<float> twice = k, once = k;
    rkv::rope_rotate_by(twice.data(), inv, a);
    rkv::rope_rotate_by(twice.data(), inv, b);
    rkv::rope_rotate_by(once.data(), inv, a + b);
    EXPECT_LE(max_abs_diff(twice, once), 1e-5) << "a = " << a << ", b = " << b;
    // Rotating an unrotated key by a is RoPE at position a.
    std::vector<float> at_a = k;
    rkv::rope_rotate_by(at_a.data(), inv, a);
    EXPECT_LE(max_abs_diff(at_a, rotated_at(k, inv, a)), 1e-6) << "a = " << a;
  }
}

TEST(Rope, ReRotatingToTheSamePositionChangesNothing) {
  // delta = 0: cos 0 = 1 and sin 0 = 0 exactly, so the key is bit-identical.
  const std::vector<double> inv = smollm2_inv_freq();
  const std::vector<float> k = rotated_at(seeded_key(5), inv, 321);
  std::vector<float> same = k;
  rkv::rope_rerotate(same.data(), inv, 321, 321);
  EXPECT_EQ(same, k);
}

}  // namespace
