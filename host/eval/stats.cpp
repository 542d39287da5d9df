#include "eval/stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

namespace rkv {

namespace {
const double kNaN = std::numeric_limits<double>::quiet_NaN();

double percentile_sorted(const std::vector<double>& s, double q) {
  if (s.empty()) return kNaN;
  const double pos = q * static_cast<double>(s.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, s.size() - 1);
  return s[lo] + (pos - static_cast<double>(lo)) * (s[hi] - s[lo]);
}
}  // namespace

double mean_of(const std::vector<double>& x) {
  if (x.empty()) return kNaN;
  return std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size());
}

std::vector<double> average_ranks(const std::vector<double>& x) {
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> ranks(x.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    const double avg = 0.5 * static_cast<double>(i + j) + 1.0;  // ranks i+1 .. j+1
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = avg;
    i = j + 1;
  }
  return ranks;
}

double spearman_rho(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size() || x.size() < 2) return kNaN;
  const std::vector<double> rx = average_ranks(x), ry = average_ranks(y);
  const double mx = mean_of(rx), my = mean_of(ry);
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < rx.size(); ++i) {
    sxy += (rx[i] - mx) * (ry[i] - my);
    sxx += (rx[i] - mx) * (rx[i] - mx);
    syy += (ry[i] - my) * (ry[i] - my);
  }
  if (sxx == 0 || syy == 0) return kNaN;
  return sxy / std::sqrt(sxx * syy);
}

Interval bootstrap_interval(size_t n, const std::function<double(const std::vector<size_t>&)>& statistic,
                            uint64_t seed, int n_resamples, double level) {
  if (n == 0) return {kNaN, kNaN};
  std::mt19937_64 rng(seed);
  std::vector<double> stats;
  stats.reserve(static_cast<size_t>(n_resamples));
  std::vector<size_t> idx(n);
  for (int r = 0; r < n_resamples; ++r) {
    for (auto& i : idx) i = static_cast<size_t>(rng() % n);
    const double s = statistic(idx);
    if (!std::isnan(s)) stats.push_back(s);
  }
  std::sort(stats.begin(), stats.end());
  const double tail = 0.5 * (1.0 - level);
  return {percentile_sorted(stats, tail), percentile_sorted(stats, 1.0 - tail)};
}

Interval bootstrap_mean_ci(const std::vector<double>& x, uint64_t seed, int n_resamples, double level) {
  return bootstrap_interval(
      x.size(),
      [&](const std::vector<size_t>& idx) {
        double s = 0;
        for (size_t i : idx) s += x[i];
        return s / static_cast<double>(idx.size());
      },
      seed, n_resamples, level);
}

Interval unpaired_bootstrap_ci(const std::vector<double>& a, const std::vector<double>& b, uint64_t seed,
                               int n_resamples, double level) {
  if (a.empty() || b.empty()) return {kNaN, kNaN};
  std::mt19937_64 rng(seed);
  auto resampled_mean = [&](const std::vector<double>& x) {
    double s = 0;
    for (size_t i = 0; i < x.size(); ++i) s += x[static_cast<size_t>(rng() % x.size())];
    return s / static_cast<double>(x.size());
  };
  std::vector<double> stats;
  stats.reserve(static_cast<size_t>(n_resamples));
  for (int r = 0; r < n_resamples; ++r) {
    const double ma = resampled_mean(a);  // a first, then b: the order of the draws is part of the contract
    stats.push_back(ma - resampled_mean(b));
  }
  std::sort(stats.begin(), stats.end());
  const double tail = 0.5 * (1.0 - level);
  return {percentile_sorted(stats, tail), percentile_sorted(stats, 1.0 - tail)};
}

