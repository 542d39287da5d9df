#include "cache/budget.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/errors.hpp"
#include "core/format.hpp"

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
  if (!(f > 0.0 && f <= 1.0)) throw InputError("budget fraction " + fmt(f, 6) + " is outside (0, 1]");
  check_prefix_and_layers(T, n_layers);
  return static_cast<int64_t>(std::floor(f * static_cast<double>(T) * static_cast<double>(n_layers) + 0.5));
}

int64_t budget_total_from_tokens(int64_t tokens, int64_t T, int64_t n_layers) {
  if (tokens < 1) throw InputError("budget tokens must be >= 1 (got " + std::to_string(tokens) + ")");
  check_prefix_and_layers(T, n_layers);
  return std::min(tokens, T) * n_layers;
}

namespace {

/// sum spans, after checking there is at least one and each is >= 1 (and the sum stays exact in a double).
int64_t checked_span_sum(const std::vector<int64_t>& spans) {
  if (spans.empty()) throw InputError("budget needs at least one compressible layer (|A| >= 1)");
  int64_t sum = 0;
  for (size_t l = 0; l < spans.size(); ++l) {
    if (spans[l] < 1) throw InputError("budget: span of compressible layer " + std::to_string(l) + " is " +
                                       std::to_string(spans[l]) + "; spans must be >= 1");
    check_prefix_and_layers(spans[l], static_cast<int64_t>(spans.size()));
    sum += spans[l];
  }
  return sum;
}

}  // namespace

int64_t budget_total_from_fraction(double f, const std::vector<int64_t>& spans) {
  if (!(f > 0.0 && f <= 1.0)) throw InputError("budget fraction " + fmt(f, 6) + " is outside (0, 1]");
  return static_cast<int64_t>(std::floor(f * static_cast<double>(checked_span_sum(spans)) + 0.5));
}

int64_t budget_total_from_tokens(int64_t tokens, const std::vector<int64_t>& spans) {
  if (tokens < 1) throw InputError("budget tokens must be >= 1 (got " + std::to_string(tokens) + ")");
  checked_span_sum(spans);
  int64_t B = 0;
  for (int64_t s : spans) B += std::min(tokens, s);
  return B;
}

namespace {

double clamped_sum(const std::vector<double>& x, double lambda, double lo, const std::vector<double>& caps) {
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += std::clamp(lambda * x[i], lo, caps[i]);
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
  if (x.empty()) throw InputError("integerize: nothing to allocate");
  return integerize_capped(x, B, lo, std::vector<int64_t>(x.size(), T));
}

std::vector<int64_t> integerize_budgets(const std::vector<double>& x, int64_t B, const std::vector<int64_t>& spans) {
  const int64_t n = static_cast<int64_t>(x.size());
  if (n < 1) throw InputError("no compressible layers to allocate");
  const int64_t room = checked_span_sum(spans);
  if (B < n)
    throw InputError("global budget B = " + std::to_string(B) + " is below the number of compressible layers |A| = " +
                     std::to_string(n) + ": every layer keeps at least one position; raise the budget");
  if (B > room)
    throw InputError("global budget B = " + std::to_string(B) + " exceeds the sum of the layers' spans, " +
                     std::to_string(room));
  return integerize_capped(x, B, 1, spans);
}

namespace {

/// Step 1, water-filling: reals y [n] with lo <= y_i <= caps[i] and sum B. sum_i clamp(lambda x_i, lo, cap_i) is
/// continuous and non-decreasing in lambda; bisection on lambda to double precision.
std::vector<double> water_fill(const std::vector<double>& x, double B, double lo, const std::vector<double>& caps) {
  const size_t n = x.size();
  std::vector<double> y(n);
  const double cap_sum = std::accumulate(caps.begin(), caps.end(), 0.0), floor_sum = lo * static_cast<double>(n);
  const double xmax = *std::max_element(x.begin(), x.end());
  if (B >= cap_sum) return caps;
  if (B <= floor_sum) return std::vector<double>(n, lo);
  if (xmax <= 0.0) {  // no preference at all: the same level everywhere, capped
    std::vector<double> ones(n, 1.0);
    return water_fill(ones, B, lo, caps);
  }
  // With lambda -> infinity every x_i > 0 reaches its cap and every x_i = 0 stays at lo. When even that is short of
  // B, the rest goes to the zero parts at one common level (the limit of giving each an infinitesimal share).
  double reachable = 0.0;
  for (size_t i = 0; i < n; ++i) reachable += x[i] > 0.0 ? caps[i] : lo;
  if (reachable < B) {
    std::vector<double> rest_x, rest_caps;
    double given = 0.0;
    for (size_t i = 0; i < n; ++i)
      if (x[i] > 0.0) given += caps[i];
      else rest_x.push_back(1.0), rest_caps.push_back(caps[i]);
    const std::vector<double> rest = water_fill(rest_x, B - given, lo, rest_caps);
    for (size_t i = 0, k = 0; i < n; ++i) y[i] = x[i] > 0.0 ? caps[i] : rest[k++];
    return y;
  }
  double a = 0.0, hi = 1.0;
  while (clamped_sum(x, hi, lo, caps) < B) hi *= 2.0;
  for (int it = 0; it < 200; ++it) {
    const double mid = 0.5 * (a + hi);
    if (mid <= a || mid >= hi) break;
    (clamped_sum(x, mid, lo, caps) < B ? a : hi) = mid;
  }
  for (size_t i = 0; i < n; ++i) y[i] = std::clamp(hi * x[i], lo, caps[i]);
  return y;
}

}  // namespace

std::vector<int64_t> integerize_capped(const std::vector<double>& x, int64_t B, int64_t lo,
                                       const std::vector<int64_t>& caps) {
  const int64_t n = static_cast<int64_t>(x.size());
  if (n < 1) throw InputError("integerize: nothing to allocate");
  if (caps.size() != x.size())
    throw InputError("integerize: " + std::to_string(caps.size()) + " caps for " + std::to_string(n) + " parts");
  int64_t cap_sum = 0;
  for (int64_t c : caps) {
    if (lo < 1 || c < lo)
      throw InputError("integerize: a part capped at " + std::to_string(c) + " cannot hold at least " +
                       std::to_string(lo));
    cap_sum += c;
  }
  if (B < n * lo || B > cap_sum)
    throw InputError("integerize: a total of " + std::to_string(B) + " over " + std::to_string(n) +
                     " parts cannot give each between " + std::to_string(lo) + " and its cap (caps sum to " +
                     std::to_string(cap_sum) + ")");
  for (double v : x)
    if (!std::isfinite(v) || v < 0) throw InputError("budgets must be finite and non-negative");

  std::vector<double> capd(caps.begin(), caps.end());
  const std::vector<double> y = water_fill(x, static_cast<double>(B), static_cast<double>(lo), capd);

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
      if (b[order[k]] < caps[order[k]]) ++b[order[k]], --remaining, gave = true;
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
