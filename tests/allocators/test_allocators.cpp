// The three built-in allocators through their real .so plugins, with budgets worked out by hand from docs/ARCHITECTURE.md's
// formulas, and the host's validation of allocator output.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "core/errors.hpp"
#include "plugin/allocator_call.hpp"
#include "plugin/instance.hpp"
#include "plugin/registry.hpp"

namespace {

using V = std::vector<int64_t>;

class Allocators : public ::testing::Test {
 protected:
  rkv::PluginRegistry reg = rkv::PluginRegistry::discover({RKV_TEST_BINARY_DIR "/tests/plugins/test_bad_allocator"});
  rkv::HostServices host;

  rkv::Allocation run(const std::string& id, std::vector<rkv::UserParam> params, const std::vector<double>& profile,
                      int64_t B, int64_t T, int64_t n, int64_t protected_count = -1) {
    const auto& info = reg.resolve(id, RKV_KIND_ALLOCATOR);
    const auto set = rkv::ParamSet::validate(*info.descriptor, params);
    rkv::PluginInstance inst = rkv::PluginInstance::create(info, set, host);
    return rkv::run_allocator(inst, profile, B, T, n, protected_count);
  }
  static rkv::UserParam f(const std::string& k, double v) { return {k, v, false, ""}; }
  static rkv::UserParam i(const std::string& k, int64_t v) { return {k, v, false, ""}; }
  std::string error(const std::function<void()>& fn) {
    try {
      fn();
    } catch (const rkv::InputError& e) {
      return e.what();
    }
    return "(no error)";
  }
};

TEST_F(Allocators, UniformSplitsEvenly) {
  // B = 10, |A| = 4: 2.5 each; floors 2*4 = 8; +1 to layers 0 and 1 (ties to the lower index).
  EXPECT_EQ(run("uniform", {}, {}, 10, 100, 4).budgets, (V{3, 3, 2, 2}));
}

TEST_F(Allocators, RippleKVHandComputed) {
  // s = [0, 1, 2, 3] -> s^ = [0, 1/3, 2/3, 1]; m = 1.5^s^ = [1, 1.144714, 1.310371, 1.5], mean 1.238771;
  // B = 800, C = 200: raw b = 200 m / mean = [161.45, 184.82, 211.56, 242.17]; floors sum 798;
  // the two largest fractions (.82, .56) -> layers 1 and 2.
  const rkv::Allocation a = run("ripplekv", {}, {0, 1, 2, 3}, 800, 1000, 4);
  EXPECT_NEAR(a.raw[0], 200.0 / 1.2387713, 1e-3);
  EXPECT_NEAR(a.raw[3], 300.0 / 1.2387713, 1e-3);
  EXPECT_EQ(a.budgets, (V{161, 185, 212, 242}));
}

TEST_F(Allocators, RippleKVConstantProfileIsUniform) {
  EXPECT_EQ(run("ripplekv", {}, {0.7, 0.7, 0.7}, 30, 100, 3).budgets, (V{10, 10, 10}));
}

TEST_F(Allocators, RippleKVWithRequalToOneIsUniform) {
  const rkv::Allocation a = run("ripplekv", {f("r", 1.0)}, {0.1, 5, -2, 3}, 40, 100, 4);
  EXPECT_EQ(a.budgets, (V{10, 10, 10, 10}));
  for (double x : a.raw) EXPECT_DOUBLE_EQ(x, 10.0);
}

TEST_F(Allocators, RippleKVMultipliersSpanExactlyR) {
  // gamma large enough not to clip: max / min of the raw budgets is exactly r.
  const rkv::Allocation a = run("ripplekv", {f("r", 3.0), f("gamma", 10.0)}, {2, -1, 0.5, 8, 3}, 1000, 10000, 5);
  const double mx = *std::max_element(a.raw.begin(), a.raw.end());
  const double mn = *std::min_element(a.raw.begin(), a.raw.end());
  EXPECT_NEAR(mx / mn, 3.0, 1e-12);
  EXPECT_NEAR(a.raw[3] / a.raw[1], 3.0, 1e-12);  // the most and least sensitive layers
}

TEST_F(Allocators, RippleKVClipsWhenRExceedsGamma) {
  // r = 4, gamma = 2, s = [0, 0.5, 1]: m = [1, 2, 4] -> clip [0.5, 2] -> [1, 2, 2], mean 5/3;
  // B = 50, C = 50/3: raw = C * 3/5 * [1, 2, 2] = [10, 20, 20].
  const rkv::Allocation a = run("ripplekv", {f("r", 4.0), f("gamma", 2.0)}, {0, 0.5, 1}, 50, 100, 3);
  EXPECT_NEAR(a.raw[0], 10.0, 1e-9);
  EXPECT_NEAR(a.raw[1], 20.0, 1e-9);
  EXPECT_NEAR(a.raw[2], 20.0, 1e-9);
  EXPECT_EQ(a.budgets, (V{10, 20, 20}));
}

TEST_F(Allocators, RippleKVInvariantToPositiveAffineChangeOfTheProfile) {
  const std::vector<double> s = {0.3, -1.2, 4.5, 0.0, 2.2, -0.7};
  std::vector<double> t;
  for (double x : s) t.push_back(3.5 * x - 7.0);  // negative values are legal
  const auto a = run("ripplekv", {}, s, 600, 1000, 6), b = run("ripplekv", {}, t, 600, 1000, 6);
  EXPECT_EQ(a.budgets, b.budgets);
  for (size_t l = 0; l < s.size(); ++l) EXPECT_NEAR(a.raw[l], b.raw[l], 1e-9);
}

TEST_F(Allocators, RippleKVNeedsAProfileAndRejectsNaN) {
  EXPECT_NE(error([&] { run("ripplekv", {}, {}, 30, 100, 3); }).find("needs a sensitivity profile"), std::string::npos);
  EXPECT_NE(error([&] { run("ripplekv", {}, {0, NAN, 1}, 30, 100, 3); }).find("value 1 is not finite"),
            std::string::npos);
  EXPECT_NE(error([&] { run("ripplekv", {}, {0, INFINITY, 1}, 30, 100, 3); }).find("not finite"), std::string::npos);
  EXPECT_NE(error([&] { run("ripplekv", {}, {0, 1}, 30, 100, 3); }).find("has 2 values but there are 3"),
            std::string::npos);
}

TEST_F(Allocators, PyramidHandComputed) {
  // T = 1000, |A| = 4, B = 800, w = 32 (standalone), beta = 20: C = 200, lo = 168/20 = 8.4, hi = 336 - 8.4 = 327.6;
  // b_l = 32 + 327.6 - l * 319.2 / 3 = [359.6, 253.2, 146.8, 40.4]; floors 798; +1 to .8, .6 -> layers 2 and 1.
  const rkv::Allocation a = run("pyramid", {}, {}, 800, 1000, 4);
  EXPECT_NEAR(a.raw[0], 359.6, 1e-9);
  EXPECT_NEAR(a.raw[3], 40.4, 1e-9);
  EXPECT_EQ(a.budgets, (V{360, 253, 147, 40}));
}

TEST_F(Allocators, PyramidUsesTheScorersProtectedCountInARun) {
  // protected_count 10 replaces the default window 32: C = 200, lo = 190/20 = 9.5, hi = 380 - 9.5 = 370.5;
  // b = [380.5, 257, 133.5, 10 + 9.5 = 19.5]... (hi - lo) / 3 = 120.333: [380.5, 260.1667, 139.8333, 19.5].
  const rkv::Allocation a = run("pyramid", {}, {}, 800, 1000, 4, 10);
  EXPECT_NEAR(a.raw[0], 380.5, 1e-9);
  EXPECT_NEAR(a.raw[1], 260.1666666667, 1e-6);
  EXPECT_NEAR(a.raw[3], 19.5, 1e-9);
  // An explicit window param wins over the scorer's count.
  EXPECT_NEAR(run("pyramid", {i("window", 32)}, {}, 800, 1000, 4, 10).raw[0], 359.6, 1e-9);
}

TEST_F(Allocators, PyramidWithOneLayer) {
  EXPECT_EQ(run("pyramid", {}, {}, 77, 1000, 1).budgets, (V{77}));
}

TEST_F(Allocators, PyramidClampBranch) {
  // T = 100, w = 10, |A| = 3, B = 240: C = 80, lo = 70/20 = 3.5, hi = 140 - 3.5 = 136.5 > T - w = 90
  // -> hi = 90, lo = 140 - 90 = 50; b = [100, 80, 60].
  const rkv::Allocation a = run("pyramid", {i("window", 10)}, {}, 240, 100, 3);
  EXPECT_EQ(a.budgets, (V{100, 80, 60}));
  EXPECT_TRUE(a.warnings.empty());
}

TEST_F(Allocators, PyramidFallsBackToUniformWithAWarning) {
  // C = 100 / 4 = 25 <= w = 32: infeasible, uniform 25 each, and the caller is told.
  const rkv::Allocation a = run("pyramid", {}, {}, 100, 1000, 4);
  EXPECT_EQ(a.budgets, (V{25, 25, 25, 25}));
  ASSERT_EQ(a.warnings.size(), 1u);
  EXPECT_NE(a.warnings[0].find("pyramid schedule infeasible"), std::string::npos);
  EXPECT_NE(a.warnings[0].find("fell back to uniform"), std::string::npos);
}

TEST_F(Allocators, BudgetBelowOnePerLayerIsAnError) {
  EXPECT_NE(error([&] { run("uniform", {}, {}, 3, 100, 4); }).find("below the number of compressible layers"),
            std::string::npos);
}

TEST_F(Allocators, HostRejectsBadAllocatorOutputNamingThePlugin) {
  auto mode = [](const char* m) { return rkv::UserParam{"mode", std::string(m), false, ""}; };
  EXPECT_EQ(error([&] { run("bad_allocator", {mode("nan")}, {}, 12, 10, 3); }),
            "allocator 'org.test.bad_allocator' returned a non-finite budget for layer 0 (nan)");
  EXPECT_EQ(error([&] { run("bad_allocator", {mode("negative")}, {}, 12, 10, 3); }),
            "allocator 'org.test.bad_allocator' returned a negative budget for layer 0 (-1.000000)");
  EXPECT_EQ(error([&] { run("bad_allocator", {mode("wrong_sum")}, {}, 12, 10, 3); }),
            "allocator 'org.test.bad_allocator' returned budgets summing to 15, not B = 12 (tolerance 1e-6 * B)");
}

TEST_F(Allocators, ValuesAboveTAreCappedNotRejected) {
  // mode above_t, |A| = 2, B = 12, T = 10: x = [11, 1]; layer 0 capped at 10, 10 + lambda = 12 -> [10, 2].
  const auto a = run("bad_allocator", {{"mode", std::string("above_t"), false, ""}}, {}, 12, 10, 2);
  EXPECT_EQ(a.budgets, (V{10, 2}));
}

}  // namespace

