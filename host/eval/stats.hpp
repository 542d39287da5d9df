// Statistics for reports a reviewer can trust: means with percentile-bootstrap CIs over examples, Spearman rho with
// average ranks for ties, paired bootstrap comparisons, split-half stability of a profile.
//
// Resampling uses std::mt19937_64 (its output sequence is fixed by the C++ standard) and index = draw mod n, so a
// given seed gives the same intervals on every platform. All functions are pure: thread-safe.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace rkv {

struct Interval {
  double low = 0;
  double high = 0;
};

/// Arithmetic mean; NaN for an empty vector.
double mean_of(const std::vector<double>& x);

/// Ranks 1..n of `x`, ties given the average of the ranks they span (e.g. [10, 20, 20, 30] -> [1, 2.5, 2.5, 4]).
std::vector<double> average_ranks(const std::vector<double>& x);

/// Spearman's rho = Pearson correlation of the average ranks (Spearman 1904; ties as scipy.stats.spearmanr).
/// NaN when the sizes differ, n < 2, or either side is constant.
double spearman_rho(const std::vector<double>& x, const std::vector<double>& y);

/// Percentile bootstrap interval (Efron & Tibshirani 1993, ch. 13) of `statistic` over n items: `n_resamples`
/// resamples of n indices drawn with replacement; `level` e.g. 0.95 gives the 2.5th and 97.5th percentiles
/// (linear interpolation between order statistics). Resamples whose statistic is NaN are dropped.
Interval bootstrap_interval(size_t n, const std::function<double(const std::vector<size_t>&)>& statistic,
                            uint64_t seed, int n_resamples = 2000, double level = 0.95);

/// Bootstrap CI of the mean of `x`.
Interval bootstrap_mean_ci(const std::vector<double>& x, uint64_t seed, int n_resamples = 2000, double level = 0.95);

/// Paired comparison of a against b on the same examples (d_i = a_i - b_i).
struct PairedComparison {
  double mean_difference = 0;  ///< mean of d
  Interval ci;                 ///< bootstrap CI of the mean difference
  double p_value = 1;          ///< two-sided, bootstrap under the null (d recentred to mean 0): P(|mean*| >= |mean d|)
  double effect_size = 0;      ///< Cohen's d_z = mean(d) / sd(d) (0 when sd is 0)
  size_t n = 0;
};
PairedComparison paired_bootstrap(const std::vector<double>& a, const std::vector<double>& b, uint64_t seed,
                                  int n_resamples = 2000);

/// Split-half stability of a profile: Spearman rho between the per-layer means of the first half and of the second
/// half of the examples (rows of per_example [N][L]; halves [0, N/2) and [N/2, N)). NaN when N < 2.
double split_half_spearman(const std::vector<std::vector<double>>& per_example);

/// A 64-bit FNV-1a hash of a string, for seeds derived from ids (e.g. the bootstrap seed of a cell).
uint64_t fnv1a64(const std::string& text);

}  // namespace rkv
