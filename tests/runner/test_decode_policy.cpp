// The decode policies (runner/decode/policy.hpp) on the CPU backend and a seeded synthetic model: the worked examples
// of the header by hand, the bound every policy keeps after every token, and periodic re-scoring through the real
// scorer plugins.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "cache/selection.hpp"
#include "core/cancel.hpp"
#include "core/errors.hpp"
#include "model/synthetic_model.hpp"
#include "common/plugin_fixture.hpp"
#include "runner/compress/compress_prompt.hpp"
#include "runner/decode/policy.hpp"
#include "runner/decode/loop.hpp"

namespace {

/// One layer, H = H_kv = 1 (so a head's accumulated attention is its KV head's), d = 8.
const rkv::Model& one_head_model() {
  static const rkv::Model m = rkv::synthetic_model(rkv::synthetic_config("llama", 1, 1, 8, 1), 3);
  return m;
}

/// Two layers, H = 4 query heads over H_kv = 2 KV heads (GQA group of 2), d = 8.
const rkv::Model& gqa_model() {
  static const rkv::Model m = rkv::synthetic_model(rkv::synthetic_config("llama", 4, 2, 8, 2), 11);
  return m;
}

std::vector<int32_t> tokens(int64_t n, int64_t salt = 0) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = static_cast<int32_t>((i * 17 + 5 + salt) % 40);
  return t;
}

/// A selection keeping `positions` in every KV head of `layer` (uniform).
rkv::Selection keep_uniform(int64_t layer, int64_t n_kv_heads, int64_t T, const std::vector<int64_t>& positions) {
  rkv::Selection sel;
  sel.layer = layer;
  sel.n_kv_heads = n_kv_heads;
  sel.prefix_tokens = T;
  sel.budget = sel.kept = static_cast<int64_t>(positions.size());
  for (int64_t h = 0; h < n_kv_heads; ++h) sel.positions.insert(sel.positions.end(), positions.begin(), positions.end());
  return sel;
}

std::vector<int32_t> head_positions(rkv::Backend& be, const rkv::BackendCache& cache, int64_t layer, int64_t head) {
  const rkv::LayerKV kv = be.download_layer(cache, layer);
  return std::vector<int32_t>(kv.pos_at(head, 0), kv.pos_at(head, 0) + kv.head_length(head));
}

rkv::DecodeSpec spec_of(const std::string& policy) {
  rkv::DecodeSpec s;
  s.policy = policy;
  return s;
}

// The header's rolling example: b = 6, sinks = 2, kept [0, 1, 7, 8, 9, 11] of T = 12; after the tokens at 12 and 13
// the head holds [0, 1, 9, 11, 12, 13].
TEST(DecodePolicy, RollingWorkedExample) {
  auto be = rkv::make_backend("cpu", one_head_model());
  const rkv::PrefillResult r = be->prefill(tokens(12), {});
  be->compact_layer(*r.cache, 0, keep_uniform(0, 1, 12, {0, 1, 7, 8, 9, 11}));
  rkv::DecodeSpec spec = spec_of("rolling");
  spec.sinks = 2;
  const rkv::DecodePolicy rolling(spec, {6});
  const auto session = rolling.begin(*be, *r.cache, nullptr);
  rkv::continuation_logits(*be, {3, 4}, 12, *r.cache, session.get());
  EXPECT_EQ(head_positions(*be, *r.cache, 0, 0), (std::vector<int32_t>{0, 1, 9, 11, 12, 13}));
}

