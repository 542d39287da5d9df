// Statistics: values worked out by hand (ranks, Spearman, sign-flip p, Holm, MDD) and properties of the bootstrap.
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
  // n = 10, all differences positive: the exact sign-flip p is 2 / 2^10.
  EXPECT_DOUBLE_EQ(p.p_value, 2.0 / 1024.0);
  EXPECT_NEAR(p.mdd, 2.801585 * p.sd / std::sqrt(10.0), 1e-6);
  // Identical inputs: no difference, p = 1.
  EXPECT_EQ(rkv::paired_bootstrap(b, b, 7).p_value, 1.0);
}

TEST(Stats, SignFlipPermutationPValueByHand) {
  // d = [1, 2, 3]: the 8 sign vectors give sums +-6, +-4, +-2, 0, 0; |sum| >= 6 for two of them -> 2/8.
  EXPECT_DOUBLE_EQ(rkv::sign_flip_p_value({1, 2, 3}, 0), 0.25);
  // d = [0.5, -0.2, 0.9, 0.4, 0.1], sum 1.7: flipping a subset S gives 1.7 - 2 sum(S), extreme iff sum(S) <= 0 or
  // sum(S) >= 1.7: {}, {-0.2}, {-0.2, 0.1}, all five, all but -0.2, all but {-0.2, 0.1} -> 6/32.
  EXPECT_DOUBLE_EQ(rkv::sign_flip_p_value({0.5, -0.2, 0.9, 0.4, 0.1}, 0), 6.0 / 32.0);
  // One example can never be significant: p = 2/2 = 1 (the bootstrap-under-the-null p gave 0.0099 here).
  EXPECT_DOUBLE_EQ(rkv::sign_flip_p_value({0.7}, 0), 1.0);
  EXPECT_DOUBLE_EQ(rkv::sign_flip_p_value({0, 0, 0}, 0), 1.0);
  // n = 10, every difference positive: only the all-plus and all-minus vectors are as extreme -> 2/1024.
  EXPECT_DOUBLE_EQ(rkv::sign_flip_p_value({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0), 2.0 / 1024.0);
  // n = 40 (Monte Carlo), all positive: no random vector but the all-plus one (probability 2^-39) is as extreme, so
  // p = 1 / (2000 + 1); deterministic for a seed.
  const std::vector<double> forty(40, 0.5);
  EXPECT_DOUBLE_EQ(rkv::sign_flip_p_value(forty, 3), 1.0 / 2001.0);
}

TEST(Stats, HolmAdjustmentByHand) {
  // p = [0.01, 0.04, 0.03], m = 3: sorted 0.01 * 3 = 0.03, 0.03 * 2 = 0.06, 0.04 * 1 = 0.04 -> running max 0.06.
  const std::vector<double> adj = rkv::holm_adjust({0.01, 0.04, 0.03});
  ASSERT_EQ(adj.size(), 3u);
  EXPECT_NEAR(adj[0], 0.03, 1e-15);
  EXPECT_NEAR(adj[1], 0.06, 1e-15);
  EXPECT_NEAR(adj[2], 0.06, 1e-15);
  // NaN entries are skipped (m = 2) and capped at 1.
  const std::vector<double> b = rkv::holm_adjust({0.6, NAN, 0.2});
  EXPECT_NEAR(b[2], 0.4, 1e-15);
  EXPECT_NEAR(b[0], 0.6, 1e-15);
  EXPECT_TRUE(std::isnan(b[1]));
  EXPECT_DOUBLE_EQ(rkv::holm_adjust({0.7, 0.9})[0], 1.0);
}

TEST(Stats, MinimumDetectableDifferenceAndSmallNComparisons) {
  // (1.959964 + 0.841621) * sd / sqrt(n): sd = 1, n = 16 -> 2.801585 / 4 = 0.700396.
  EXPECT_NEAR(rkv::minimum_detectable_difference(1.0, 16), 0.7003962, 1e-6);
  EXPECT_NEAR(rkv::minimum_detectable_difference(0.5, 4), 0.7003962, 1e-6);
  EXPECT_TRUE(std::isnan(rkv::minimum_detectable_difference(1.0, 0)));
  // A comparison of 3 examples is left out of the Holm family (NaN: its p is not printed); the two of 12 are adjusted
  // with m = 2.
  rkv::PairedComparison small, big1, big2;
  small.n = 3, small.p_value = 0.25;
  big1.n = 12, big1.p_value = 0.01;
  big2.n = 12, big2.p_value = 0.04;
  const std::vector<double> adj = rkv::holm_adjust_reportable({&small, &big1, &big2});
  EXPECT_TRUE(std::isnan(adj[0]));
  EXPECT_NEAR(adj[1], 0.02, 1e-15);
  EXPECT_NEAR(adj[2], 0.04, 1e-15);
}

TEST(Stats, SplitHalf) {
  // Both halves order the three layers the same way -> 1.
  EXPECT_DOUBLE_EQ(rkv::split_half_spearman({{1, 2, 3}, {1, 3, 5}, {2, 4, 9}, {0, 1, 2}}), 1.0);
  // Reversed order between halves -> -1.
  EXPECT_DOUBLE_EQ(rkv::split_half_spearman({{1, 2, 3}, {3, 2, 1}}), -1.0);
  EXPECT_TRUE(std::isnan(rkv::split_half_spearman({{1, 2, 3}})));
}

TEST(Stats, UnpairedBootstrapOfTwoIndependentMeans) {
  // Constant samples: every resample has the same means, so the CI is the difference itself.
  rkv::Interval c = rkv::unpaired_bootstrap_ci({1, 1, 1}, {3, 3, 3}, 7, 500);
  EXPECT_DOUBLE_EQ(c.low, -2.0);
  EXPECT_DOUBLE_EQ(c.high, -2.0);
  // a = {0, 1}: a resample's mean is 0, 0.5 or 1 with probabilities 1/4, 1/2, 1/4; b = {5} always 5. The 2.5th and
  // 97.5th percentiles of mean(a*) - 5 fall inside the outer atoms: exactly -5 and -4.
  c = rkv::unpaired_bootstrap_ci({0, 1}, {5}, 11, 2000);
  EXPECT_DOUBLE_EQ(c.low, -5.0);
  EXPECT_DOUBLE_EQ(c.high, -4.0);
  // Larger samples: the percentile CI is close to the normal one, mean difference -/+ 1.96 sqrt(var_a/n_a +
  // var_b/n_b) with population variances: a = 0..49 (var 208.25), b = 0, 2, .., 198 (var 3333): -74.5 -/+ 12.00.
  std::vector<double> a, b;
  for (int i = 0; i < 50; ++i) a.push_back(i);
  for (int i = 0; i < 100; ++i) b.push_back(2.0 * i);
  c = rkv::unpaired_bootstrap_ci(a, b, 3, 4000);
  EXPECT_NEAR(c.low, -74.5 - 12.0, 1.5);
  EXPECT_NEAR(c.high, -74.5 + 12.0, 1.5);
  // Empty on either side: no interval.
  EXPECT_TRUE(std::isnan(rkv::unpaired_bootstrap_ci({}, {1.0}, 1).low));
}

}  // namespace
