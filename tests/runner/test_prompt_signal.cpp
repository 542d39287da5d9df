// A per-prompt signal in the compression pipeline (ABI minor 7; runner/compress/score_memo.hpp prompt_profile,
// runner/compress/cell.hpp): on seeded synthetic models, with the built-in CAKE signal and allocator.
//  - ScoreMemo::prompt_profile calls the signal on every layer with the inputs a scorer of the same requirements gets
//    (the backend's layer and the prefill's window queries, the layer's sliding window), once per signal: the same
//    values as a direct call built here, bit for bit; two prompts give two profiles.
//  - compress_cell with a per-prompt signal hands that profile (over A) to the allocator: the cell's budgets are the
//    allocator's own answer on it, and the cell records the profile.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "cache/attention_stats.hpp"
#include "common/plugin_fixture.hpp"
#include "model/synthetic_model.hpp"
#include "plugin/allocator_call.hpp"
#include "plugin/prompt_signal_call.hpp"
#include "core/errors.hpp"
#include "runner/compress/cell.hpp"
#include "runner/compress/chunked_prefill.hpp"

namespace {

std::vector<int32_t> tokens(int64_t T, int32_t salt) {
  std::vector<int32_t> t(static_cast<size_t>(T));
  for (int64_t i = 0; i < T; ++i) t[static_cast<size_t>(i)] = static_cast<int32_t>((i * 13 + salt) % 40);
  return t;
}

rkv::UserParam P(const char* k, rkv::ParamValue v) { return rkv::UserParam{k, std::move(v), false, "test"}; }

/// Per-prompt signal `id` with `params` as a ScorerUse keyed `key` (what ScorerSet::add_cell makes of one).
rkv::ScorerUse signal_use(rkv_test::PluginFixture& plugins, const char* id, std::vector<rkv::UserParam> params,
                          const rkv::ModelConfig& c, const char* key) {
  rkv::ScorerUse use;
  use.instance = &plugins.instance(id, RKV_KIND_SIGNAL, std::move(params));
  use.requirements = rkv::query_scorer_requirements(
      *use.instance, rkv_attention_shape{sizeof(rkv_attention_shape), c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim});
  use.key = key;
  return use;
}

/// The cake signal with window 8.
rkv::ScorerUse cake_use(rkv_test::PluginFixture& plugins, const rkv::ModelConfig& c) {
  return signal_use(plugins, "cake", {P("window", int64_t{8})}, c, "cake");
}

/// s_l by a direct call: the backend's layer, the last 8 prefill queries, the layer's sliding window.
double direct(rkv::Backend& be, const rkv::PrefilledPrompt& prompt, const rkv::ScorerUse& cake, int64_t l) {
  const rkv::ModelConfig& c = be.model().config;
  const rkv::LayerKV kv = be.download_layer(*prompt.cache, l);
  const std::vector<float> wq =
      rkv::window_queries(rkv::QueriesView{prompt.queries[static_cast<size_t>(l)].data(), c.n_heads, prompt.n_queries,
                                           c.head_dim}, 8);
  rkv::ScorerCallInputs in;
  in.layer = l;
  in.n_heads = c.n_heads;
  in.kv = &kv;
  in.window_queries = &wq;
  in.rope_inv_freq = &be.model().layer_inv_freq(l);
  in.attention_window = c.layer_window(l);
  return rkv::run_prompt_signal(*cake.instance, cake.requirements, in).value;
}

TEST(PromptSignal, TheMemoCallsTheSignalOnEveryLayerWithItsInputs) {
  // llama (full attention) and gemma3 (window 16 on layers l % 3 < 2, T = 40 > 16: the window masks keys).
  for (const char* arch : {"llama", "gemma3"}) {
    SCOPED_TRACE(arch);
    const rkv::Model model = rkv::synthetic_model(rkv::synthetic_config(arch, 4, 2, 8, 3), 21);
    const rkv::ModelConfig& c = model.config;
    auto be = rkv::make_backend("cpu", model);
    rkv_test::PluginFixture plugins;
    const rkv::ScorerUse cake = cake_use(plugins, c);
    std::vector<std::vector<double>> profiles;
    for (int32_t salt : {3, 17}) {
      const rkv::PrefilledPrompt prompt = rkv::prefill_prompt(*be, tokens(40, salt), rkv::prefill_needs({&cake}));
      rkv::ScoreMemo memo;
      const std::vector<double>& s = memo.prompt_profile(*be, prompt, cake);
      ASSERT_EQ(s.size(), static_cast<size_t>(c.n_layers));
      EXPECT_EQ(&s, &memo.prompt_profile(*be, prompt, cake));  // once per signal and prompt
      for (int64_t l = 0; l < c.n_layers; ++l) {
        EXPECT_EQ(s[static_cast<size_t>(l)], direct(*be, prompt, cake, l)) << "layer " << l;
        EXPECT_GT(s[static_cast<size_t>(l)], 0.0) << "layer " << l;
      }
      profiles.push_back(s);
    }
    EXPECT_NE(profiles[0], profiles[1]);  // per prompt
  }
}

TEST(PromptSignal, ACellAllocatesByItsPromptsProfile) {
  const rkv::Model model = rkv::synthetic_model(rkv::synthetic_config("llama", 4, 2, 8, 3), 21);
  const rkv::ModelConfig& c = model.config;
  auto be = rkv::make_backend("cpu", model);
  rkv_test::PluginFixture plugins;
  const rkv::ScorerUse cake = cake_use(plugins, c);
  const rkv::ScorerUse snap = plugins.scorer("snapkv", {P("window", int64_t{4})}, c, "snap");
  static const rkv::PluginRegistry reg = rkv::PluginRegistry::discover();
  const rkv::PluginInfo& alloc_info = reg.resolve("cake", RKV_KIND_ALLOCATOR);
  rkv::CellConfig cell;
  cell.allocator = rkv::PluginChoice{alloc_info.id(), &alloc_info, rkv::ParamSet::validate(*alloc_info.descriptor, {}),
                                     nullptr};
  cell.budget_fraction = 0.3;
  cell.uses_profile = cell.per_prompt_signal = true;
  rkv::HostServices host;
  rkv::InstancePool pool(host);
  const rkv::LayerScorers scorers(snap);
  rkv::CellSetting setting;
  setting.cell = &cell;
  setting.scorers = &scorers;
  setting.instances = &pool;
  setting.prompt_signal = &cake;
  setting.layers_A = {0, 1, 2};
  const int64_t T = 40;
  const rkv::PrefilledPrompt prompt = rkv::prefill_prompt(*be, tokens(T, 3), rkv::prefill_needs({&snap, &cake}));
  rkv::ScoreMemo memo;
  const rkv::CellCompression out = rkv::compress_cell(*be, prompt, memo, setting);
  const std::vector<double>& s = memo.prompt_profile(*be, prompt, cake);
  EXPECT_EQ(out.prompt_profile, s);
  // B = round(0.3 x 3 x 40) = 36; snapkv(window 4) protects 4 per layer: b_l = 4 + s_l / sum s x 24, integerised.
  const rkv::Allocation want = rkv::run_allocator(pool.get(*cell.allocator), s, 36, T, 3, 4);
  EXPECT_EQ(out.comp.budgets, want.budgets);
  EXPECT_EQ(out.budget_total, 36);
  bool differ_from_uniform = false;
  for (int64_t b : want.budgets) differ_from_uniform |= b != 12;
  EXPECT_TRUE(differ_from_uniform);
}

TEST(PromptSignal, SqueezeAttentionReadsThePrefillsResidualCosine) {
  // s_l = 1 - the mean over the prompt of the prefill's residual cosine of layer l (RKV_STAT_RESIDUAL_COSINE, which
  // the prefill computes because the signal joined its needs); a chunked prefill refuses it by name.
  for (const char* arch : {"llama", "gemma3"}) {
    SCOPED_TRACE(arch);
    const rkv::Model model = rkv::synthetic_model(rkv::synthetic_config(arch, 4, 2, 8, 3), 21);
    const rkv::ModelConfig& c = model.config;
    auto be = rkv::make_backend("cpu", model);
    rkv_test::PluginFixture plugins;
    const rkv::ScorerUse squeeze = signal_use(plugins, "squeezeattention", {}, c, "squeeze");
    const rkv::PrefillNeeds needs = rkv::prefill_needs({&squeeze});
    ASSERT_EQ(needs.stats.size(), 1u);
    EXPECT_TRUE(needs.stats[0].residual_cosine);
    const rkv::PrefilledPrompt prompt = rkv::prefill_prompt(*be, tokens(40, 3), needs);
    rkv::ScoreMemo memo;
    const std::vector<double>& s = memo.prompt_profile(*be, prompt, squeeze);
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const std::vector<float>& cos = prompt.find_stats(needs.stats[0], l)->residual_cosine;
      ASSERT_EQ(cos.size(), 40u);
      double mean = 0.0;
      for (float x : cos) mean += x / 40.0;
      EXPECT_NEAR(s[static_cast<size_t>(l)], 1.0 - mean, 1e-12) << "layer " << l;
    }
    try {
      rkv::chunked_prefill_prompt(*be, tokens(40, 3), needs, 16);
      ADD_FAILURE() << "a chunked prefill computed the residual cosine";
    } catch (const rkv::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("prefill.chunk_tokens = 16"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
