// The route part of `ripplekv analyze --scorers ...`: from the measured damage D_l(f) of several scorers, the
// profile-guided route per budget fraction, its rank among random placements with the same scorer counts, and the
// route as TOML to paste (runner/analyze/route_builder.hpp has the math; runner/analyze/analyze.cpp measures D).
//
// Thread rules: pure functions.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "plugin/params.hpp"

namespace rkv {

/// One scorer's measured damage: D[f][l] over the analysis' fractions and the model's layers.
struct ScorerDamage {
  std::string id;                                          ///< full plugin id
  std::vector<std::pair<std::string, ParamValue>> params;  ///< every param, in the plugin's order
  std::vector<std::vector<double>> D;                      ///< [fractions][layers]
  /// The same mean over the even-indexed (fit) and the odd-indexed (test) evaluation examples; empty with fewer than
  /// two examples. On D itself the guided route always ranks first among routes of its counts (it minimises that
  /// total), so the informative rank is the held-out one: the route built on D_fit, ranked on D_test.
  std::vector<std::vector<double>> D_fit, D_test;
};

struct RouteBuildOptions {
  std::vector<int64_t> counts;    ///< layers per scorer (same order as the scorers, summing to L); empty: free choice
  int64_t random_routes = 100;    ///< random placements with the guided route's counts
  uint64_t seed = 0;              ///< their seed
  size_t toml_fraction = 0;       ///< index of the fraction whose route is written as route.toml
};

struct RouteReport {
  nlohmann::json json;    ///< analysis.json "routes": one entry per fraction
  std::string markdown;   ///< the analysis.md section
  std::string toml;       ///< route.toml: [[scorer.route]] tables for every layer
  std::string random_toml;  ///< route-random.toml: the first random placement at the same fraction (same counts)
};

/// Builds the guided route at every fraction (least damage per layer, or with options.counts exactly those counts),
/// ranks it among options.random_routes random placements of the same counts by total damage sum_l D_l, and lists
/// each scorer's homogeneous total for comparison; with D_fit and D_test, also the held-out rank (built on D_fit,
/// ranked against random placements of its counts on D_test). Requires at least two scorers with tables of equal shape; throws
/// rkv::InputError otherwise, or for counts that do not fit (route_builder.hpp).
RouteReport build_route_report(const std::vector<ScorerDamage>& scorers, const std::vector<double>& fractions,
                               const RouteBuildOptions& options);

}  // namespace rkv
