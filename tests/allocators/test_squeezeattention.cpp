// SqueezeAttention's layer split (allocators/squeezeattention) against the reference's own code on
// tests/fixtures/squeezeattention/budgets.json (tests/reference/make_squeezeattention_fixture.sh: hetailang/
// SqueezeAttention's LlamaModel_squeeze.forward lines run as they are, with sklearn's KMeans, on three seeded
// prompts: SmolLM2's 30 layers twice, Gemma 3 270M's 18 layers once), and by hand where the reference has no case.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "common/plugin_fixture.hpp"
#include "plugin/allocator_call.hpp"

namespace {

using json = nlohmann::json;

const json& fixture() {
  static const json j = [] {
    std::ifstream f(std::string(RKV_TEST_SOURCE_DIR) + "/tests/fixtures/squeezeattention/budgets.json");
    return json::parse(f);
  }();
  return j;
}

rkv::UserParam P(const char* k, rkv::ParamValue v) { return rkv::UserParam{k, std::move(v), false, "test"}; }

TEST(SqueezeAttentionFixture, ClustersAndBudgetsAreTheReferences) {
  // ripplekv's profile is s_l = 1 - mean cosine (squeezeattention signal); reduced_share = percent / ini_size and
  // B = ini_size T L, so the reduced cluster's b_l = percent T and every other layer's b_l = a T exactly (the
  // reference then truncates each to int; the host integerises the same reals by largest remainder).
  rkv_test::PluginFixture plugins;
  for (const json& p : fixture()["prompts"]) {
    SCOPED_TRACE(p["model"].get<std::string>());
    const int64_t L = p["layers"], T = p["T"];
    const double ini = p["ini_size"], percent = p["percent"], a = p["a"];
    const rkv::PluginInstance& alloc =
        plugins.instance("squeezeattention", RKV_KIND_ALLOCATOR, {P("reduced_share", percent / ini)});
    std::vector<double> profile;
    for (double m : p["means"]) profile.push_back(1.0 - m);
    const int64_t B = static_cast<int64_t>(ini * static_cast<double>(T * L) + 0.5);
    const rkv::Allocation got = rkv::run_allocator(alloc, profile, B, T, L, -1);
    const std::vector<int64_t> reduced = p["classes"][2];  // the highest mean cosine
    for (int64_t l = 0; l < L; ++l) {
      const bool in_reduced = std::find(reduced.begin(), reduced.end(), l) != reduced.end();
      EXPECT_NEAR(got.raw[static_cast<size_t>(l)], (in_reduced ? percent : a) * static_cast<double>(T), 1e-9 * T)
          << "layer " << l;
      EXPECT_LE(std::abs(got.budgets[static_cast<size_t>(l)] - p["windows"][static_cast<size_t>(l)].get<int64_t>()), 1)
          << "layer " << l;
    }
    EXPECT_EQ(std::accumulate(got.budgets.begin(), got.budgets.end(), int64_t{0}), B);
  }
}

TEST(SqueezeAttention, SpansAndDegenerateProfilesByHand) {
  rkv_test::PluginFixture plugins;
  const rkv::PluginInstance& alloc = plugins.instance("squeezeattention", RKV_KIND_ALLOCATOR);
  // Profile 0, 0.1, 5, 5.2, 9: the 3-means split is {0, 0.1} {5, 5.2} {9} (SSE 0.025 against 12.6 for any other);
  // the reduced cluster is {0, 0.1}. Spans 100, 50 (a sliding layer), 100, 100, 100; B = 225: f = 225 / 450 = 0.5,
  // p = 0.25: layers 0 and 1 keep 25 and 12.5, the rest 187.5 over spans 300: 62.5 each.
  const rkv::Allocation a = rkv::run_allocator(alloc, {0.0, 0.1, 5.0, 5.2, 9.0}, 225, 100, 5, -1, {100, 50, 100, 100, 100});
  const std::vector<double> want = {25.0, 12.5, 62.5, 62.5, 62.5};
  for (size_t l = 0; l < want.size(); ++l) EXPECT_NEAR(a.raw[l], want[l], 1e-12) << "layer " << l;
  // A constant profile: every layer alike, with a warning.
  const rkv::Allocation flat = rkv::run_allocator(alloc, {3.0, 3.0, 3.0}, 60, 100, 3, -1);
  EXPECT_EQ(flat.budgets, (std::vector<int64_t>{20, 20, 20}));
  ASSERT_EQ(flat.warnings.size(), 1u);
  // Two distinct values: two clusters, the lower one reduced: 0.5 x 20 = 10 for layers 0, 2; 40 for layer 1.
  const rkv::Allocation two = rkv::run_allocator(alloc, {1.0, 2.0, 1.0}, 60, 100, 3, -1);
  EXPECT_EQ(two.budgets, (std::vector<int64_t>{10, 40, 10}));
}

}  // namespace
