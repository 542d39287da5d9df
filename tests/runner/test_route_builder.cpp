// The profile-guided route builder (runner/analyze/route_builder.hpp) on hand-made damage tables with hand-worked answers,
// the exact counts-constrained assignment against brute force, and the seeded random-placement baseline.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "core/errors.hpp"
#include "runner/analyze/routes.hpp"
#include "runner/analyze/route_builder.hpp"

namespace {

using rkv::RouteChoice;

// D[s][l]: two scorers, four layers.
const std::vector<std::vector<double>> kTwo = {{1, 5, 2, 7}, {3, 4, 2, 1}};
// Three scorers, three layers: rows are scorers; per layer (column) the costs are l0 (4, 1, 3), l1 (2, 0, 5),
// l2 (3, 2, 2).
const std::vector<std::vector<double>> kThree = {{4, 2, 3}, {1, 0, 2}, {3, 5, 2}};

TEST(RouteBuilder, LeastDamagePerLayer) {
  // By hand: l0 1 < 3 -> 0; l1 4 < 5 -> 1; l2 2 = 2, tie -> the lower index 0; l3 1 < 7 -> 1. Total 1+4+2+1 = 8.
  EXPECT_EQ(rkv::least_damage_route(kTwo), (RouteChoice{0, 1, 0, 1}));
  EXPECT_DOUBLE_EQ(rkv::route_damage(kTwo, {0, 1, 0, 1}), 8.0);
  // kThree: every layer's least is scorer 1 (1, 0, and 2 tied with scorer 2 -> 1).
  EXPECT_EQ(rkv::least_damage_route(kThree), (RouteChoice{1, 1, 1}));
  EXPECT_EQ(rkv::route_counts({1, 1, 1}, 3), (std::vector<int64_t>{0, 3, 0}));
}

TEST(RouteBuilder, CountsHeldFixedByHand) {
  // Two scorers, counts (3, 1): scorer 1 takes the layer where it saves most, D0 - D1 = (-2, 1, 0, 6): layer 3.
  EXPECT_EQ(rkv::count_constrained_route(kTwo, {3, 1}), (RouteChoice{0, 0, 0, 1}));
  // Counts (1, 3): scorer 0 takes the layer where it saves most, D1 - D0 = (2, -1, 0, -6): layer 0.
  EXPECT_EQ(rkv::count_constrained_route(kTwo, {1, 3}), (RouteChoice{0, 1, 1, 1}));
  // Three scorers, one layer each: the six assignments (scorer of l0, l1, l2) cost (0,1,2) 4+0+2 = 6,
  // (0,2,1) 4+5+2 = 11, (1,0,2) 1+2+2 = 5, (1,2,0) 1+5+3 = 9, (2,0,1) 3+2+2 = 7, (2,1,0) 3+0+3 = 6: the least is
  // (1, 0, 2) at 5, which per-layer greed (all scorer 1) cannot reach under the counts.
  EXPECT_EQ(rkv::count_constrained_route(kThree, {1, 1, 1}), (RouteChoice{1, 0, 2}));
  EXPECT_DOUBLE_EQ(rkv::route_damage(kThree, {1, 0, 2}), 5.0);
  EXPECT_THROW(rkv::count_constrained_route(kTwo, {2, 1}), rkv::InputError);      // sums to 3, not 4
  EXPECT_THROW(rkv::count_constrained_route(kTwo, {5, -1}), rkv::InputError);     // negative
  EXPECT_THROW(rkv::count_constrained_route(kTwo, {4}), rkv::InputError);         // one count for two scorers
  EXPECT_THROW(rkv::least_damage_route({{1, 2}, {1}}), rkv::InputError);          // ragged
  EXPECT_THROW(rkv::least_damage_route({{1, NAN}}), rkv::InputError);             // not finite
}

// The Hungarian solution equals the best of every arrangement of the counts (brute force over the distinct
// permutations of the multiset), on seeded random tables of 3 scorers x 7 layers.
TEST(RouteBuilder, CountsConstrainedIsExactAgainstBruteForce) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<std::vector<double>> D(3, std::vector<double>(7));
    for (auto& row : D)
      for (double& v : row) v = u(rng);
    const std::vector<int64_t> counts = {trial % 3 + 1, 2, 7 - 2 - (trial % 3 + 1)};
    RouteChoice r;
    for (int s = 0; s < 3; ++s) r.insert(r.end(), static_cast<size_t>(counts[static_cast<size_t>(s)]), s);
    double best = 1e300;
    do best = std::min(best, rkv::route_damage(D, r));
    while (std::next_permutation(r.begin(), r.end()));
    const RouteChoice got = rkv::count_constrained_route(D, counts);
    EXPECT_EQ(rkv::route_counts(got, 3), counts);
    EXPECT_NEAR(rkv::route_damage(D, got), best, 1e-12) << "trial " << trial;
  }
}

