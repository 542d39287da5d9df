// Profile-guided routes in `ripplekv analyze` (runner/analyze/routes.hpp).
#include "runner/analyze/routes.hpp"

#include <sstream>

#include "core/errors.hpp"
#include "core/format.hpp"
#include "plugin/registry.hpp"
#include "runner/analyze/route_builder.hpp"
#include "runner/plan/scorer_route.hpp"

namespace rkv {

namespace {

/// The damage table [scorer][layer] at fraction index `fi` of `which` (D, D_fit or D_test).
std::vector<std::vector<double>> table_at(const std::vector<ScorerDamage>& scorers, size_t fi,
                                          std::vector<std::vector<double>> ScorerDamage::*which = &ScorerDamage::D) {
  std::vector<std::vector<double>> D;
  for (const auto& s : scorers) D.push_back((s.*which).at(fi));
  return D;
}

/// The guided route of `D` under the options' counts (none: least damage per layer).
RouteChoice guided_route(const std::vector<std::vector<double>>& D, const RouteBuildOptions& o) {
  return o.counts.empty() ? least_damage_route(D) : count_constrained_route(D, o.counts);
}

nlohmann::json rank_json(const RouteRank& rank, uint64_t seed) {
  return {{"n", rank.n},       {"seed", seed},           {"rank", rank.rank}, {"ties", rank.ties},
          {"damage", rank.damage}, {"best", rank.best}, {"median", rank.median}, {"worst", rank.worst}};
}

std::string rank_text(const RouteRank& rank) {
  return std::to_string(rank.rank) + " of " + std::to_string(rank.n + 1) +
         (rank.ties ? " (" + std::to_string(rank.ties) + " ties)" : "");
}

/// The route's entries as TOML: one [[scorer.route]] per scorer that takes a layer, with its params.
std::string toml_of(const std::vector<ScorerDamage>& scorers, const RouteChoice& route) {
  std::vector<RouteTomlEntry> entries(scorers.size());
  for (size_t s = 0; s < scorers.size(); ++s) entries[s].plugin = short_id(scorers[s].id), entries[s].params = scorers[s].params;
  for (size_t l = 0; l < route.size(); ++l) entries[static_cast<size_t>(route[l])].layers.push_back(static_cast<int64_t>(l));
  return route_toml(entries);
}

/// One fraction's route: JSON entry and markdown rows.
nlohmann::json route_at(const std::vector<ScorerDamage>& scorers, double f, size_t fi, const RouteBuildOptions& o,
                        RouteChoice* route_out, RouteChoice* random_out, std::ostringstream& md) {
  const std::vector<std::vector<double>> D = table_at(scorers, fi);
  const RouteChoice route = guided_route(D, o);
  const std::vector<int64_t> counts = route_counts(route, static_cast<int>(scorers.size()));
  const std::vector<RouteChoice> randoms = random_routes(counts, o.random_routes, o.seed);
  const RouteRank rank = rank_among(D, route, randoms);
  nlohmann::json j;
  j["fraction"] = f;
  j["mode"] = o.counts.empty() ? "least_damage" : "counts";
  nlohmann::json per_layer = nlohmann::json::array(), count_j = nlohmann::json::object(),
                 homogeneous = nlohmann::json::object();
  for (int s : route) per_layer.push_back(short_id(scorers[static_cast<size_t>(s)].id));
  for (size_t s = 0; s < scorers.size(); ++s) {
    count_j[short_id(scorers[s].id)] = counts[s];
    homogeneous[short_id(scorers[s].id)] = route_damage(D, RouteChoice(route.size(), static_cast<int>(s)));
  }
  j["route"] = per_layer;
  j["counts"] = count_j;
  j["damage"] = rank.damage;
  j["homogeneous_damage"] = homogeneous;
  j["random"] = rank_json(rank, o.seed);
  std::string held_out = "n/a";
  if (!scorers.front().D_fit.empty()) {  // built on the even examples, ranked on the odd ones
    const auto fit = table_at(scorers, fi, &ScorerDamage::D_fit), test = table_at(scorers, fi, &ScorerDamage::D_test);
    const RouteChoice fitted = guided_route(fit, o);
    const RouteRank r = rank_among(
        test, fitted, random_routes(route_counts(fitted, static_cast<int>(scorers.size())), o.random_routes, o.seed));
    j["held_out"] = rank_json(r, o.seed);
    held_out = rank_text(r);
  }
  j["random_first"] = nlohmann::json::array();  // the first random placement (route-random.toml)
  for (int s : randoms.front()) j["random_first"].push_back(short_id(scorers[static_cast<size_t>(s)].id));
  j["random_first_damage"] = route_damage(D, randoms.front());
  md << "| " << f << " | " << fmt(rank.damage) << " |";
  for (size_t s = 0; s < scorers.size(); ++s) md << " " << fmt(homogeneous[short_id(scorers[s].id)].get<double>()) << " |";
  md << " " << rank_text(rank) << " | " << held_out << " | " << fmt(rank.best) << " / " << fmt(rank.median) << " / " << fmt(rank.worst) << " |";
  for (size_t s = 0; s < scorers.size(); ++s) md << (s ? ", " : " ") << short_id(scorers[s].id) << " " << counts[s];
  md << " |\n";
  *route_out = route;
  *random_out = randoms.front();
  return j;
}

}  // namespace

RouteReport build_route_report(const std::vector<ScorerDamage>& scorers, const std::vector<double>& fractions,
                               const RouteBuildOptions& o) {
  if (scorers.size() < 2) throw InputError("analyze: a route needs at least two scorers (--scorers a,b)");
  if (o.random_routes < 1) throw InputError("analyze: --random-routes must be >= 1");
  if (o.toml_fraction >= fractions.size()) throw InputError("analyze: the route fraction is not among the fractions");
  for (const auto& s : scorers)
    if (s.D.size() != fractions.size()) throw InputError("analyze: scorer " + s.id + " lacks a damage row per fraction");
  RouteReport r;
  r.json = nlohmann::json::array();
  std::ostringstream md, layers;
  md << "## Routes: the scorer of least damage per layer\n\n"
     << "Guided route: per layer the scorer with the least damage D_l(f)"
     << (o.counts.empty() ? "" : ", holding the scorer counts fixed (exact assignment, Hungarian)")
     << "; total damage sum_l D_l(f) (single-layer damages added). Random: " << o.random_routes
     << " placements of the same scorer counts (seed " << o.seed << "); rank 1 = no random placement has less "
     << "damage. On the examples it was built from, the guided route minimises the total for its counts, so it always "
     << "ranks 1; the held-out rank builds the route on the even-indexed examples and ranks it (against random "
     << "placements of its counts) on the odd-indexed ones.\n\n| f | guided |";
  for (const auto& s : scorers) md << " all " << short_id(s.id) << " |";
  md << " guided rank among random | held-out rank | random best / median / worst | counts |\n|---:|---:|";
  for (size_t s = 0; s < scorers.size(); ++s) md << "---:|";
  md << "---|---|---|---|\n";
  for (size_t fi = 0; fi < fractions.size(); ++fi) {
    RouteChoice route, random;
    r.json.push_back(route_at(scorers, fractions[fi], fi, o, &route, &random, md));
    layers << "- f = " << fractions[fi] << ": ";
    for (size_t l = 0; l < route.size(); ++l) layers << (l ? " " : "") << short_id(scorers[static_cast<size_t>(route[l])].id);
    layers << "\n";
    if (fi == o.toml_fraction)
      r.toml = "# Profile-guided route from `ripplekv analyze` at f = " + fmt(fractions[fi]) +
               " (per layer the scorer of least measured damage" +
               (o.counts.empty() ? std::string() : ", scorer counts held fixed") +
               "); paste into an ablation config.\n" + toml_of(scorers, route);
    if (fi == o.toml_fraction)
      r.random_toml = "# The first random placement (seed " + std::to_string(o.seed) + ") of the same scorer counts as " +
                      "route.toml, the baseline of the guided route at f = " + fmt(fractions[fi]) + ".\n" +
                      toml_of(scorers, random);
  }
  md << "\nPer layer (layer 0 first):\n\n" << layers.str() << "\nThe route at f = " << fractions[o.toml_fraction]
     << " is in route.toml, the first random placement of its counts in route-random.toml.\n";
  r.markdown = md.str();
  return r;
}

}  // namespace rkv
