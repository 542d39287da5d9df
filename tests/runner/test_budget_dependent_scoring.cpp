// A budget-dependent scorer in the compression pipeline (ABI minor 6; runner/compress/score_memo.hpp,
// compress_prompt.hpp) on a seeded synthetic model, with the built-in criticalkv (inner knorm, so the budget-free
// ranking e = -||k|| is known without the plugin):
//  - ScoreMemo without budgets returns e itself; with head budgets b it returns FLT_MAX on each head's top
//    max(1, floor(b first_stage_ratio)) positions of e and (e + epsilon) m elsewhere, with m the group mean of the
//    backend's own ||W_o v||_1, and it memoizes each budget separately;
//  - compress_prompt passes the budgets its selection keeps: with first_stage_ratio 1 every head keeps its top b of e,
//    with 0 its top b of (e + epsilon) m, predictions made here from e and the norms, not from the plugin.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <memory>
#include <numeric>

#include "backend/backend.hpp"
#include "common/plugin_fixture.hpp"
#include "model/synthetic_model.hpp"
#include "cache/attention_stats.hpp"
#include "runner/compress/compress_prompt.hpp"

namespace {

/// Three layers, H = 4 query heads over H_kv = 2 KV heads, d = 8.
const rkv::Model& model() {
  static const rkv::Model m = rkv::synthetic_model(rkv::synthetic_config("llama", 4, 2, 8, 3), 21);
  return m;
}

constexpr int64_t kT = 40;

std::vector<int32_t> tokens() {
  std::vector<int32_t> t(static_cast<size_t>(kT));
  for (int64_t i = 0; i < kT; ++i) t[static_cast<size_t>(i)] = static_cast<int32_t>((i * 13 + 3) % 40);
  return t;
}

/// e[g, j] = -||k_j||_2 of the cached key, and m[g, j] = the mean over head g's group of ||W_o v_j||_1.
struct Parts {
  std::vector<double> e, m;
};

Parts parts(rkv::Backend& be, const rkv::BackendCache& cache, int64_t layer) {
  const rkv::ModelConfig& c = model().config;
  const rkv::LayerKV kv = be.download_layer(cache, layer);
  const std::vector<float> n = be.value_output_norms(cache, layer);
  const int64_t Hkv = c.n_kv_heads, G = c.n_heads / Hkv, d = c.head_dim;
  Parts p;
  for (int64_t g = 0; g < Hkv; ++g)
    for (int64_t j = 0; j < kT; ++j) {
      double ss = 0.0, mean = 0.0;
      for (int64_t i = 0; i < d; ++i) ss += double(kv.k_at(g, j)[i]) * kv.k_at(g, j)[i];
      for (int64_t h = g * G; h < (g + 1) * G; ++h) mean += n[static_cast<size_t>(h * kT + j)];
      p.e.push_back(-std::sqrt(ss));
      p.m.push_back(mean / static_cast<double>(G));
    }
  return p;
}

/// The `b` positions of row g of `s` [H_kv, T] with the highest values (ties to the earlier), ascending.
std::vector<int64_t> top(const std::vector<double>& s, int64_t g, int64_t b) {
  std::vector<int64_t> idx(static_cast<size_t>(kT));
  std::iota(idx.begin(), idx.end(), int64_t{0});
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t c) { return s[static_cast<size_t>(g * kT + a)] > s[static_cast<size_t>(g * kT + c)]; });
  idx.resize(static_cast<size_t>(b));
  std::sort(idx.begin(), idx.end());
  return idx;
}

rkv::UserParam P(const char* k, rkv::ParamValue v) { return rkv::UserParam{k, std::move(v), false, "test"}; }

TEST(BudgetDependentScoring, TheMemoScoresEachBudgetWithBothStages) {
  rkv_test::PluginFixture plugins;
  const rkv::ModelConfig& c = model().config;
  auto be = rkv::make_backend("cpu", model());
  const rkv::ScorerUse crit = plugins.scorer(
      "criticalkv", {P("inner", std::string("knorm")), P("epsilon", 0.5), P("first_stage_ratio", 0.5)}, c, "crit");
  ASSERT_TRUE(crit.requirements.budget_dependent);
  const rkv::PrefilledPrompt prompt = rkv::prefill_prompt(*be, tokens(), rkv::prefill_needs({&crit}));
  rkv::ScoreMemo memo;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const Parts p = parts(*be, *prompt.cache, l);
    const std::vector<float>& free = memo.scores(*be, prompt, crit, l).scores;
    for (size_t i = 0; i < free.size(); ++i) EXPECT_NEAR(free[i], p.e[i], 1e-5 * std::fabs(p.e[i])) << "layer " << l;
    const std::vector<int64_t> b7 = {7, 7}, b12 = {12, 3};
    const rkv::ScoreResult& s7 = memo.scores(*be, prompt, crit, l, &b7);
    const rkv::ScoreResult& s12 = memo.scores(*be, prompt, crit, l, &b12);
    EXPECT_NE(&s7, &s12);
    EXPECT_EQ(&s7, &memo.scores(*be, prompt, crit, l, &b7));  // memoized per budget
    for (const auto& [budgets, scores] : {std::pair{b7, &s7}, std::pair{b12, &s12}})
      for (int64_t g = 0; g < c.n_kv_heads; ++g) {
        const int64_t s1 = std::max<int64_t>(1, budgets[static_cast<size_t>(g)] / 2);  // floor(b 0.5)
        const std::vector<int64_t> stage1 = top(p.e, g, s1);
        for (int64_t j = 0; j < kT; ++j) {
          const size_t i = static_cast<size_t>(g * kT + j);
          const float got = scores->scores[i];
          if (std::binary_search(stage1.begin(), stage1.end(), j)) {
            EXPECT_EQ(got, FLT_MAX) << "layer " << l << ", head " << g << ", position " << j;
          } else {
            const double want = (p.e[i] + 0.5) * p.m[i];
            EXPECT_NEAR(got, want, 1e-5 * std::max(1.0, std::fabs(want))) << "layer " << l << ", position " << j;
          }
        }
      }
  }
}