// The header's h2o example: b = 4, recent = 2, a head holding [0, 3, 5, 7] (of T = 8) with accumulated attention
// [2.0, 0.1, 0.5, 0.3] from the prompt; the token at 8 attends [0.5, 0.1, 0.1, 0.2, 0.1] -> a = [2.5, 0.2, 0.6, 0.5,
// 0.1]; the recent 7 and 8 stay, and of [0, 3, 5] the two largest (0 and 5): [0, 5, 7, 8]. The observation is given
// by hand (after_token() reads only what the capture holds), so the expectation does not depend on the model.
TEST(DecodePolicy, H2oWorkedExample) {
  auto be = rkv::make_backend("cpu", one_head_model());
  const rkv::PrefillResult r = be->prefill(tokens(8), {});
  be->compact_layer(*r.cache, 0, keep_uniform(0, 1, 8, {0, 3, 5, 7}));
  rkv::AttentionStats prompt;
  prompt.n_heads = 1;
  prompt.prefix_tokens = 8;
  prompt.cumulative_attention = {2.0f, 9.0f, 9.0f, 0.1f, 9.0f, 0.5f, 9.0f, 0.3f};  // positions 1, 2, 4, 6 evicted
  const std::vector<rkv::AttentionStats> stats = {prompt};
  rkv::DecodeSpec spec = spec_of("h2o");
  spec.recent = 2;
  const rkv::DecodePolicy h2o(spec, {4});
  EXPECT_TRUE(h2o.capture().attention_mass);
  EXPECT_TRUE(rkv::decode_needs_prompt_cumulative(spec, rkv::ScorerRequirements{}));
  const auto session = h2o.begin(*be, *r.cache, &stats);
  be->extend(*r.cache, {7}, 8, rkv::LogitsFor::Last);
  rkv::ExtendObservation seen;
  seen.attention_mass = {{0.5f, 0.1f, 0.1f, 0.2f, 0.1f}};
  session->after_token(*be, *r.cache, seen, 8);
  EXPECT_EQ(head_positions(*be, *r.cache, 0, 0), (std::vector<int32_t>{0, 5, 7, 8}));
  // The next token: a = [2.5, 0.6, 0.5, 0.1] + [0, 0, 0.05, 0.15, 0.8]; recent 8, 9; of [0, 5, 7] (2.5, 0.6, 0.55):
  // 0 and 5.
  be->extend(*r.cache, {9}, 9, rkv::LogitsFor::Last);
  seen.attention_mass = {{0.0f, 0.0f, 0.05f, 0.15f, 0.8f}};
  session->after_token(*be, *r.cache, seen, 9);
  EXPECT_EQ(head_positions(*be, *r.cache, 0, 0), (std::vector<int32_t>{0, 5, 8, 9}));
  // A missing observation is an error naming what is missing, not a crash.
  be->extend(*r.cache, {9}, 10, rkv::LogitsFor::Last);
  try {
    session->after_token(*be, *r.cache, rkv::ExtendObservation{}, 10);
    FAIL() << "no attention mass accepted";
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("attention mass"), std::string::npos) << e.what();
  }
  EXPECT_THROW(h2o.begin(*be, *r.cache, nullptr), rkv::InputError);  // h2o needs the prompt's statistics
}

// With compression.rerotate the cache stores positions 0 .. n - 1, so the prompt positions recorded before the
// re-rotation (CompressedPrompt::prompt_positions) seed the accumulated attention: the example above, re-rotated,
// keeps what it kept before ([0, 5, 7, 8] stored as [0, 2, 3, 4]); seeded from the stored positions instead it would
// read positions 1 and 2 (9.0 each) and keep [1, 2, 3, 4].
TEST(DecodePolicy, H2oSeedsFromThePromptPositionsRecordedBeforeReRotation) {
  auto be = rkv::make_backend("cpu", one_head_model());
  rkv::AttentionStats prompt;
  prompt.n_heads = 1;
  prompt.prefix_tokens = 8;
  prompt.cumulative_attention = {2.0f, 9.0f, 9.0f, 0.1f, 9.0f, 0.5f, 9.0f, 0.3f};
  const std::vector<rkv::AttentionStats> stats = {prompt};
  rkv::DecodeSpec spec = spec_of("h2o");
  spec.recent = 2;
  const rkv::DecodePolicy h2o(spec, {4});
  const std::vector<std::vector<int32_t>> recorded = {{0, 3, 5, 7}};
  for (const bool with_record : {true, false}) {
    const rkv::PrefillResult r = be->prefill(tokens(8), {});
    be->compact_layer(*r.cache, 0, keep_uniform(0, 1, 8, {0, 3, 5, 7}));
    be->rerotate_layer(*r.cache, 0);
    ASSERT_EQ(head_positions(*be, *r.cache, 0, 0), (std::vector<int32_t>{0, 1, 2, 3}));
    const auto session = h2o.begin(*be, *r.cache, &stats, with_record ? &recorded : nullptr);
    be->extend(*r.cache, {7}, 4, rkv::LogitsFor::Last);  // the next token at the cache length
    rkv::ExtendObservation seen;
    seen.attention_mass = {{0.5f, 0.1f, 0.1f, 0.2f, 0.1f}};
    session->after_token(*be, *r.cache, seen, 4);
    EXPECT_EQ(head_positions(*be, *r.cache, 0, 0),
              with_record ? (std::vector<int32_t>{0, 2, 3, 4}) : (std::vector<int32_t>{1, 2, 3, 4}));
  }
  const std::vector<std::vector<int32_t>> short_record = {{0, 3}};
  const rkv::PrefillResult r = be->prefill(tokens(8), {});
  be->compact_layer(*r.cache, 0, keep_uniform(0, 1, 8, {0, 3, 5, 7}));
  EXPECT_THROW(h2o.begin(*be, *r.cache, &stats, &short_record), rkv::InputError);
}

