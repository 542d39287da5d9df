// The host side of rkv.scorer/1 (scorer_call): requirements as declared by the three built-in scorers, their param
// specs, and the host's validation of what a scorer returns (NaN/inf scores rejected naming the plugin id).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cache/layer_compression.hpp"
#include "core/errors.hpp"
#include "plugin/params.hpp"
#include "plugin/registry.hpp"
#include "plugin/scorer_call.hpp"

namespace {

const rkv::PluginRegistry& registry() {
  static const rkv::PluginRegistry r = [] {
    rkv::PluginRegistry reg = rkv::PluginRegistry::discover();
    reg.load_library(std::string(RKV_TEST_BINARY_DIR) + "/tests/plugins/rkv_test_bad_scorer.so");
    return reg;
  }();
  return r;
}

const rkv_attention_shape kSmolLM2{sizeof(rkv_attention_shape), 30, 9, 3, 64};

rkv::ScorerRequirements requirements_of(const std::string& id, std::vector<rkv::UserParam> user = {}) {
  const rkv::PluginInfo& info = registry().resolve(id, RKV_KIND_SCORER);
  rkv::HostServices host;
  const rkv::PluginInstance inst =
      rkv::PluginInstance::create(info, rkv::ParamSet::validate(*info.descriptor, user), host);
  return rkv::query_scorer_requirements(inst, kSmolLM2);
}

TEST(ScorerPlugins, DeclareTheirRequirements) {
  // snapkv: window attention over the last 32 queries; the window is protected as `recent`.
  const auto s = requirements_of("snapkv");
  EXPECT_EQ(s.stats, RKV_STAT_WINDOW_ATTENTION);
  EXPECT_EQ(s.window, 32);
  EXPECT_EQ(s.sinks, 0);
  EXPECT_EQ(s.recent, 32);
  EXPECT_EQ(s.protected_count(2048), 32);
  EXPECT_EQ(s.protected_count(10), 10);
  EXPECT_EQ(s.effective_window(10), 10);
  EXPECT_TRUE(s.stats_options().window_attention);
  EXPECT_FALSE(s.stats_options().cumulative_attention);
  EXPECT_EQ(requirements_of("snapkv", {{"window", int64_t(8), false, "t"}}).recent, 8);
  // h2o: cumulative attention, recent 32 protected.
  const auto h = requirements_of("h2o");
  EXPECT_EQ(h.stats, RKV_STAT_CUMULATIVE_ATTENTION);
  EXPECT_EQ(h.recent, 32);
  EXPECT_EQ(h.sinks, 0);
  EXPECT_TRUE(h.stats_options().cumulative_attention);
  // streamingllm: no statistics, 4 sinks.
  const auto st = requirements_of("streamingllm");
  EXPECT_EQ(st.stats, 0u);
  EXPECT_EQ(st.sinks, 4);
  EXPECT_EQ(st.recent, 0);
  // Decode-time scoring (ABI minor 2): all three support it; h2o only unnormalized (its normalizer counts prompt
  // queries). What each reads then is what the plugin's requirements() sets, stated in its file comment.
  EXPECT_TRUE(s.decode_scoring);
  EXPECT_EQ(s.decode_stats, RKV_STAT_WINDOW_ATTENTION);
  EXPECT_TRUE(h.decode_scoring);
  EXPECT_EQ(h.decode_stats, RKV_STAT_CUMULATIVE_ATTENTION);
  const auto hn = requirements_of("h2o", {{"normalize", true, false, "t"}});
  EXPECT_FALSE(hn.decode_scoring);
  EXPECT_EQ(hn.decode_stats, 0u);
  EXPECT_TRUE(st.decode_scoring);
  EXPECT_EQ(st.decode_stats, 0u);
  EXPECT_EQ(h.for_decode().stats, RKV_STAT_CUMULATIVE_ATTENTION);
  EXPECT_EQ(h.for_decode().recent, 32);
}

TEST(ScorerPlugins, ParamSpecsHaveDocsBoundsAndTheIssuesDefaults) {
  struct Want {
    const char* plugin;
    const char* name;
    rkv_param_type type;
    int64_t def_int;
    const char* def_string;
  };
  const Want wants[] = {
      {"org.ripplekv.scorer.snapkv", "window", RKV_PARAM_INT, 32, nullptr},
      {"org.ripplekv.scorer.snapkv", "kernel", RKV_PARAM_INT, 7, nullptr},
      {"org.ripplekv.scorer.snapkv", "pooling", RKV_PARAM_CHOICE, 0, "max"},
      {"org.ripplekv.scorer.snapkv", "gqa", RKV_PARAM_CHOICE, 0, "mean"},
      {"org.ripplekv.scorer.h2o", "recent", RKV_PARAM_INT, 32, nullptr},
      {"org.ripplekv.scorer.h2o", "normalize", RKV_PARAM_BOOL, 0, nullptr},
      {"org.ripplekv.scorer.streamingllm", "sinks", RKV_PARAM_INT, 4, nullptr},
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(std::string(w.plugin) + " " + w.name);
    const rkv::PluginInfo& info = registry().resolve(w.plugin, RKV_KIND_SCORER);
    const rkv_param_spec* spec = nullptr;
    for (const rkv_param_spec* const* p = info.descriptor->params; *p; ++p)
      if (std::strcmp((*p)->name, w.name) == 0) spec = *p;
    ASSERT_NE(spec, nullptr);
    EXPECT_EQ(spec->type, w.type);
    ASSERT_NE(spec->doc, nullptr);
    EXPECT_GT(std::strlen(spec->doc), 10u);
    if (w.type == RKV_PARAM_INT) {
      EXPECT_EQ(spec->default_int, w.def_int);
      EXPECT_TRUE(spec->has_min && spec->has_max);
      EXPECT_LE(spec->min, double(w.def_int));
      EXPECT_GE(spec->max, double(w.def_int));
    }
    if (w.type == RKV_PARAM_CHOICE) {
      EXPECT_STREQ(spec->default_string, w.def_string);
      ASSERT_NE(spec->choices, nullptr);
    }
    if (w.type == RKV_PARAM_BOOL) {
      EXPECT_EQ(spec->default_bool, 0);
    }
  }
  // Out-of-range and unknown choices are refused before an instance exists; an even kernel by the plugin.
  const rkv::PluginInfo& snap = registry().resolve("snapkv", RKV_KIND_SCORER);
  EXPECT_THROW(rkv::ParamSet::validate(*snap.descriptor, {{"window", int64_t(0), false, "t"}}), rkv::InputError);
  EXPECT_THROW(rkv::ParamSet::validate(*snap.descriptor, {{"pooling", std::string("min"), false, "t"}}),
               rkv::InputError);
  rkv::HostServices host;
  try {
    rkv::PluginInstance::create(snap, rkv::ParamSet::validate(*snap.descriptor, {{"kernel", int64_t(4), false, "t"}}),
                                host);
    FAIL() << "an even kernel was accepted";
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("kernel must be odd"), std::string::npos) << e.what();
  }
}

