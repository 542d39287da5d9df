// Depth-wise sharing plans (runner/compress/share.hpp): which layer each layer reads under CLA@g, a map and the
// profile-guided chooser, worked out by hand; the budget spread over the layers that keep a cache.
#include <gtest/gtest.h>

#include "core/errors.hpp"
#include "model/synthetic_model.hpp"
#include "runner/compress/share.hpp"

namespace {

TEST(ShareSources, ClaGroupsReadTheFirstLayerOfTheirGroup) {
  rkv::ShareSpec s;
  s.groups = 3;
  EXPECT_EQ(rkv::share_sources(s, 7, {}), (std::vector<int64_t>{0, 0, 0, 3, 3, 3, 6}));
  s.groups = 1;  // no sharing
  EXPECT_EQ(rkv::share_sources(s, 4, {}), (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(ShareSources, AMapNamesEachSharedLayersSource) {
  rkv::ShareSpec s;
  s.map = {{3, 1}, {4, 1}};
  EXPECT_EQ(rkv::share_sources(s, 5, {}), (std::vector<int64_t>{0, 1, 2, 1, 1}));
}

TEST(ShareSources, TheChooserSharesTheLeastSensitiveLayersWithTheNearestKeptOne) {
  // Profile [5, 1, 3, 0.5, 2, 0.5]: layer 0 never shares; the two lowest of layers 1..5 are 3 and 5 (0.5 each; the
  // deeper first on ties), then 1 (1.0). count = 2 -> 5 and 3 share: 3 reads 2, 5 reads 4.
  rkv::ShareSpec s;
  s.count = 2;
  const std::vector<double> p = {5, 1, 3, 0.5, 2, 0.5};
  EXPECT_EQ(rkv::share_sources(s, 6, p), (std::vector<int64_t>{0, 1, 2, 2, 4, 4}));
  // count = 4: layers 5, 3, 1, 4 share; runs of shared layers read the layer before the run (0 for 1, 2 for 3..5).
  s.count = 4;
  EXPECT_EQ(rkv::share_sources(s, 6, p), (std::vector<int64_t>{0, 0, 2, 2, 2, 2}));
  EXPECT_THROW(rkv::share_sources(s, 6, {1, 2}), rkv::InputError);  // the chooser needs the whole profile
}

TEST(SharePlan, TheBudgetGoesToTheLayersThatKeepACacheCappedAtTheirSpans) {
  const rkv::Model m = rkv::synthetic_model(rkv::synthetic_config("llama", 6, 2, 16, 4), 3);
  rkv::ShareSpec s;
  s.groups = 2;
  // T = 100, A = all 4 layers; B = 150 (f = 0.375): layers 0 and 2 keep theirs, room 200 -> B' = 150.
  rkv::SharePlan p = rkv::plan_sharing(s, m.config, {0, 1, 2, 3}, 150, 100, {});
  EXPECT_EQ(p.layers, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(p.budget_total, 150);
  EXPECT_TRUE(p.warning.empty());
  // B = 200 (f = 0.5, CLA@2's own bytes): every entry of layers 0 and 2. B = 300 is capped at 200.
  const rkv::SharePlan capped = rkv::plan_sharing(s, m.config, {0, 1, 2, 3}, 300, 100, {});
  EXPECT_EQ(capped.budget_total, 200);
  EXPECT_NE(capped.warning.find("hold at most 200 of the budget's 300 entries"), std::string::npos) << capped.warning;
  // A = {1, 3}: both shared -> an error naming the section.
  EXPECT_THROW(rkv::plan_sharing(s, m.config, {1, 3}, 100, 100, {}), rkv::InputError);
  // No sharing: A and B unchanged.
  const rkv::SharePlan none = rkv::plan_sharing(rkv::ShareSpec{}, m.config, {1, 2}, 77, 100, {});
  EXPECT_EQ(none.layers, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(none.budget_total, 77);
}

TEST(ShareSupport, MapLayersBeyondTheModelAndChainedSourcesAreRefused) {
  const rkv::Model m = rkv::synthetic_model(rkv::synthetic_config("llama", 6, 2, 16, 4), 3);
  rkv::ShareSpec s;
  s.map = {{4, 0}};
  EXPECT_THROW(rkv::check_share_support(m.config, s, "cfg.toml"), rkv::InputError);
  s.map = {{2, 1}, {3, 2}};
  try {
    rkv::check_share_support(m.config, s, "cfg.toml");
    FAIL() << "a chained source was accepted";
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("itself shared"), std::string::npos) << e.what();
  }
  s.map = {{2, 1}, {2, 0}};
  EXPECT_THROW(rkv::check_share_support(m.config, s, "cfg.toml"), rkv::InputError);
  s.map.clear();
  s.count = 4;
  EXPECT_THROW(rkv::check_share_support(m.config, s, "cfg.toml"), rkv::InputError);
  s.count = 3;
  EXPECT_NO_THROW(rkv::check_share_support(m.config, s, "cfg.toml"));
}

}  // namespace