// Under GQA, H2O ranks an entry by its accumulated attention summed over the group's query heads: with the real
// attention of the model (ExtendCapture), every head of every layer stays within its budget after every token, keeps
// its `recent` newest entries (each decoded token among them), and the total held is exactly the budgets' sum.
TEST(DecodePolicy, H2oKeepsEveryHeadWithinItsBudgetUnderGqa) {
  const rkv::ModelConfig& c = gqa_model().config;
  auto be = rkv::make_backend("cpu", gqa_model());
  rkv::PrefillRequest req;
  rkv::AttentionStatsOptions cumulative;
  cumulative.cumulative_attention = true;
  req.stats.push_back(cumulative);
  const int64_t T = 30;
  const rkv::PrefillResult r = be->prefill(tokens(T), req);
  const std::vector<int64_t> heads = {7, 10};
  std::vector<float> scores(static_cast<size_t>(c.n_kv_heads * T));
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = float((i * 19) % 37);
  for (int64_t l = 0; l < c.n_layers; ++l)
    be->compact_layer(*r.cache, l, rkv::select_positions_per_head(scores.data(), c.n_kv_heads, T, heads, {1, 2}, l));
  rkv::DecodeSpec spec = spec_of("h2o");  // recent = -1: half of each head's budget (3 and 5)
  const rkv::DecodePolicy h2o(spec, std::vector<int64_t>(2, T), std::vector<std::vector<int64_t>>(2, heads));
  const auto session = h2o.begin(*be, *r.cache, &r.stats[0]);
  for (int64_t s = 0; s < 20; ++s) {
    rkv::continuation_logits(*be, {static_cast<int32_t>(s % 40)}, T + s, *r.cache, session.get());
    for (int64_t l = 0; l < c.n_layers; ++l)
      for (int64_t h = 0; h < c.n_kv_heads; ++h) {
        const int64_t b = heads[static_cast<size_t>(h)];
        ASSERT_EQ(r.cache->head_length(l, h), b) << "step " << s << " layer " << l << " head " << h;
        ASSERT_EQ(h2o.head_limit(l, h, b), b);
        const std::vector<int32_t> pos = head_positions(*be, *r.cache, l, h);
        ASSERT_TRUE(std::is_sorted(pos.begin(), pos.end()));
        for (int64_t i = 0; i < b / 2 && i <= s; ++i)  // the newest decoded tokens are always held
          EXPECT_EQ(pos[static_cast<size_t>(b - 1 - i)], T + s - i) << "step " << s;
      }
  }
  EXPECT_EQ(r.cache->bytes_in_use(), static_cast<size_t>(c.n_layers * (7 + 10)) * (2 * 8 * 4 + 4));
}