namespace {

using HV = std::vector<std::vector<int64_t>>;

// AdaKV (rkv.allocator/2) on a hand-made score table: one layer, H_kv = 2, T = 6, b_l = 3 (6 entries in all).
//   head 0 scores 9, 8, 7, 1, 0.5, 0.2;  head 1 scores 0.9, 0.1, 0.3, 0.2, 0.4, 0.6.
class AdaKV : public Allocators {
 protected:
  std::vector<float> scores = {9, 8, 7, 1, 0.5f, 0.2f, 0.9f, 0.1f, 0.3f, 0.2f, 0.4f, 0.6f};
  rkv::HeadAllocation heads(double alpha, std::vector<uint8_t> mask, int64_t protected_count, int64_t B,
                            const std::vector<int64_t>* layer_budgets = nullptr, int64_t layers = 1) {
    const auto& info = reg.resolve("adakv", RKV_KIND_ALLOCATOR);
    const auto set = rkv::ParamSet::validate(*info.descriptor, {f("alpha_safeguard", alpha)});
    rkv::PluginInstance inst = rkv::PluginInstance::create(info, set, host);
    rkv::HeadAllocationInputs in;
    std::vector<float> s;
    for (int64_t l = 0; l < layers; ++l) s.insert(s.end(), scores.begin(), scores.end());
    in.scores = &s;
    in.protected_mask = std::move(mask);
    in.layer_budgets = layer_budgets;
    in.budget_total = B;
    in.prefix_tokens = 6;
    in.n_layers = layers;
    in.n_kv_heads = 2;
    in.protected_count = protected_count;
    return rkv::run_head_allocator(inst, in);
  }
};

TEST_F(AdaKV, GlobalTopKAcrossHeadsWithTheSafeguard) {
  // alpha 0.34: n_safe = floor(0.34 * 3) = 1; each head first keeps its best (9 | 0.9); the other 2 x (3 - 1) = 4
  // entries are the best of the rest over both heads: 8, 7, 1 (head 0) and 0.6 (head 1) -> [1 + 3, 1 + 1] = [4, 2].
  EXPECT_EQ(heads(0.34, {}, -1, 3).budgets, (HV{{4, 2}}));
  // alpha 1: every head keeps b_l by its own ranking -> [3, 3] (uniform).
  EXPECT_EQ(heads(1.0, {}, -1, 3).budgets, (HV{{3, 3}}));
  // A protected position (the most recent, 5) counts in each head's safeguard even where it scores low: f = 1 (0.2 |
  // 0.6), then the best 4 of the rest are 9, 8, 7, 1, all in head 0 -> [5, 1]; each head still holds position 5.
  EXPECT_EQ(heads(0.0, {0, 0, 0, 0, 0, 1}, 1, 3).budgets, (HV{{5, 1}}));
}

TEST_F(AdaKV, ComposesWithLayerBudgetsAndSumsExactly) {
  // Two identical layers with b_l = 1 and 5 from a layer allocator: rows sum to 2 and 10 entries exactly.
  // Layer 0 (alpha 0.2 -> n_safe 0): the global top 2 are 9 and 8 -> [2, 0], raised by the host's floor of one
  // entry per head -> [1, 1]. Layer 1: n_safe = 1 (9 | 0.9); the best 8 of the rest: 8, 7, 1, 0.6, 0.5, 0.4, 0.3,
  // 0.2 (head 0's 0.2 ties head 1's 0.2: the lower head wins) -> head 0 gets 1 + 5 (8, 7, 1, 0.5, 0.2), head 1 gets
  // 1 + 3 (0.6, 0.4, 0.3) -> [6, 4].
  const std::vector<int64_t> layer_budgets = {1, 5};
  const rkv::HeadAllocation h = heads(0.2, {}, -1, 6, &layer_budgets, 2);
  EXPECT_EQ(h.layer_budgets, layer_budgets);
  EXPECT_EQ(h.raw, (std::vector<double>{2, 0, 6, 4}));
  EXPECT_EQ(h.budgets, (HV{{1, 1}, {6, 4}}));
}

TEST_F(AdaKV, AloneSplitsTheBudgetEvenlyOverLayers) {
  // No layer allocator: B = 7 over 2 layers -> b_l = 4, 3 (the remainder to the lower layer), then per head.
  const rkv::HeadAllocation h = heads(0.0, {}, -1, 7, nullptr, 2);
  EXPECT_EQ(h.layer_budgets, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(h.budgets[0][0] + h.budgets[0][1], 8);
  EXPECT_EQ(h.budgets[1][0] + h.budgets[1][1], 6);
}

TEST_F(AdaKV, HostRejectsAPerHeadAllocatorWithoutScoresOrWithBadOutput) {
  const auto& info = reg.resolve("adakv", RKV_KIND_ALLOCATOR);
  rkv::PluginInstance inst = rkv::PluginInstance::create(info, rkv::ParamSet::validate(*info.descriptor, {}), host);
  rkv::HeadAllocationInputs in;
  in.budget_total = 3;
  in.prefix_tokens = 6;
  in.n_layers = 1;
  in.n_kv_heads = 2;
  EXPECT_NE(error([&] { rkv::run_head_allocator(inst, in); }).find("needs the scorer's scores"), std::string::npos);
  std::vector<float> bad = scores;
  bad[3] = std::nanf("");
  in.scores = &bad;
  EXPECT_NE(error([&] { rkv::run_head_allocator(inst, in); }).find("KV head 0, position 3 is not finite"),
            std::string::npos);
  // A layer allocator is not a per-head one, and the other way round.
  const auto& uni = reg.resolve("uniform", RKV_KIND_ALLOCATOR);
  rkv::PluginInstance u = rkv::PluginInstance::create(uni, rkv::ParamSet::validate(*uni.descriptor, {}), host);
  EXPECT_NE(error([&] { rkv::run_head_allocator(u, in); }).find("does not serve rkv.allocator/2"), std::string::npos);
  EXPECT_TRUE(rkv::serves_head_budgets(inst));
  EXPECT_FALSE(rkv::serves_layer_budgets(inst));
}

// global_topk (Layer-DefensiveKV's split) over two layers: layer 0 is AdaKV's table, layer 1 the same scores x 2.
class GlobalTopK : public AdaKV {
 protected:
  rkv::HeadAllocation global(std::vector<uint8_t> mask, int64_t protected_count, int64_t B) {
    const auto& info = reg.resolve("global_topk", RKV_KIND_ALLOCATOR);
    rkv::PluginInstance inst = rkv::PluginInstance::create(info, rkv::ParamSet::validate(*info.descriptor, {}), host);
    std::vector<float> s = scores;
    for (float x : scores) s.push_back(2 * x);
    rkv::HeadAllocationInputs in;
    in.scores = &s;
    in.protected_mask = std::move(mask);
    in.budget_total = B;
    in.prefix_tokens = 6;
    in.n_layers = 2;
    in.n_kv_heads = 2;
    in.protected_count = protected_count;
    return rkv::run_head_allocator(inst, in);
  }
};

TEST_F(GlobalTopK, OneRankingOverEveryLayerAndHead) {
  // B = 4 per head over 2 layers: H_kv B = 8 entries, the best 8 of all 24 scores: 18, 16, 14, 2 (layer 1, head 0),
  // 9, 8, 7 (layer 0, head 0), 1.8 (layer 1, head 1) -> raw [[3, 0], [4, 1]] before the host's integerization.
  EXPECT_EQ(global({}, -1, 4).raw, (std::vector<double>{3, 0, 4, 1}));
  // Protected position 5 is kept by every head first (1 each, 4 in all); the best 4 of the rest: 18, 16, 14, 9.
  EXPECT_EQ(global({0, 0, 0, 0, 0, 1}, 1, 4).raw, (std::vector<double>{1 + 1, 1, 1 + 3, 1}));
}

TEST_F(GlobalTopK, EveryPositionProtectedStillSumsToTheBudget) {
  // All 6 positions protected, B = 7 (14 entries): each head first gets floor(14 / 4) = 3 of its protected ones, and
  // the 2 left go one per head, lower layer and head first -> [[4, 4], [3, 3]] (it once left them out: the host
  // refused the sum, 12 of 14).
  EXPECT_EQ(global({1, 1, 1, 1, 1, 1}, 6, 7).raw, (std::vector<double>{4, 4, 3, 3}));
}

}  // namespace
