// Profile-guided routes and their random-placement baseline (`ripplekv analyze --scorers`).
//
// Input: a damage table D[s][l] >= 0 (or any finite reals), the measured damage of compressing only layer l with
// scorer s (docs/ARCHITECTURE.md "Compression damage"), for S scorers and L layers. A route r assigns one scorer to every
// layer; its total damage is sum_l D[r_l][l] (single-layer damages added: a proxy that ignores interactions between
// layers, as the profile-guided placement of "Should eviction methods themselves vary across layers?" does).
//
//   least damage:        r_l = argmin_s D[s][l]                      (ties: the lower scorer index)
//   counts held fixed:   min sum_l D[r_l][l] subject to |{l : r_l = s}| = c_s   (sum_s c_s = L)
//                        solved exactly as an assignment problem: scorer s is copied c_s times into L "slots" and
//                        the Hungarian algorithm (Kuhn-Munkres with potentials, O(L^3)) matches layers to slots.
//   random placement:    N routes, each a uniformly random arrangement of the same multiset of scorers (counts c_s),
//                        drawn by Fisher-Yates from std::mt19937_64(seed) with rejection-sampled bounded draws, so a
//                        seed gives the same routes on every platform.
//
// Thread rules: pure functions.
#pragma once
#include <cstdint>
#include <vector>

namespace rkv {

/// A route over L layers: route[l] is the index of layer l's scorer.
using RouteChoice = std::vector<int>;

/// Per layer the scorer of least damage. D is [S][L], S >= 1, every row of length L. rkv::InputError for a ragged or
/// empty table or a non-finite entry.
RouteChoice least_damage_route(const std::vector<std::vector<double>>& D);

/// The route of least total damage with exactly counts[s] layers on scorer s (counts.size() = S, each >= 0, summing
/// to L). Exact (Hungarian). rkv::InputError for counts of another length, negative, or not summing to L.
RouteChoice count_constrained_route(const std::vector<std::vector<double>>& D, const std::vector<int64_t>& counts);

/// sum_l D[route[l]][l].
double route_damage(const std::vector<std::vector<double>>& D, const RouteChoice& route);

/// How many layers each of `n_scorers` scorers takes in `route`.
std::vector<int64_t> route_counts(const RouteChoice& route, int n_scorers);

/// `n` random routes with the given counts (see the file comment), reproducible from `seed`.
std::vector<RouteChoice> random_routes(const std::vector<int64_t>& counts, int64_t n, uint64_t seed);

/// Where a route's total damage falls among random routes': rank = 1 + the number of random routes of strictly
/// less damage (1 = no random route beats it), `ties` = random routes of equal damage (within 1e-12 relative).
struct RouteRank {
  int64_t rank = 1;
  int64_t ties = 0;
  int64_t n = 0;            ///< random routes compared
  double damage = 0;        ///< the route's total damage
  double best = 0, median = 0, worst = 0;  ///< of the random routes' totals
};
RouteRank rank_among(const std::vector<std::vector<double>>& D, const RouteChoice& route,
                     const std::vector<RouteChoice>& randoms);

}  // namespace rkv