// Periodic re-scoring through the real plugins (build/lib/ripplekv/plugins).
class PeriodicDecode : public ::testing::Test {
 protected:
  rkv::ScorerUse scorer(const std::string& id, std::vector<rkv::UserParam> params = {}) {
    return plugins_.scorer(id, std::move(params), gqa_model().config);
  }
  rkv_test::PluginFixture plugins_;
};

// With the streamingllm scorer (sinks protected, score = cache index) a periodic compression keeps exactly what
// rolling would: the first 2 entries and the most recent target - 2. interval = 4, target = 6: after tokens 4 and 8
// each head holds 6; in between it grows to at most 6 + 4 - 1 = 9 (head_limit).
TEST_F(PeriodicDecode, WithStreamingLlmKeepsSinksAndRecentEveryInterval) {
  const rkv::ModelConfig& c = gqa_model().config;
  auto be = rkv::make_backend("cpu", gqa_model());
  const int64_t T = 20;
  const rkv::PrefillResult r = be->prefill(tokens(T), {});
  for (int64_t l = 0; l < c.n_layers; ++l)
    be->compact_layer(*r.cache, l, keep_uniform(l, c.n_kv_heads, T, {0, 1, 15, 17, 18, 19}));
  const rkv::ScorerUse st = scorer("streamingllm", {{"sinks", int64_t(2), false, "t"}});
  rkv::DecodeSpec spec = spec_of("periodic");
  spec.interval = 4;
  spec.target = 6;
  const rkv::DecodePolicy periodic(spec, std::vector<int64_t>(2, 6), {}, &st);
  EXPECT_FALSE(periodic.capture().attention_mass);
  EXPECT_FALSE(periodic.capture().queries);
  const auto session = periodic.begin(*be, *r.cache, nullptr);
  for (int64_t s = 0; s < 8; ++s) {
    rkv::continuation_logits(*be, {static_cast<int32_t>(s)}, T + s, *r.cache, session.get());
    const int64_t want = (s + 1) % 4 == 0 ? 6 : 6 + (s + 1) % 4;
    for (int64_t l = 0; l < c.n_layers; ++l)
      for (int64_t h = 0; h < c.n_kv_heads; ++h) {
        ASSERT_EQ(r.cache->head_length(l, h), want) << "step " << s;
        ASSERT_LE(want, periodic.head_limit(l, h, 6));
      }
  }
  EXPECT_EQ(periodic.head_limit(0, 0, 6), 9);
  EXPECT_EQ(head_positions(*be, *r.cache, 1, 1), (std::vector<int32_t>{0, 1, T + 4, T + 5, T + 6, T + 7}));
}