TEST(BudgetDependentScoring, CompressPromptPassesTheBudgetsItKeeps) {
  const rkv::ModelConfig& c = model().config;
  auto be = rkv::make_backend("cpu", model());
  const std::vector<int64_t> A = {0, 1, 2}, budgets = {9, 14, 5};
  int64_t rankings_differ = 0;  // (layer, head) pairs where the two predictions differ: the test can tell them apart
  for (const double ratio : {1.0, 0.0}) {
    SCOPED_TRACE("first_stage_ratio " + std::to_string(ratio));
    rkv_test::PluginFixture plugins;
    const rkv::ScorerUse crit = plugins.scorer(
        "criticalkv", {P("inner", std::string("knorm")), P("epsilon", 0.5), P("first_stage_ratio", ratio)}, c, "crit");
    const rkv::PrefilledPrompt prompt = rkv::prefill_prompt(*be, tokens(), rkv::prefill_needs({&crit}));
    rkv::ScoreMemo memo;
    const rkv::CompressedPrompt out = rkv::compress_prompt(*be, prompt, crit, A, budgets, memo);
    for (int64_t l : A) {
      const Parts p = parts(*be, *prompt.cache, l);
      std::vector<double> stage2(p.e.size());
      for (size_t i = 0; i < stage2.size(); ++i) stage2[i] = (p.e[i] + 0.5) * p.m[i];
      const rkv::LayerKV kept = be->download_layer(*out.cache, l);
      for (int64_t g = 0; g < c.n_kv_heads; ++g) {
        std::vector<int64_t> got;
        for (int64_t i = 0; i < kept.head_length(g); ++i) got.push_back(*kept.pos_at(g, i));
        const int64_t b = budgets[static_cast<size_t>(l)];
        EXPECT_EQ(got, top(ratio == 1.0 ? p.e : stage2, g, b)) << "layer " << l << ", KV head " << g;
        rankings_differ += top(p.e, g, b) != top(stage2, g, b) ? 1 : 0;
      }
    }
  }
  EXPECT_GE(rankings_differ, 4);
}

TEST(BudgetDependentScoring, ASlidingLayersScorerIsToldItsWindow) {
  // gemma3 synthetic: window 16 on layers l % 3 < 2. The memo passes each layer's window (0 on the global layer 2),
  // so defensivekv, which computes its own window attention, masks what a sliding layer's queries do not see: its
  // memo scores equal a direct call with attention_window 16 and differ from one with 0 (full attention).
  const rkv::Model g = rkv::synthetic_model(rkv::synthetic_config("gemma3", 4, 2, 16, 3), 8);
  rkv_test::PluginFixture plugins;
  auto be = rkv::make_backend("cpu", g);
  const rkv::ScorerUse dk = plugins.scorer("defensivekv", {P("window", int64_t{4})}, g.config, "dk");
  std::vector<int32_t> t(48);
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>((i * 7 + 1) % 40);
  const rkv::PrefilledPrompt prompt = rkv::prefill_prompt(*be, t, rkv::prefill_needs({&dk}));
  rkv::ScoreMemo memo;
  for (int64_t l = 0; l < g.config.n_layers; ++l) {
    const rkv::LayerKV kv = be->download_layer(*prompt.cache, l);
    const rkv::QueriesView qv{prompt.queries[static_cast<size_t>(l)].data(), g.config.n_heads, prompt.n_queries,
                              g.config.head_dim};
    const std::vector<float> wq = rkv::window_queries(qv, 4);
    const std::vector<float> norms = be->value_output_norms(*prompt.cache, l);
    rkv::ScorerCallInputs in;
    in.layer = l;
    in.n_heads = g.config.n_heads;
    in.kv = &kv;
    in.window_queries = &wq;
    in.value_output_norms = &norms;
    in.rope_inv_freq = &g.layer_inv_freq(l);
    const std::vector<float> full = rkv::run_scorer(*dk.instance, dk.requirements, in).scores;
    in.attention_window = 16;
    const std::vector<float> windowed = rkv::run_scorer(*dk.instance, dk.requirements, in).scores;
    const std::vector<float>& got = memo.scores(*be, prompt, dk, l).scores;
    EXPECT_EQ(g.config.layer_window(l), l % 3 < 2 ? 16 : 0);
    EXPECT_EQ(got, g.config.is_sliding(l) ? windowed : full) << "layer " << l;
    EXPECT_NE(windowed, full) << "layer " << l;  // T = 48 > 16: the window hides keys
  }
}

}  // namespace
