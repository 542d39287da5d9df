#include "cache/budget.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/errors.hpp"

namespace rkv {

namespace {

/// T >= 1, |A| >= 1, and T |A| (the most positions a budget can name) well inside int64 (at most 2^53, so that
/// f T |A| is exact in a double too).
void check_prefix_and_layers(int64_t T, int64_t n_layers) {
  if (T < 1 || n_layers < 1)
    throw InputError("budget needs T >= 1 and |A| >= 1 (got T = " + std::to_string(T) +
                     ", |A| = " + std::to_string(n_layers) + ")");
  constexpr int64_t kMaxPositions = int64_t{1} << 53;
  if (T > kMaxPositions / n_layers)
    throw InputError("budget: T |A| = " + std::to_string(T) + " x " + std::to_string(n_layers) +
                     " positions is beyond 2^53; T and |A| must be a real prefix length and layer count");
}

}  // namespace

int64_t budget_total_from_fraction(double f, int64_t T, int64_t n_layers) {
  if (!(f > 0.0 && f <= 1.0)) throw InputError("budget fraction " + std::to_string(f) + " is outside (0, 1]");
  check_prefix_and_layers(T, n_layers);
  return static_cast<int64_t>(std::floor(f * static_cast<double>(T) * static_cast<double>(n_layers) + 0.5));
}

int64_t budget_total_from_tokens(int64_t tokens, int64_t T, int64_t n_layers) {
  if (tokens < 1) throw InputError("budget tokens must be >= 1 (got " + std::to_string(tokens) + ")");
  check_prefix_and_layers(T, n_layers);
  return std::min(tokens, T) * n_layers;
}

namespace {

double clamped_sum(const std::vector<double>& x, double lambda, double lo, double T) {
  double s = 0;
  for (double v : x) s += std::clamp(lambda * v, lo, T);
  return s;
}

}  // namespace

std::vector<int64_t> integerize_budgets(const std::vector<double>& x, int64_t B, int64_t T) {
  const int64_t n = static_cast<int64_t>(x.size());
  if (n < 1) throw InputError("no compressible layers to allocate");
  if (B < n)
    throw InputError("global budget B = " + std::to_string(B) + " is below the number of compressible layers |A| = " +
                     std::to_string(n) + ": every layer keeps at least one position; raise the budget");
  if (B > n * T)
    throw InputError("global budget B = " + std::to_string(B) + " exceeds |A| * T = " + std::to_string(n * T));
  return integerize_between(x, B, 1, T);
}

std::vector<int64_t> integerize_between(const std::vector<double>& x, int64_t B, int64_t lo, int64_t T) {
  const int64_t n = static_cast<int64_t>(x.size());
  if (n < 1) throw InputError("integerize: nothing to allocate");
  if (lo < 1 || lo > T || B < n * lo || B > n * T)
    throw InputError("integerize: a total of " + std::to_string(B) + " over " + std::to_string(n) +
                     " parts cannot give each between " + std::to_string(lo) + " and " + std::to_string(T));
  for (double v : x)
    if (!std::isfinite(v) || v < 0) throw InputError("budgets must be finite and non-negative");

  // 1. Water-filling: sum_l clamp(lambda * x_l, lo, T) is continuous and non-decreasing in lambda.
  const double Td = static_cast<double>(T), Bd = static_cast<double>(B), lod = static_cast<double>(lo);
  std::vector<double> y(x.size());
  const double xmax = *std::max_element(x.begin(), x.end());
  if (xmax <= 0.0 || B == n * T || B == n * lo) {
    std::fill(y.begin(), y.end(), B == n * T ? Td : (B == n * lo ? lod : Bd / static_cast<double>(n)));
  } else {
    // With lambda -> infinity every x_l > 0 reaches T and every x_l = 0 stays at lo. When even that is short of B,
    // the remainder goes evenly to the zero parts (the limit of giving every part an infinitesimal share).
    const int64_t n_zero = std::count(x.begin(), x.end(), 0.0);
    const double reachable = static_cast<double>(n - n_zero) * Td + static_cast<double>(n_zero) * lod;
    if (reachable < Bd) {
      const double rest = (Bd - static_cast<double>(n - n_zero) * Td) / static_cast<double>(n_zero);
      for (size_t l = 0; l < x.size(); ++l) y[l] = x[l] > 0.0 ? Td : std::clamp(rest, lod, Td);
    } else {
      double a = 0.0, hi = 1.0;
      while (clamped_sum(x, hi, lod, Td) < Bd) hi *= 2.0;
      for (int it = 0; it < 200; ++it) {
        const double mid = 0.5 * (a + hi);
        if (mid <= a || mid >= hi) break;
        (clamped_sum(x, mid, lod, Td) < Bd ? a : hi) = mid;
      }
      for (size_t l = 0; l < x.size(); ++l) y[l] = std::clamp(hi * x[l], lod, Td);
    }
  }

  // 2. Largest remainder: floors, then +1 to the largest fractional parts (ties: lower index).
  std::vector<int64_t> b(x.size());
  for (size_t l = 0; l < y.size(); ++l) b[l] = static_cast<int64_t>(std::floor(y[l]));
  int64_t remaining = B - std::accumulate(b.begin(), b.end(), int64_t{0});
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t c) { return (y[a] - std::floor(y[a])) > (y[c] - std::floor(y[c])); });
  // `remaining` is tiny (at most n) up to rounding of lambda; loop until the sum is exact.
  while (remaining > 0) {
    bool gave = false;
    for (size_t k = 0; k < order.size() && remaining > 0; ++k)
      if (b[order[k]] < T) ++b[order[k]], --remaining, gave = true;
    if (!gave) break;
  }
  while (remaining < 0) {
    bool took = false;
    for (size_t k = order.size(); k-- > 0 && remaining < 0;)
      if (b[order[k]] > lo) --b[order[k]], ++remaining, took = true;
    if (!took) break;
  }
  return b;
}

}  // namespace rkv