// With snapkv (window attention of the tokens decoded since the last compression, window 3 protected as recent):
// after each compression every head holds its target, keeps its 3 newest entries, and the result is the same
// whether the window attention comes from the scorer's decode path or is recomputed here from the captured
// attention mass of those tokens (nothing is evicted between compressions, so a past token's attention over the
// entries then held is exactly the decode-time window attention).
TEST_F(PeriodicDecode, WithSnapKvUsesTheDecodeTimeWindow) {
  const rkv::ModelConfig& c = gqa_model().config;
  auto be = rkv::make_backend("cpu", gqa_model());
  const int64_t T = 24;
  const rkv::PrefillResult r = be->prefill(tokens(T), {});
  for (int64_t l = 0; l < c.n_layers; ++l)
    be->compact_layer(*r.cache, l, keep_uniform(l, c.n_kv_heads, T, {0, 2, 5, 9, 12, 16, 20, 21, 22, 23}));
  const rkv::ScorerUse snap =
      scorer("snapkv", {{"window", int64_t(3), false, "t"}, {"kernel", int64_t(1), false, "t"}});
  rkv::DecodeSpec spec = spec_of("periodic");
  spec.interval = 5;
  const rkv::DecodePolicy periodic(spec, std::vector<int64_t>(2, 8), {}, &snap);  // target = the budget, 8
  EXPECT_TRUE(periodic.capture().queries);
  const auto session = periodic.begin(*be, *r.cache, nullptr);
  // A twin cache decoded without the policy, observing the attention mass of the same 5 tokens.
  const std::unique_ptr<rkv::BackendCache> twin = be->clone(*r.cache);
  rkv::ExtendCapture mass;
  mass.attention_mass = true;
  std::vector<rkv::ExtendObservation> masses;
  for (int64_t s = 0; s < 5; ++s) {
    const int32_t tok = static_cast<int32_t>(7 * s % 40);
    rkv::continuation_logits(*be, {tok}, T + s, *r.cache, session.get());
    rkv::ExtendObservation o;
    be->extend(*twin, {tok}, T + s, rkv::LogitsFor::Last, mass, &o);
    masses.push_back(o);
  }
  for (int64_t l = 0; l < c.n_layers; ++l)
    for (int64_t g = 0; g < c.n_kv_heads; ++g) {
      ASSERT_EQ(r.cache->head_length(l, g), 8);
      // By hand: W[q, j] = the mass of the last 3 tokens (window 3); snapkv with kernel 1 and mean over the group
      // scores the non-window entries (the first 15 - 3 = 12) by the group mean; keep the top 8 - 3 = 5 of them.
      const int64_t held = 15, G = c.n_heads / c.n_kv_heads;
      std::vector<double> score(static_cast<size_t>(held - 3), 0.0);
      for (int64_t s = 2; s < 5; ++s) {
        const std::vector<float>& m = masses[static_cast<size_t>(s)].attention_mass[static_cast<size_t>(l)];
        const int64_t len = 10 + s + 1;  // entries when token s was appended
        for (int64_t cq = 0; cq < G; ++cq)
          for (int64_t j = 0; j < held - 3 && j < len; ++j)
            score[static_cast<size_t>(j)] += m[static_cast<size_t>((g * G + cq) * len + j)] / G;
      }
      std::vector<int64_t> order(score.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t b) { return score[static_cast<size_t>(a)] > score[static_cast<size_t>(b)]; });
      order.resize(5);
      order.insert(order.end(), {12, 13, 14});
      std::sort(order.begin(), order.end());
      const std::vector<int32_t> all = {0, 2, 5, 9, 12, 16, 20, 21, 22, 23, 24, 25, 26, 27, 28};
      std::vector<int32_t> want;
      for (int64_t i : order) want.push_back(all[static_cast<size_t>(i)]);
      EXPECT_EQ(head_positions(*be, *r.cache, l, g), want) << "layer " << l << " head " << g;
    }
}

TEST_F(PeriodicDecode, RefusesAScorerWithoutDecodeTimeScoring) {
  const rkv::ScorerUse normalized = scorer("h2o", {{"normalize", true, false, "t"}});
  try {
    rkv::DecodePolicy(spec_of("periodic"), {8}, {}, &normalized);
    FAIL() << "accepted";
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("does not support decode-time scoring"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("org.ripplekv.scorer.h2o"), std::string::npos) << e.what();
  }
}

// A run's SIGTERM reaches token-by-token decoding (a 1024-token continuation under rolling took
// 19 s to stop when only examples polled): with the scope's flag set, the next token throws rkv::Cancelled.
TEST(DecodePolicy, CancellationStopsDecodingBetweenTwoTokens) {
  auto be = rkv::make_backend("cpu", one_head_model());
  const rkv::PrefillResult r = be->prefill(tokens(12), {});
  rkv::DecodeSpec spec = spec_of("rolling");
  const rkv::DecodePolicy rolling(spec, {6});
  const auto session = rolling.begin(*be, *r.cache, nullptr);
  std::atomic<bool> cancel{false};
  const rkv::CancelScope scope(&cancel);
  rkv::continuation_logits(*be, {1, 2}, 12, *r.cache, session.get());
  EXPECT_EQ(r.cache->length(0), 6);
  cancel = true;
  EXPECT_THROW(rkv::continuation_logits(*be, {3, 4}, 14, *r.cache, session.get()), rkv::Cancelled);
  EXPECT_THROW(rkv::greedy_decode(*be, std::vector<float>(40, 0.0f), 14, *r.cache, 5, {}, nullptr), rkv::Cancelled);
}

