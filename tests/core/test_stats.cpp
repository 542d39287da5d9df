// Statistics: values worked out by hand (ranks, Spearman) and properties of the bootstrap.
#include <gtest/gtest.h>

#include <cmath>

#include "eval/stats.hpp"

namespace {

TEST(Stats, AverageRanksForTies) {
  EXPECT_EQ(rkv::average_ranks({10, 20, 20, 30}), (std::vector<double>{1, 2.5, 2.5, 4}));
  EXPECT_EQ(rkv::average_ranks({3, 1, 2}), (std::vector<double>{3, 1, 2}));
  EXPECT_EQ(rkv::average_ranks({5, 5, 5}), (std::vector<double>{2, 2, 2}));
}

TEST(Stats, SpearmanByHand) {
  EXPECT_DOUBLE_EQ(rkv::spearman_rho({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(rkv::spearman_rho({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  // Monotone transforms do not change rho.
  EXPECT_DOUBLE_EQ(rkv::spearman_rho({1, 2, 3, 4}, {1, 8, 27, 64}), 1.0);
  // No ties: rho = 1 - 6 sum d^2 / (n (n^2 - 1)); x ranks 1..5, y = [2, 1, 4, 3, 5]: d^2 = 1+1+1+1+0 = 4
  // -> 1 - 24 / 120 = 0.8.
  EXPECT_NEAR(rkv::spearman_rho({1, 2, 3, 4, 5}, {2, 1, 4, 3, 5}), 0.8, 1e-12);
  // Ties: x = [1, 2, 2, 3] -> ranks [1, 2.5, 2.5, 4]; y = [1, 2, 3, 4]: Pearson of ranks.
  // mean 2.5 each; dx = [-1.5, 0, 0, 1.5], dy = [-1.5, -.5, .5, 1.5]; sxy = 4.5, sxx = 4.5, syy = 5
  // -> 4.5 / sqrt(22.5) = 0.948683.
  EXPECT_NEAR(rkv::spearman_rho({1, 2, 2, 3}, {1, 2, 3, 4}), 4.5 / std::sqrt(22.5), 1e-12);
  EXPECT_TRUE(std::isnan(rkv::spearman_rho({1, 1, 1}, {1, 2, 3})));
}

TEST(Stats, BootstrapMeanCiBracketsTheMeanAndIsDeterministic) {
  const std::vector<double> x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const rkv::Interval a = rkv::bootstrap_mean_ci(x, 42), b = rkv::bootstrap_mean_ci(x, 42);
  EXPECT_EQ(a.low, b.low);
  EXPECT_EQ(a.high, b.high);
  EXPECT_LT(a.low, 5.5);
  EXPECT_GT(a.high, 5.5);
  // The standard error of the mean is 2.87/sqrt(10) = 0.91: the 95% interval is about +-1.8 wide.
  EXPECT_NEAR(a.high - a.low, 2 * 1.96 * 0.9083, 0.6);
  const rkv::Interval c = rkv::bootstrap_mean_ci({3, 3, 3}, 1);
  EXPECT_EQ(c.low, 3);
  EXPECT_EQ(c.high, 3);
}

TEST(Stats, PairedBootstrap) {
  // a is b + 1 on every example, with noise in b: mean difference exactly 1, p-value tiny, CI around 1.
  const std::vector<double> b = {0.3, 1.2, -0.5, 2.0, 0.9, 1.1, -0.2, 0.4, 0.8, 1.5};
  std::vector<double> a;
  const double jitter[] = {0.1, -0.1, 0.05, -0.05, 0.0, 0.1, -0.1, 0.05, -0.05, 0.0};
  for (size_t i = 0; i < b.size(); ++i) a.push_back(b[i] + 1.0 + jitter[i]);
  const rkv::PairedComparison p = rkv::paired_bootstrap(a, b, 7);
  EXPECT_NEAR(p.mean_difference, 1.0, 1e-12);
  EXPECT_LT(p.p_value, 0.01);
  EXPECT_LT(p.ci.low, 1.0);
  EXPECT_GT(p.ci.high, 1.0);
  EXPECT_GT(p.effect_size, 5.0);
  // Identical inputs: no difference, p = 1.
  EXPECT_EQ(rkv::paired_bootstrap(b, b, 7).p_value, 1.0);
}

TEST(Stats, SplitHalf) {
  // Both halves order the three layers the same way -> 1.
  EXPECT_DOUBLE_EQ(rkv::split_half_spearman({{1, 2, 3}, {1, 3, 5}, {2, 4, 9}, {0, 1, 2}}), 1.0);
  // Reversed order between halves -> -1.
  EXPECT_DOUBLE_EQ(rkv::split_half_spearman({{1, 2, 3}, {3, 2, 1}}), -1.0);
  EXPECT_TRUE(std::isnan(rkv::split_half_spearman({{1, 2, 3}})));
}

}  // namespace