PairedComparison paired_bootstrap(const std::vector<double>& a, const std::vector<double>& b, uint64_t seed,
                                  int n_resamples) {
  PairedComparison out;
  const size_t n = std::min(a.size(), b.size());
  out.n = n;
  if (n == 0) return out;
  std::vector<double> d(n);
  for (size_t i = 0; i < n; ++i) d[i] = a[i] - b[i];
  const double m = mean_of(d);
  out.mean_difference = m;
  out.ci = bootstrap_mean_ci(d, seed, n_resamples);
  double ss = 0;
  for (double v : d) ss += (v - m) * (v - m);
  out.sd = n > 1 ? std::sqrt(ss / static_cast<double>(n - 1)) : 0.0;
  out.effect_size = out.sd > 0 ? m / out.sd : 0.0;
  out.mdd = minimum_detectable_difference(out.sd, n);
  out.p_value = sign_flip_p_value(d, seed, n_resamples);
  return out;
}

double sign_flip_p_value(const std::vector<double>& d, uint64_t seed, int n_resamples) {
  const size_t n = d.size();
  double observed = 0, scale = 0;
  for (double v : d) observed += v, scale += std::fabs(v);
  observed = std::fabs(observed);
  if (n == 0 || scale == 0) return 1.0;
  const double tolerance = 1e-12 * scale;  // sums that equal the observed one up to rounding count as extreme
  auto signed_sum = [&](auto&& negative) {
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += negative(i) ? -d[i] : d[i];
    return std::fabs(s);
  };
  if (n <= 16) {  // exact: all 2^n sign vectors
    const uint32_t count = 1u << n;
    uint32_t extreme = 0;
    for (uint32_t mask = 0; mask < count; ++mask)
      if (signed_sum([&](size_t i) { return (mask >> i) & 1u; }) >= observed - tolerance) ++extreme;
    return static_cast<double>(extreme) / static_cast<double>(count);
  }
  std::mt19937_64 rng(seed ^ 0x9E3779B97F4A7C15ull);
  std::vector<bool> negative(n);
  int extreme = 0;
  for (int r = 0; r < n_resamples; ++r) {
    for (size_t i = 0; i < n; ++i) negative[i] = (rng() & 1u) != 0;
    if (signed_sum([&](size_t i) { return negative[i]; }) >= observed - tolerance) ++extreme;
  }
  return (static_cast<double>(extreme) + 1.0) / (static_cast<double>(n_resamples) + 1.0);
}

std::vector<double> holm_adjust(const std::vector<double>& p) {
  std::vector<size_t> order;
  for (size_t i = 0; i < p.size(); ++i)
    if (!std::isnan(p[i])) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return p[x] < p[y]; });
  std::vector<double> adjusted(p.size(), kNaN);
  const double m = static_cast<double>(order.size());
  double running = 0;
  for (size_t j = 0; j < order.size(); ++j) {
    running = std::max(running, std::min(1.0, (m - static_cast<double>(j)) * p[order[j]]));
    adjusted[order[j]] = running;
  }
  return adjusted;
}

double minimum_detectable_difference(double sd, size_t n) {
  if (n == 0) return kNaN;
  const double z_alpha = 1.959963984540054, z_power = 0.8416212335729143;  // Phi^-1(0.975), Phi^-1(0.8)
  return (z_alpha + z_power) * sd / std::sqrt(static_cast<double>(n));
}

std::vector<double> holm_adjust_reportable(const std::vector<const PairedComparison*>& comparisons) {
  std::vector<double> p;
  for (const PairedComparison* c : comparisons) p.push_back(c->n >= kMinExamplesForPValue ? c->p_value : kNaN);
  return holm_adjust(p);
}

double split_half_spearman(const std::vector<std::vector<double>>& per_example) {
  const size_t n = per_example.size();
  if (n < 2) return kNaN;
  const size_t L = per_example[0].size(), half = n / 2;
  std::vector<double> first(L, 0.0), second(L, 0.0);
  for (size_t i = 0; i < n; ++i)
    for (size_t l = 0; l < L; ++l) (i < half ? first : second)[l] += per_example[i][l];
  return spearman_rho(first, second);
}

}  // namespace rkv