TEST(DecodePolicy, H2oWithRecentAtOrAboveABudgetWarnsLikeRolling) {
  // Budgets [L = 2][H_kv = 2] = {{4, 8}, {6, 3}}. recent = 6 covers b = 4, 6 and 3: three pairs, first layer 0 head 0.
  // Before: "" (the cell ran pure recency under its h2o label without a word).
  const std::vector<std::vector<int64_t>> heads = {{4, 8}, {6, 3}};
  rkv::DecodeSpec spec = spec_of("h2o");
  spec.recent = 6;
  EXPECT_EQ(rkv::DecodePolicy(spec, {8, 6}, heads).frozen_heads_warning(2),
            "h2o decode: recent = 6 is at or above the budget of 3 (layer, KV head) pair(s), first layer 0, KV head 0 "
            "(4 entries): those heads keep only their most recent entries (pure recency, no heavy hitters: rolling "
            "with sinks = 0, not H2O)");
  spec.recent = 2;  // below every budget: H2O proper
  EXPECT_EQ(rkv::DecodePolicy(spec, {8, 6}, heads).frozen_heads_warning(2), "");
  spec.recent = -1;  // half of each budget
  EXPECT_EQ(rkv::DecodePolicy(spec, {8, 6}, heads).frozen_heads_warning(2), "");
  spec.recent = 3;  // only layer 1's head 1 (b = 3)
  EXPECT_EQ(rkv::DecodePolicy(spec, {8, 6}, heads).frozen_heads_warning(2),
            "h2o decode: recent = 3 is at or above the budget of 1 (layer, KV head) pair(s), first layer 1, KV head 1 "
            "(3 entries): those heads keep only their most recent entries (pure recency, no heavy hitters: rolling "
            "with sinks = 0, not H2O)");
}

TEST_F(PeriodicDecode, ATargetAboveABudgetWarnsThatShortContinuationsNeverEvict) {
  // Layer budgets {6, 10} on 2 KV heads; target 8 is above b = 6 (layer 0, both heads): they are compressed only
  // once they hold 9 entries, 8 - 6 + 1 = 3 decoded tokens in. Before: "" (a 2-token continuation never evicted).
  const rkv::ScorerUse st = scorer("streamingllm", {{"sinks", int64_t(2), false, "t"}});
  rkv::DecodeSpec spec = spec_of("periodic");
  spec.interval = 1;
  spec.target = 8;
  EXPECT_EQ(rkv::DecodePolicy(spec, {6, 10}, {}, &st).frozen_heads_warning(2),
            "periodic decode: target = 8 is above the budget of 2 (layer, KV head) pair(s), first layer 0, KV head 0 "
            "(6 entries): those heads grow past their budget and are not compressed before they hold more than 8 "
            "entries (3 decoded tokens for the first; a shorter continuation never evicts)");
  spec.target = 6;  // at the smallest budget: reached by the first decoded token
  EXPECT_EQ(rkv::DecodePolicy(spec, {6, 10}, {}, &st).frozen_heads_warning(2), "");
  spec.target = 0;  // each head's own budget
  EXPECT_EQ(rkv::DecodePolicy(spec, {6, 10}, {}, &st).frozen_heads_warning(2), "");
}

TEST(DecodePolicy, DescribesItselfAndRejectsBadParameters) {
  EXPECT_EQ(spec_of("none").describe(), "none");
  rkv::DecodeSpec s = spec_of("periodic");
  s.interval = 8;
  s.target = 100;
  EXPECT_EQ(s.describe(), "periodic(interval=8,target=100)");
  EXPECT_THROW(rkv::DecodePolicy(spec_of("h2o"), {0}), rkv::InputError);
  rkv::DecodeSpec bad = spec_of("rolling");
  bad.sinks = -1;
  EXPECT_THROW(rkv::DecodePolicy(bad, {4}), rkv::InputError);
  EXPECT_EQ(rkv::DecodePolicy(spec_of("none"), {4}).head_limit(0, 0, 4), INT64_MAX);
}

}  // namespace