/// A cache with k[h, p, 0] = 100 h + p, spare capacity 2.
rkv::LayerKV test_layer(int64_t Hkv, int64_t T, int64_t d) {
  rkv::LayerKV kv;
  kv.n_kv_heads = Hkv;
  kv.head_dim = d;
  kv.capacity = T + 2;
  kv.length = T;
  kv.k.assign(static_cast<size_t>(Hkv * kv.capacity * d), 0.5f);
  kv.v.assign(kv.k.size(), 0.25f);
  for (int64_t h = 0; h < Hkv; ++h)
    for (int64_t p = 0; p < T; ++p) kv.k_at(h, p)[0] = float(100 * h + p);
  return kv;
}

std::string run_bad(const std::string& mode) {
  const rkv::PluginInfo& info = registry().resolve("org.ripplekv.test.bad_scorer", RKV_KIND_SCORER);
  rkv::HostServices host;
  const rkv::PluginInstance inst = rkv::PluginInstance::create(
      info, rkv::ParamSet::validate(*info.descriptor, {{"mode", mode, false, "t"}}), host);
  try {
    const rkv::ScorerRequirements req = rkv::query_scorer_requirements(inst, kSmolLM2);
    rkv::LayerKV kv = test_layer(3, 6, 64);
    const rkv::LayerCompression r = rkv::compress_layer(inst, req, kv, {5, 9, 3, -1, nullptr, nullptr});
    // mode ok: scores = position, nothing protected -> the 3 most recent; the warning carries id and layer.
    EXPECT_EQ(std::vector<int64_t>(r.selection.head_positions(2), r.selection.head_positions(2) + 3),
              (std::vector<int64_t>{3, 4, 5}));
    EXPECT_EQ(r.warnings.size(), 1u);
    if (!r.warnings.empty()) {
      EXPECT_EQ(r.warnings[0], "scorer 'org.ripplekv.test.bad_scorer' (layer 5): bad_scorer says hello");
    }
    return "";
  } catch (const rkv::InputError& e) {
    return e.what();
  }
}

TEST(RunScorer, AcceptsAGoodScorerAndPassesContiguousKeys) { EXPECT_EQ(run_bad("ok"), ""); }

