// The joint allocator's knapsack (cache/joint_plan.hpp):
//  - a case worked out by hand (which layer gives up what under a byte total);
//  - random small grids against brute-force enumeration of every plan (an independent solver);
//  - spend_leftover's bytes by hand: <= the budget and within one entry of it;
//  - errors: no plan fits, mismatched tables.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cache/joint_plan.hpp"
#include "core/errors.hpp"

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(JointPlan, OptionsAreTheGridThenSharing) {
  const auto o = rkv::joint_options({1.0, 0.5}, {32, 4}, true);
  ASSERT_EQ(o.size(), 5u);
  EXPECT_EQ(o[0].label(), "f=1 f32");
  EXPECT_EQ(o[1].label(), "f=1 int4");
  EXPECT_EQ(o[2].label(), "f=0.5 f32");
  EXPECT_EQ(o[3].label(), "f=0.5 int4");
  EXPECT_EQ(o[4].label(), "shared");
  EXPECT_EQ(rkv::joint_options({0.25}, {8}, false).size(), 1u);
}

TEST(JointPlan, ASensitiveLayerKeepsMoreBytesThanARobustOne) {
  // Options per layer: 0 = whole (100 bytes), 1 = half (50), 2 = shared (0). Layer 0 cannot share.
  // Layer 0: damages 0, 1.0, inf; layer 1 (robust): 0, 0.1, 0.3; layer 2 (sensitive): 0, 2.0, 5.0.
  const std::vector<std::vector<double>> d = {{0, 1.0, kInf}, {0, 0.1, 0.3}, {0, 2.0, 5.0}};
  const std::vector<std::vector<int64_t>> b = {{100, 50, 0}, {100, 50, 0}, {100, 50, 0}};
  // 300 bytes: everything whole.
  EXPECT_EQ(rkv::choose_joint_plan(d, b, 300), (std::vector<size_t>{0, 0, 0}));
  // 200 bytes: give up 100 at the least damage: layer 1 shares (0.3) beats halving 0 and 1 (1.1) or 1 and 2 (2.1).
  EXPECT_EQ(rkv::choose_joint_plan(d, b, 200), (std::vector<size_t>{0, 2, 0}));
  // 250 bytes: halving layer 1 (0.1) is enough.
  EXPECT_EQ(rkv::choose_joint_plan(d, b, 250), (std::vector<size_t>{0, 1, 0}));
  // 100 bytes: the options of total 100 are {0,2,2} (5.3), {1,1,2} (6.1), {1,2,1} (3.3): the last.
  EXPECT_EQ(rkv::choose_joint_plan(d, b, 100), (std::vector<size_t>{1, 2, 1}));
  // 49 bytes: layer 0 needs at least 50.
  try {
    rkv::choose_joint_plan(d, b, 49);
    FAIL();
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no plan fits the budget of 49 bytes"), std::string::npos) << e.what();
  }
}

/// The least damage of any plan within `budget`, by enumerating all O^L plans.
double brute_force(const std::vector<std::vector<double>>& d, const std::vector<std::vector<int64_t>>& b, int64_t budget) {
  const size_t L = d.size(), O = d[0].size();
  size_t n = 1;
  for (size_t l = 0; l < L; ++l) n *= O;
  double best = kInf;
  for (size_t code = 0; code < n; ++code) {
    size_t c = code;
    double dmg = 0;
    int64_t bytes = 0;
    for (size_t l = 0; l < L; ++l, c /= O) {
      dmg += d[l][c % O];
      bytes += b[l][c % O];
    }
    if (bytes <= budget) best = std::min(best, dmg);
  }
  return best;
}

TEST(JointPlan, MatchesBruteForceOnRandomGrids) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int trial = 0; trial < 200; ++trial) {
    const size_t L = 2 + trial % 5, O = 2 + trial % 4;
    std::vector<std::vector<double>> d(L, std::vector<double>(O));
    std::vector<std::vector<int64_t>> b(L, std::vector<int64_t>(O));
    int64_t most = 0;
    for (size_t l = 0; l < L; ++l) {
      int64_t top = 0;
      for (size_t o = 0; o < O; ++o) {
        d[l][o] = o == 0 ? 0.0 : u(rng) * 3;  // option 0: keep everything, no damage
        b[l][o] = o == 0 ? 1000 : static_cast<int64_t>(u(rng) * 1000);
        top = std::max(top, b[l][o]);
      }
      most += top;
    }
    const int64_t budget = static_cast<int64_t>(u(rng) * static_cast<double>(most));
    const double best = brute_force(d, b, budget);
    if (!std::isfinite(best)) {
      EXPECT_THROW(rkv::choose_joint_plan(d, b, budget), rkv::InputError);
      continue;
    }
    const std::vector<size_t> plan = rkv::choose_joint_plan(d, b, budget);
    double dmg = 0;
    int64_t bytes = 0;
    for (size_t l = 0; l < L; ++l) {
      dmg += d[l][plan[l]];
      bytes += b[l][plan[l]];
    }
    EXPECT_LE(bytes, budget) << "trial " << trial;
    EXPECT_NEAR(dmg, best, 1e-12) << "trial " << trial;
  }
}

TEST(JointPlan, SpendLeftoverFillsToWithinOneEntry) {
  // Layers: entry bytes 516 (f32), 84 (int4), 0 (shared); caps 10 each; kept 4, 4, 0 = 2400 bytes.
  std::vector<int64_t> kept = {4, 4, 0};
  const std::vector<int64_t> cap = {10, 10, 10}, e = {516, 84, 0};
  // Budget 3000: 600 left. Order: layer 0 first: one more f32 entry (516) leaves 84, then one int4 entry: 0 left.
  EXPECT_EQ(rkv::spend_leftover(kept, cap, e, {0, 1, 2}, 3000), 0);
  EXPECT_EQ(kept, (std::vector<int64_t>{5, 5, 0}));
  // Caps bound it: layer 1 fills to 10 (6 x 84 = 504), layer 0 takes what then fits.
  kept = {4, 4, 0};
  EXPECT_EQ(rkv::spend_leftover(kept, cap, e, {1, 0, 2}, 3000 + 516), 3516 - (2400 + 504 + 516));
  EXPECT_EQ(kept, (std::vector<int64_t>{5, 10, 0}));
  // Over the budget already.
  kept = {4, 4, 0};
  EXPECT_THROW(rkv::spend_leftover(kept, cap, e, {0, 1, 2}, 2399), rkv::InputError);
}

TEST(JointPlan, MismatchedTablesAreRefused) {
  EXPECT_THROW(rkv::choose_joint_plan({{0.0}}, {}, 10), rkv::InputError);
  EXPECT_THROW(rkv::choose_joint_plan({{0.0, 1.0}}, {{1}}, 10), rkv::InputError);
  EXPECT_THROW(rkv::choose_joint_plan({{-1.0}}, {{1}}, 10), rkv::InputError);
  EXPECT_THROW(rkv::choose_joint_plan({{kInf}}, {{1}}, 10), rkv::InputError);
}

}  // namespace
