// `ripplekv analyze`: does a sensitivity signal predict which layers are hurt by compression? (the paper's Table 1,
// plus the budget-invariance test its reviewers asked for; docs/ARCHITECTURE.md "Compression damage").
//
// On the evaluation set (never the calibration set), for each budget fraction f and layer l: compress ONLY layer l
// with the configured scorer keeping floor(f * T + 0.5) positions, all other layers intact, and measure
//   D_l(f) = mean_i mean_t KL(P_{i,t} || P^comp_{i,l,t})
// over the teacher-forced continuation tokens t of example i (the lm_fidelity set-up). Then, for every configured
// signal with profile s, Spearman rho(s, D(f)) (average ranks for ties; signed: a signal that ranks the damaged layers
// lowest has rho < 0) at each f, with a 95% bootstrap CI that resamples evaluation examples (the profile held fixed).
// Last comes the oracle row: the builtin damage signal (runner/profile/damage_signal.hpp), i.e. D_l(f) measured the same way on
// the calibration split (runner/profile/compression_damage.hpp, the same loop), against the evaluation D(f) at each f.
//
// Outputs in the folder: analysis.json (per signal "rho", its "ci_low"/"ci_high", and "abs_rho" = |rho|;
// "oracle" the same for the damage row, with "s" one profile per fraction),
// analysis.md, plots/analysis_damage.png (D_l per f), analysis_profiles.png (each signal's profile overlaid on D_l,
// min-max normalised), analysis_scatter.png (per f, rank of s_l vs rank of D_l with signed rho), and their SVGs.
// With --scorers (AnalyzeOptions::scorers) D_l(f) is measured for each scorer too ("scorers"), and the profile-guided
// route, its rank among random placements of the same scorer counts ("routes"; runner/analyze/routes.hpp), route.toml
// and route-random.toml are written. With --sharing (AnalyzeOptions::sharing) the per-layer sharing damage and each
// signal's rho against it are added ("sharing"; runner/analyze/sharing.hpp).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runner/plan/config.hpp"

namespace rkv {

struct AnalyzeOptions {
  std::string out_dir;             ///< required
  std::vector<double> fractions;   ///< empty: the config's swept budget.fraction values, else its budget.fraction
  int64_t threads = 0;             ///< > 0 overrides model.threads
  bool quiet = false;
  bool force = false;               ///< --force: write into a non-empty folder that holds no ripplekv record
  /// --scorers: more scorers (ids or short ids) whose D_l(f) is measured beside the config's [scorer]; with two or
  /// more in all, the profile-guided route (runner/analyze/routes.hpp) is built and written to route.toml.
  std::vector<std::string> scorers;
  /// --route-counts: layers per scorer (short or full id -> count, summing to the layer count) held fixed by the route
  /// builder; empty: each layer takes its least-damage scorer.
  std::vector<std::pair<std::string, int64_t>> route_counts;
  int64_t random_routes = 100;          ///< --random-routes: random placements ranked against the guided route
  uint64_t route_seed = 0;              ///< --route-seed: their seed
  std::optional<double> route_fraction; ///< --route-fraction: the fraction whose route is route.toml (default: smallest)
  /// --sharing: also measure the sharing damage D^share_l (only layer l reads layer l - 1's cache) on the evaluation
  /// split and rank the signals against it (runner/analyze/sharing.hpp; analysis.json "sharing").
  bool sharing = false;
};

/// Runs the analysis of `plan`. Throws rkv::InputError for bad input (no signal configured, fractions outside
/// (0, 1], a budget of zero positions, an unknown --scorers id, route counts that name an unanalysed scorer or do
/// not sum to the layer count, a route fraction that is not analysed, route options without a second scorer).
void run_analysis(const RunPlan& plan, const AnalyzeOptions& options);

}  // namespace rkv
