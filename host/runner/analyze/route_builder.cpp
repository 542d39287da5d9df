// Profile-guided routes and the random-placement baseline (runner/analyze/route_builder.hpp).
#include "runner/analyze/route_builder.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "core/errors.hpp"

namespace rkv {

namespace {

/// Checks D is [S][L] with S >= 1, L >= 1 and finite entries; returns L.
size_t check_table(const std::vector<std::vector<double>>& D) {
  if (D.empty() || D.front().empty()) throw InputError("route builder: the damage table is empty");
  const size_t L = D.front().size();
  for (size_t s = 0; s < D.size(); ++s) {
    if (D[s].size() != L)
      throw InputError("route builder: scorer " + std::to_string(s) + " has " + std::to_string(D[s].size()) +
                       " layer damages, scorer 0 has " + std::to_string(L));
    for (double v : D[s])
      if (!std::isfinite(v)) throw InputError("route builder: scorer " + std::to_string(s) + " has a non-finite damage");
  }
  return L;
}

/// Minimum-cost perfect matching of an n x n cost matrix (rows to columns): Kuhn-Munkres with potentials, O(n^3)
/// (the shortest-augmenting-path form; e.g. Burkard, Dell'Amico, Martello, "Assignment Problems", 2009, sec. 4.4).
/// Returns the column of each row.
std::vector<size_t> hungarian(const std::vector<std::vector<double>>& cost) {
  const size_t n = cost.size();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> u(n + 1, 0.0), v(n + 1, 0.0);
  std::vector<size_t> match(n + 1, 0), way(n + 1, 0);  // match[col] = row (1-based; 0 = none)
  for (size_t row = 1; row <= n; ++row) {
    match[0] = row;
    size_t col0 = 0;
    std::vector<double> minv(n + 1, inf);
    std::vector<char> used(n + 1, 0);
    do {
      used[col0] = 1;
      const size_t r0 = match[col0];
      double delta = inf;
      size_t col1 = 0;
      for (size_t j = 1; j <= n; ++j) {
        if (used[j]) continue;
        const double cur = cost[r0 - 1][j - 1] - u[r0] - v[j];
        if (cur < minv[j]) minv[j] = cur, way[j] = col0;
        if (minv[j] < delta) delta = minv[j], col1 = j;
      }
      for (size_t j = 0; j <= n; ++j) {
        if (used[j]) u[match[j]] += delta, v[j] -= delta;
        else minv[j] -= delta;
      }
      col0 = col1;
    } while (match[col0] != 0);
    do {
      const size_t col1 = way[col0];
      match[col0] = match[col1];
      col0 = col1;
    } while (col0 != 0);
  }
  std::vector<size_t> col_of(n);
  for (size_t j = 1; j <= n; ++j) col_of[match[j] - 1] = j - 1;
  return col_of;
}

/// A uniform draw in [0, bound) from `rng` (rejection sampling: the same numbers on every platform, unlike
/// std::uniform_int_distribution).
uint64_t bounded(std::mt19937_64& rng, uint64_t bound) {
  const uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % bound;
  uint64_t x;
  do x = rng();
  while (x >= limit);
  return x % bound;
}

}  // namespace

RouteChoice least_damage_route(const std::vector<std::vector<double>>& D) {
  const size_t L = check_table(D);
  RouteChoice route(L, 0);
  for (size_t l = 0; l < L; ++l)
    for (size_t s = 1; s < D.size(); ++s)
      if (D[s][l] < D[static_cast<size_t>(route[l])][l]) route[l] = static_cast<int>(s);
  return route;
}

RouteChoice count_constrained_route(const std::vector<std::vector<double>>& D, const std::vector<int64_t>& counts) {
  const size_t L = check_table(D);
  if (counts.size() != D.size())
    throw InputError("route builder: " + std::to_string(counts.size()) + " counts for " + std::to_string(D.size()) +
                     " scorers");
  int64_t total = 0;
  for (int64_t c : counts) {
    if (c < 0) throw InputError("route builder: a scorer count is negative (" + std::to_string(c) + ")");
    total += c;
  }
  if (total != static_cast<int64_t>(L))
    throw InputError("route builder: the scorer counts sum to " + std::to_string(total) + ", not to the " +
                     std::to_string(L) + " layers");
  std::vector<int> slot_scorer;  // slot k belongs to scorer slot_scorer[k]
  for (size_t s = 0; s < counts.size(); ++s) slot_scorer.insert(slot_scorer.end(), static_cast<size_t>(counts[s]), static_cast<int>(s));
  std::vector<std::vector<double>> cost(L, std::vector<double>(L));
  for (size_t l = 0; l < L; ++l)
    for (size_t k = 0; k < L; ++k) cost[l][k] = D[static_cast<size_t>(slot_scorer[k])][l];
  const std::vector<size_t> slot_of = hungarian(cost);
  RouteChoice route(L);
  for (size_t l = 0; l < L; ++l) route[l] = slot_scorer[slot_of[l]];
  return route;
}

double route_damage(const std::vector<std::vector<double>>& D, const RouteChoice& route) {
  double sum = 0;
  for (size_t l = 0; l < route.size(); ++l) sum += D.at(static_cast<size_t>(route[l])).at(l);
  return sum;
}

std::vector<int64_t> route_counts(const RouteChoice& route, int n_scorers) {
  std::vector<int64_t> counts(static_cast<size_t>(n_scorers), 0);
  for (int s : route) ++counts.at(static_cast<size_t>(s));
  return counts;
}

std::vector<RouteChoice> random_routes(const std::vector<int64_t>& counts, int64_t n, uint64_t seed) {
  RouteChoice base;
  for (size_t s = 0; s < counts.size(); ++s) base.insert(base.end(), static_cast<size_t>(std::max<int64_t>(0, counts[s])), static_cast<int>(s));
  std::mt19937_64 rng(seed);
  std::vector<RouteChoice> out;
  for (int64_t k = 0; k < n; ++k) {
    RouteChoice r = base;  // each route a fresh Fisher-Yates shuffle of the sorted multiset
    for (size_t i = r.size(); i > 1; --i) std::swap(r[i - 1], r[bounded(rng, i)]);
    out.push_back(std::move(r));
  }
  return out;
}

RouteRank rank_among(const std::vector<std::vector<double>>& D, const RouteChoice& route,
                     const std::vector<RouteChoice>& randoms) {
  RouteRank rank;
  rank.damage = route_damage(D, route);
  rank.n = static_cast<int64_t>(randoms.size());
  std::vector<double> totals;
  for (const auto& r : randoms) totals.push_back(route_damage(D, r));
  const double tol = 1e-12 * std::max(1.0, std::fabs(rank.damage));
  for (double t : totals) {
    if (t < rank.damage - tol) ++rank.rank;
    else if (t <= rank.damage + tol) ++rank.ties;
  }
  if (!totals.empty()) {
    std::sort(totals.begin(), totals.end());
    rank.best = totals.front();
    rank.worst = totals.back();
    const size_t m = totals.size();
    rank.median = m % 2 ? totals[m / 2] : 0.5 * (totals[m / 2 - 1] + totals[m / 2]);
  }
  return rank;
}

}  // namespace rkv