TEST(RunScorer, CompressesOnlyTheEligiblePrefixAndKeepsTheTail) {
  // 8 positions cached, T = 6 eligible: the scorer sees [3, 6, 64] keys (rows 100 h + p checked by the plugin);
  // scores = position -> b_l 3 keeps {3, 4, 5}, then the tail {6, 7}.
  const rkv::PluginInfo& info = registry().resolve("org.ripplekv.test.bad_scorer", RKV_KIND_SCORER);
  rkv::HostServices host;
  const rkv::PluginInstance inst = rkv::PluginInstance::create(info, rkv::ParamSet::validate(*info.descriptor, {}), host);
  const rkv::ScorerRequirements req = rkv::query_scorer_requirements(inst, kSmolLM2);
  rkv::LayerKV kv = test_layer(3, 8, 64);
  const rkv::LayerCompression r = rkv::compress_layer(inst, req, kv, {0, 9, 3, 6, nullptr, nullptr});
  EXPECT_EQ(r.selection.prefix_tokens, 6);
  EXPECT_EQ(kv.length, 5);
  for (int64_t h = 0; h < 3; ++h)
    for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(kv.k_at(h, i)[0], float(100 * h + 3 + i));
  // T beyond the cache is refused.
  rkv::LayerKV small = test_layer(3, 4, 64);
  EXPECT_THROW(rkv::compress_layer(inst, req, small, {0, 9, 2, 6, nullptr, nullptr}), rkv::InputError);
}

TEST(RunScorer, RejectsNonFiniteScoresNamingThePlugin) {
  for (const char* mode : {"nan", "inf"}) {
    const std::string m = run_bad(mode);
    EXPECT_NE(m.find("org.ripplekv.test.bad_scorer"), std::string::npos) << m;
    EXPECT_NE(m.find("non-finite score"), std::string::npos) << m;
    EXPECT_NE(m.find("KV head 1, position 2"), std::string::npos) << m;
  }
  // Scores left unwritten are caught the same way (the host pre-fills NaN).
  EXPECT_NE(run_bad("unwritten").find("non-finite score"), std::string::npos);
}

TEST(RunScorer, ReportsPluginFailuresAndBadRequirements) {
  const std::string fail = run_bad("fail");
  EXPECT_NE(fail.find("org.ripplekv.test.bad_scorer"), std::string::npos) << fail;
  EXPECT_NE(fail.find("deliberate failure"), std::string::npos) << fail;
  EXPECT_NE(run_bad("negative_window").find("negative requirements"), std::string::npos);
  EXPECT_NE(run_bad("unknown_stat").find("unknown statistics"), std::string::npos);
  EXPECT_NE(run_bad("negative_skip").find("query_skip -1"), std::string::npos);
  EXPECT_NE(run_bad("decode_moments").find("at decode time (a prefill-only statistic)"), std::string::npos);
  EXPECT_NE(run_bad("budget_bad").find("declared budget_dependent = 3"), std::string::npos);
}

TEST(RunScorer, PreRopeKeysAreTheCachedKeysTurnedBackByTheirStoredPositions) {
  // d = 2, one frequency 0.5: the key stored at position p = j + 5 is (1, 0) rotated by 0.5 p rad, i.e.
  // (cos 0.5p, sin 0.5p) (rotate_half with d = 2: x' = (x0 cos - x1 sin, x1 cos + x0 sin)). Turned back by its own
  // stored position it is (1, 0) again, so the pre_rope mode's score k0[0] + 10 k0[1] + 100 inv_freq[0] is 51.
  const rkv::PluginInfo& info = registry().resolve("org.ripplekv.test.bad_scorer", RKV_KIND_SCORER);
  rkv::HostServices host;
  const rkv::PluginInstance inst = rkv::PluginInstance::create(
      info, rkv::ParamSet::validate(*info.descriptor, {{"mode", std::string("pre_rope"), false, "t"}}), host);
  const rkv::ScorerRequirements req =
      rkv::query_scorer_requirements(inst, rkv_attention_shape{sizeof(rkv_attention_shape), 2, 2, 1, 2});
  rkv::LayerKV kv;
  kv.n_kv_heads = 1;
  kv.head_dim = 2;
  kv.capacity = kv.length = 7;
  for (int64_t j = 0; j < 7; ++j) {
    const double a = 0.5 * static_cast<double>(j + 5);
    kv.k.push_back(static_cast<float>(std::cos(a)));
    kv.k.push_back(static_cast<float>(std::sin(a)));
    kv.pos.push_back(static_cast<int32_t>(j + 5));
  }
  kv.v.assign(kv.k.size(), 0.0f);
  const std::vector<double> inv_freq = {0.5};
  rkv::ScorerCallInputs in;
  in.n_heads = 2;
  in.kv = &kv;
  EXPECT_THROW(rkv::run_scorer(inst, req, in), rkv::InputError);  // no RoPE frequencies: no pre-RoPE keys
  in.rope_inv_freq = &inv_freq;
  const rkv::ScoreResult r = rkv::run_scorer(inst, req, in);
  for (float s : r.scores) EXPECT_NEAR(s, 51.0f, 1e-5);
}

