// Statistics for reports a reviewer can trust: means with percentile-bootstrap CIs over examples, Spearman rho with
// average ranks for ties, paired comparisons (bootstrap CI, sign-flip permutation p, Holm adjustment across a report,
// minimum detectable difference), split-half stability of a profile.
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

/// Percentile-bootstrap CI of mean(a) - mean(b) for two independent samples (different examples: nothing to pair):
/// each of `n_resamples` resamples draws |a| indices of a and then |b| indices of b with replacement from one
/// std::mt19937_64 seeded by `seed` (Efron & Tibshirani 1993, sec. 8.3, the two-sample bootstrap). NaN bounds when
/// either sample is empty.
Interval unpaired_bootstrap_ci(const std::vector<double>& a, const std::vector<double>& b, uint64_t seed,
                               int n_resamples = 2000, double level = 0.95);

/// The smallest n at which a report prints a p-value: below it the permutation distribution is too coarse (with
/// n = 5 the smallest attainable two-sided p is 2/32 = 0.0625) and a report says "n too small" instead.
inline constexpr size_t kMinExamplesForPValue = 10;

/// Paired comparison of a against b on the same examples (d_i = a_i - b_i).
struct PairedComparison {
  double mean_difference = 0;  ///< mean of d
  Interval ci;                 ///< percentile-bootstrap CI of the mean difference
  double p_value = 1;          ///< two-sided sign-flip permutation p of mean(d) (sign_flip_p_value)
  double effect_size = 0;      ///< Cohen's d_z = mean(d) / sd(d) (0 when sd is 0)
  double sd = 0;               ///< sample standard deviation of d (n - 1 in the denominator; 0 when n < 2)
  double mdd = 0;              ///< minimum detectable difference at this n (minimum_detectable_difference of sd)
  size_t n = 0;
};
/// `ci` from `n_resamples` bootstrap resamples seeded by `seed`; `p_value` from sign_flip_p_value with the same seed.
/// Sizes may differ: the first min(|a|, |b|) pairs are compared. Pure; thread-safe.
PairedComparison paired_bootstrap(const std::vector<double>& a, const std::vector<double>& b, uint64_t seed,
                                  int n_resamples = 2000);

/// Two-sided sign-flip permutation test of H0: the differences d are symmetric about 0 (Fisher 1935; Good,
/// "Permutation Tests", 2nd ed., sec. 3.1). Statistic |sum d|; the p-value is the share of the 2^n sign vectors whose
/// |sum s_i d_i| is at least the observed one (ties within 1e-12 relative count as extreme), enumerated exactly when
/// n <= 16 and otherwise estimated from `n_resamples` random sign vectors as (extreme + 1) / (n_resamples + 1)
/// (Phipson & Smyth 2010). 1 for empty d or all-zero d. Pure; thread-safe.
double sign_flip_p_value(const std::vector<double>& d, uint64_t seed, int n_resamples = 2000);

/// Holm's step-down adjustment of m p-values for the family-wise error rate (Holm 1979): with p sorted ascending,
/// adjusted p_(i) = max_{j <= i} min(1, (m - j + 1) p_(j)) (1-based i, j). Returned in the input's order; NaN entries
/// are left NaN and not counted in m. Pure.
std::vector<double> holm_adjust(const std::vector<double>& p);

/// Minimum detectable difference of a paired mean at two-sided level alpha = 0.05 and power 0.8, by the normal
/// approximation: (z_0.975 + z_0.8) * sd / sqrt(n) = (1.959964 + 0.841621) * sd / sqrt(n) (Cohen 1988, ch. 2).
/// NaN when n = 0.
double minimum_detectable_difference(double sd, size_t n);

/// Holm adjustment applied across a report: `comparisons[i]->p_value` of those with n >= kMinExamplesForPValue,
/// adjusted together; the result holds NaN for the others (whose p a report does not print).
std::vector<double> holm_adjust_reportable(const std::vector<const PairedComparison*>& comparisons);

/// Split-half stability of a profile: Spearman rho between the per-layer means of the first half and of the second
/// half of the examples (rows of per_example [N][L]; halves [0, N/2) and [N/2, N)). NaN when N < 2.
double split_half_spearman(const std::vector<std::vector<double>>& per_example);

}  // namespace rkv