TEST(RouteBuilder, RandomPlacementKeepsCountsAndIsSeeded) {
  const std::vector<int64_t> counts = {2, 2};
  const auto a = rkv::random_routes(counts, 6000, 42);
  EXPECT_EQ(a, rkv::random_routes(counts, 6000, 42));  // reproducible from the seed
  EXPECT_NE(a, rkv::random_routes(counts, 6000, 43));
  std::map<RouteChoice, int> seen;
  for (const auto& r : a) {
    ASSERT_EQ(rkv::route_counts(r, 2), counts);
    ++seen[r];
  }
  // Uniform over the 4! / (2! 2!) = 6 arrangements: 1000 each on average; binomial sd = sqrt(6000 (1/6)(5/6)) = 28.9,
  // so 850..1150 is more than 5 sd either side.
  ASSERT_EQ(seen.size(), 6u);
  for (const auto& [r, n] : seen) {
    EXPECT_GT(n, 850);
    EXPECT_LT(n, 1150);
  }
  // The first routes of a stream do not depend on how many are drawn.
  const auto b = rkv::random_routes(counts, 10, 42);
  EXPECT_TRUE(std::equal(b.begin(), b.end(), a.begin()));
}

TEST(RouteBuilder, RankAmongRandomRoutes) {
  // Route (1, 0, 2) has damage 5; the random ones cost 6, 5 (a tie), 7 and 9.
  const rkv::RouteRank r = rkv::rank_among(kThree, {1, 0, 2}, {{0, 1, 2}, {1, 0, 2}, {2, 0, 1}, {1, 2, 0}});
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.ties, 1);
  EXPECT_EQ(r.n, 4);
  EXPECT_DOUBLE_EQ(r.damage, 5.0);
  EXPECT_DOUBLE_EQ(r.best, 5.0);
  EXPECT_DOUBLE_EQ(r.median, 6.5);
  EXPECT_DOUBLE_EQ(r.worst, 9.0);
  // Route (0, 2, 1) at 11 is beaten by all four.
  EXPECT_EQ(rkv::rank_among(kThree, {0, 2, 1}, {{0, 1, 2}, {1, 0, 2}, {2, 0, 1}, {1, 2, 0}}).rank, 5);
}

TEST(RouteReport, JsonAndTomlOfTheGuidedRoute) {
  rkv::ScorerDamage a{"org.ripplekv.scorer.snapkv", {{"window", int64_t{32}}}, {{1, 5, 2, 7}}};
  rkv::ScorerDamage b{"org.ripplekv.scorer.knorm", {}, {{3, 4, 2, 1}}};
  rkv::RouteBuildOptions o;
  o.random_routes = 50;
  o.seed = 3;
  const rkv::RouteReport r = rkv::build_route_report({a, b}, {0.2}, o);
  ASSERT_EQ(r.json.size(), 1u);
  EXPECT_EQ(r.json[0].at("route"), nlohmann::json({"snapkv", "knorm", "snapkv", "knorm"}));
  EXPECT_EQ(r.json[0].at("counts").at("knorm"), 2);
  EXPECT_DOUBLE_EQ(r.json[0].at("damage").get<double>(), 8.0);
  EXPECT_DOUBLE_EQ(r.json[0].at("homogeneous_damage").at("snapkv").get<double>(), 15.0);
  EXPECT_DOUBLE_EQ(r.json[0].at("homogeneous_damage").at("knorm").get<double>(), 10.0);
  // 8 is the least any arrangement of two and two reaches (the guided route is optimal for its counts): rank 1.
  EXPECT_EQ(r.json[0].at("random").at("rank"), 1);
  EXPECT_NE(r.toml.find("[[scorer.route]]\nlayers = \"0, 2\"\nplugin = \"snapkv\"\nsnapkv = { window = 32 }\n"
                        "[[scorer.route]]\nlayers = \"1, 3\"\nplugin = \"knorm\"\n"),
            std::string::npos)
      << r.toml;
  EXPECT_THROW(rkv::build_route_report({a}, {0.2}, o), rkv::InputError);  // one scorer is no route
  EXPECT_FALSE(r.json[0].contains("held_out"));
}

// The held-out rank: built on D_fit, ranked on D_test. Fit: layer 0 snapkv (1 < 3), layer 1 knorm (4 < 5), counts
// (1, 1). Test: that route costs 2 + 2 = 4; the only other placement of the counts, (knorm, snapkv), costs 1 + 1 = 2.
// So the held-out rank is 1 + the random placements drawn as (knorm, snapkv), and best / worst are 2 / 4.
TEST(RouteReport, HeldOutRankIsBuiltOnFitAndRankedOnTest) {
  rkv::ScorerDamage a{"org.ripplekv.scorer.snapkv", {}, {{1, 1}}, {{1, 5}}, {{2, 1}}};
  rkv::ScorerDamage b{"org.ripplekv.scorer.knorm", {}, {{1, 1}}, {{3, 4}}, {{1, 2}}};
  rkv::RouteBuildOptions o;
  o.random_routes = 40;
  o.seed = 9;
  const rkv::RouteReport r = rkv::build_route_report({a, b}, {0.3}, o);
  const nlohmann::json& h = r.json[0].at("held_out");
  int64_t swapped = 0;
  for (const auto& route : rkv::random_routes({1, 1}, 40, 9)) swapped += route == RouteChoice{1, 0};
  ASSERT_GT(swapped, 0);
  ASSERT_LT(swapped, 40);
  EXPECT_DOUBLE_EQ(h.at("damage").get<double>(), 4.0);
  EXPECT_EQ(h.at("rank").get<int64_t>(), 1 + swapped);
  EXPECT_EQ(h.at("ties").get<int64_t>(), 40 - swapped);
  EXPECT_DOUBLE_EQ(h.at("best").get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(h.at("worst").get<double>(), 4.0);
}

}  // namespace