TEST(RunScorer, HeadBudgetsReachOnlyABudgetDependentScorer) {
  // ABI minor 6: the budget mode scores KV head g with head_budgets[g] at even positions, minus it at odd ones (-1
  // for head_budgets[g] when none is passed).
  const rkv::PluginInfo& info = registry().resolve("org.ripplekv.test.bad_scorer", RKV_KIND_SCORER);
  rkv::HostServices host;
  auto make = [&](const char* mode) {
    return rkv::PluginInstance::create(info, rkv::ParamSet::validate(*info.descriptor, {{"mode", std::string(mode), false, "t"}}),
                                       host);
  };
  const rkv::PluginInstance dependent = make("budget"), undeclared = make("budget_undeclared");
  const rkv::ScorerRequirements req = rkv::query_scorer_requirements(dependent, kSmolLM2);
  const rkv::ScorerRequirements req_u = rkv::query_scorer_requirements(undeclared, kSmolLM2);
  EXPECT_TRUE(req.budget_dependent);
  EXPECT_FALSE(req_u.budget_dependent);
  rkv::LayerKV kv = test_layer(3, 6, 64);
  rkv::ScorerCallInputs in;
  in.n_heads = 9;
  in.kv = &kv;
  auto head_scores = [](const rkv::ScoreResult& r) {
    return std::vector<float>{r.scores[0], r.scores[6], r.scores[12]};
  };
  EXPECT_EQ(head_scores(rkv::run_scorer(dependent, req, in)), (std::vector<float>{-1, -1, -1}));  // budget-free
  const std::vector<int64_t> budgets = {2, 6, 0};
  in.head_budgets = &budgets;
  EXPECT_EQ(head_scores(rkv::run_scorer(dependent, req, in)), (std::vector<float>{2, 6, 0}));
  EXPECT_EQ(head_scores(rkv::run_scorer(undeclared, req_u, in)), (std::vector<float>{-1, -1, -1}));  // not passed
  for (const std::vector<int64_t>& bad : {std::vector<int64_t>{2, 3}, std::vector<int64_t>{2, 7, 1},
                                          std::vector<int64_t>{-1, 2, 2}}) {
    in.head_budgets = &bad;
    EXPECT_THROW(rkv::run_scorer(dependent, req, in), rkv::InputError);
  }
  // compress_layer passes b_l as every head's budget: scores 3 at even positions, -3 at odd ones, so the host keeps
  // {0, 2, 4} (without budgets the scores would be -1 / +1 and it would keep {1, 3, 5}).
  const rkv::LayerCompression r = rkv::compress_layer(dependent, req, kv, {0, 9, 3, -1, nullptr, nullptr});
  EXPECT_EQ(std::vector<int64_t>(r.selection.head_positions(0), r.selection.head_positions(0) + 3),
            (std::vector<int64_t>{0, 2, 4}));
}

TEST(RunScorer, RequestedStatisticsMustBePresent) {
  const rkv::PluginInfo& info = registry().resolve("snapkv", RKV_KIND_SCORER);
  rkv::HostServices host;
  const rkv::PluginInstance inst = rkv::PluginInstance::create(info, rkv::ParamSet::validate(*info.descriptor, {}), host);
  const rkv::ScorerRequirements req = rkv::query_scorer_requirements(inst, kSmolLM2);
  rkv::LayerKV kv = test_layer(3, 40, 64);
  rkv::ScorerCallInputs in;
  in.layer = 2;
  in.n_heads = 9;
  in.kv = &kv;
  EXPECT_THROW(rkv::run_scorer(inst, req, in), rkv::InputError);  // no statistics at all
  rkv::AttentionStats wrong;
  wrong.n_heads = 9;
  wrong.prefix_tokens = 40;
  wrong.window = 8;  // snapkv asked for 32
  wrong.window_attention.assign(9 * 40, 0.0f);
  in.stats = &wrong;
  EXPECT_THROW(rkv::run_scorer(inst, req, in), rkv::InputError);
  wrong.window = 32;
  EXPECT_NO_THROW(rkv::run_scorer(inst, req, in));
}

}  // namespace
