// Routes in the compression pipeline (runner/compress/scorers.hpp LayerScorers) on a seeded synthetic model: a route that
// names one scorer for every layer is that scorer's homogeneous cell bit for bit (cache and continuation logits), and
// in a two-scorer route each layer keeps exactly what its scorer alone keeps there.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

#include "backend/backend.hpp"
#include "cache/selection.hpp"
#include "core/errors.hpp"
#include "model/synthetic_model.hpp"
#include "plugin/instance.hpp"
#include "common/plugin_fixture.hpp"
#include "plugin/registry.hpp"
#include "runner/compress/codec_step.hpp"
#include "runner/compress/compress_prompt.hpp"
#include "runner/decode/loop.hpp"
#include "runner/compress/budgets.hpp"

namespace {

/// Three layers, H = 4 query heads over H_kv = 2 KV heads, d = 8.
const rkv::Model& model() {
  static const rkv::Model m = rkv::synthetic_model(rkv::synthetic_config("llama", 4, 2, 8, 3), 21);
  return m;
}

std::vector<int32_t> tokens(int64_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = static_cast<int32_t>((i * 13 + 3) % 40);
  return t;
}

class RouteCompression : public ::testing::Test {
 protected:
  const rkv::PluginInstance& instance(const std::string& id, rkv_plugin_kind kind,
                                      std::vector<rkv::UserParam> params = {}) {
    return plugins_.instance(id, kind, std::move(params));
  }
  rkv::ScorerUse scorer(const std::string& id, std::vector<rkv::UserParam> params = {}) {
    return plugins_.scorer(id, std::move(params), model().config, id + "{" + std::to_string(plugins_.size() + 1) + "}");
  }
  rkv_test::PluginFixture plugins_;
};

/// Head h's entries of `layer`: keys, values and positions of the rows in use.
struct HeadRows {
  std::vector<float> k, v;
  std::vector<int32_t> pos;
  bool operator==(const HeadRows& o) const { return k == o.k && v == o.v && pos == o.pos; }
};

HeadRows head_rows(rkv::Backend& be, const rkv::BackendCache& cache, int64_t layer, int64_t h) {
  const rkv::LayerKV kv = be.download_layer(cache, layer);
  const int64_t d = kv.head_dim, begin = kv.head_row(h), n = kv.head_length(h);
  HeadRows r;
  r.k.assign(kv.k.begin() + begin * d, kv.k.begin() + (begin + n) * d);
  r.v.assign(kv.v.begin() + begin * d, kv.v.begin() + (begin + n) * d);
  r.pos.assign(kv.pos.begin() + begin, kv.pos.begin() + begin + n);
  return r;
}

TEST_F(RouteCompression, OneScorerEverywhereIsTheHomogeneousCellBitForBit) {
  const rkv::ModelConfig& c = model().config;
  auto be = rkv::make_backend("cpu", model());
  const rkv::ScorerUse knorm = scorer("knorm");
  const rkv::ScorerUse snap = scorer("snapkv", {{"window", int64_t(4), false, "t"}, {"kernel", int64_t(3), false, "t"}});
  const int64_t T = 32;
  const rkv::PrefilledPrompt prompt = rkv::prefill_prompt(*be, tokens(T), rkv::prefill_needs({&knorm, &snap}));
  const std::vector<int64_t> A = {0, 1, 2};
  const rkv::PluginInstance& uniform = instance("uniform", RKV_KIND_ALLOCATOR);
  // Homogeneous knorm, and a route naming knorm for every layer over a snapkv [scorer].
  rkv::ScoreMemo memo_h, memo_r;
  const rkv::LayerScorers routed(snap, {{0, &knorm}, {1, &knorm}, {2, &knorm}});
  const rkv::CellBudgets bh = rkv::allocate_cell(*be, prompt, knorm, memo_h, uniform, nullptr, A, {}, 30);
  const rkv::CellBudgets br = rkv::allocate_cell(*be, prompt, routed, memo_r, uniform, nullptr, A, {}, 30);
  EXPECT_EQ(bh.layers, br.layers);
  const rkv::CompressedPrompt h = rkv::compress_prompt(*be, prompt, knorm, A, bh.layers, memo_h);
  const rkv::CompressedPrompt r = rkv::compress_prompt(*be, prompt, routed, A, br.layers, memo_r);
  EXPECT_EQ(h.budgets, r.budgets);
  EXPECT_EQ(h.bytes_kept, r.bytes_kept);
  for (int64_t l = 0; l < c.n_layers; ++l)
    for (int64_t g = 0; g < c.n_kv_heads; ++g) {
      EXPECT_EQ(head_rows(*be, *h.cache, l, g).pos.size(), 10u);
      EXPECT_TRUE(head_rows(*be, *h.cache, l, g) == head_rows(*be, *r.cache, l, g)) << "layer " << l << " head " << g;
    }
  const std::vector<int32_t> cont = {5, 9, 1, 30, 22};
  EXPECT_EQ(rkv::continuation_logits(*be, cont, T, *h.cache), rkv::continuation_logits(*be, cont, T, *r.cache));
}

TEST_F(RouteCompression, EachLayerKeepsWhatItsScorerAloneKeeps) {
  const rkv::ModelConfig& c = model().config;
  auto be = rkv::make_backend("cpu", model());
  const rkv::ScorerUse knorm = scorer("knorm");
  const rkv::ScorerUse snap = scorer("snapkv", {{"window", int64_t(4), false, "t"}, {"kernel", int64_t(3), false, "t"}});
  const int64_t T = 32;
  const rkv::PrefilledPrompt prompt = rkv::prefill_prompt(*be, tokens(T), rkv::prefill_needs({&knorm, &snap}));
  const std::vector<int64_t> A = {0, 1, 2}, budgets = {6, 9, 12};
  rkv::ScoreMemo memo;
  const rkv::LayerScorers route(snap, {{1, &knorm}});  // layer 1 knorm, layers 0 and 2 snapkv
  const rkv::CompressedPrompt r = rkv::compress_prompt(*be, prompt, route, A, budgets, memo);
  const rkv::CompressedPrompt all_knorm = rkv::compress_prompt(*be, prompt, knorm, A, budgets, memo);
  const rkv::CompressedPrompt all_snap = rkv::compress_prompt(*be, prompt, snap, A, budgets, memo);
  for (int64_t g = 0; g < c.n_kv_heads; ++g) {
    EXPECT_TRUE(head_rows(*be, *r.cache, 0, g) == head_rows(*be, *all_snap.cache, 0, g));
    EXPECT_TRUE(head_rows(*be, *r.cache, 1, g) == head_rows(*be, *all_knorm.cache, 1, g));
    EXPECT_TRUE(head_rows(*be, *r.cache, 2, g) == head_rows(*be, *all_snap.cache, 2, g));
    EXPECT_FALSE(head_rows(*be, *r.cache, 1, g) == head_rows(*be, *all_snap.cache, 1, g));  // the route matters here
  }
  // Independently of the pipeline: knorm keeps, per KV head, the 9 positions of smallest key norm in the full cache
  // (ties to the earlier position), and snapkv always keeps its window, the last 4 positions.
  const rkv::LayerKV full = be->download_layer(*prompt.cache, 1);
  for (int64_t g = 0; g < c.n_kv_heads; ++g) {
    std::vector<double> norm(static_cast<size_t>(T));
    for (int64_t j = 0; j < T; ++j) {
      double s = 0;
      for (int64_t e = 0; e < c.head_dim; ++e) {
        const double x = full.k[static_cast<size_t>((full.head_row(g) + j) * c.head_dim + e)];
        s += x * x;
      }
      norm[static_cast<size_t>(j)] = std::sqrt(s);
    }
    std::vector<int32_t> order(static_cast<size_t>(T));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return norm[static_cast<size_t>(a)] < norm[static_cast<size_t>(b)]; });
    order.resize(9);
    std::sort(order.begin(), order.end());
    EXPECT_EQ(head_rows(*be, *r.cache, 1, g).pos, order) << "head " << g;
    for (int64_t l : {0, 2}) {
      const std::vector<int32_t> kept = head_rows(*be, *r.cache, l, g).pos;
      EXPECT_EQ(kept.size(), static_cast<size_t>(budgets[static_cast<size_t>(l)]));
      EXPECT_EQ(std::vector<int32_t>(kept.end() - 4, kept.end()), (std::vector<int32_t>{28, 29, 30, 31}));
    }
  }
}

TEST_F(RouteCompression, AllocatorsAreToldTheLargestProtectedCount) {
  const rkv::ScorerUse knorm = scorer("knorm");  // protects nothing
  const rkv::ScorerUse snap = scorer("snapkv", {{"window", int64_t(4), false, "t"}});
  const rkv::LayerScorers route(knorm, {{2, &snap}});
  EXPECT_EQ(route.protected_count({0, 1}, 32), 0);
  EXPECT_EQ(route.protected_count({0, 1, 2}, 32), 4);
  EXPECT_TRUE(route.same_protected_spec({0, 1}));
  EXPECT_FALSE(route.same_protected_spec({1, 2}));
  // A per-head allocator takes one protected mask for every layer: refused over scorers that protect differently.
  auto be = rkv::make_backend("cpu", model());
  const rkv::PrefilledPrompt prompt = rkv::prefill_prompt(*be, tokens(32), rkv::prefill_needs({&knorm, &snap}));
  rkv::ScoreMemo memo;
  EXPECT_THROW(rkv::allocate_cell(*be, prompt, route, memo, instance("uniform", RKV_KIND_ALLOCATOR),
                                  &instance("adakv", RKV_KIND_ALLOCATOR), {0, 1, 2}, {}, 30),
               rkv::InputError);
}

}  // namespace

namespace {

class TokenClasses : public RouteCompression {};

TEST_F(TokenClasses, TheTopClassHoldsWhatEachLayersScorerKeepsAtThatShare) {
  // Per-token bits (runner/compress/codec_step.hpp token_classes_of): with a route (layer 1 knorm, layers 0 and 2 snapkv),
  // 12 of 32 positions kept per KV head and 25% of them at 16 bits, the 16-bit entries of each head are exactly what
  // the layer's own scorer keeps at a budget of floor(0.25 x 12) = 3 (select_positions: protected first, then the
  // top scores) -- the classes nest with eviction. Bytes by hand (d = 8, int4 asymmetric groups of 8: a row 4 + 4 =
  // 8 bytes, an entry 8 + 8 + 4 = 20; f16: 16 + 16 + 4 = 36): per layer and head 3 x 36 + 9 x 20 = 288, x 2 heads x
  // 3 layers = 1728.
  const rkv::ModelConfig& c = model().config;
  auto be = rkv::make_backend("cpu", model());
  const rkv::ScorerUse knorm = scorer("knorm");
  const rkv::ScorerUse snap = scorer("snapkv", {{"window", int64_t(4), false, "t"}, {"kernel", int64_t(3), false, "t"}});
  const int64_t T = 32;
  const rkv::PrefilledPrompt prompt = rkv::prefill_prompt(*be, tokens(T), rkv::prefill_needs({&knorm, &snap}));
  const std::vector<int64_t> A = {0, 1, 2}, budgets = {12, 12, 12};
  rkv::ScoreMemo memo;
  const rkv::LayerScorers route(snap, {{1, &knorm}});
  rkv::CompressedPrompt comp = rkv::compress_prompt(*be, prompt, route, A, budgets, memo);
  rkv::CodecSpec codec;
  codec.format = rkv::CodecFormat::integer;
  codec.bits = 4;
  codec.group = 8;
  codec.token_bits = {16};
  codec.token_shares = {0.25};
  const std::vector<std::vector<uint8_t>> classes = rkv::token_classes_of(*be, prompt, comp, route, memo, codec);
  ASSERT_EQ(classes.size(), 3u);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const rkv::ScorerUse& s = l == 1 ? knorm : snap;
    const rkv::Selection top = rkv::select_positions(memo.scores(*be, prompt, s, l).scores.data(), c.n_kv_heads, T, 3,
                                                     s.requirements.protected_spec(), l);
    const std::vector<int32_t> pos = be->layer_positions(*comp.cache, l);
    for (int64_t g = 0; g < c.n_kv_heads; ++g) {
      std::vector<int64_t> sixteen;
      for (int64_t i = 0; i < 12; ++i)
        if (classes[static_cast<size_t>(l)][static_cast<size_t>(g * 12 + i)] == 1)
          sixteen.push_back(pos[static_cast<size_t>(g * 12 + i)]);
      EXPECT_EQ(sixteen, std::vector<int64_t>(top.head_positions(g), top.head_positions(g) + 3))
          << "layer " << l << " head " << g;
    }
  }
  EXPECT_EQ(rkv::token_class_entries(classes, codec), (std::vector<std::vector<int64_t>>(3, {6, 18})));
  rkv::encode_compressed(*be, comp, codec, {}, classes);
  EXPECT_EQ(comp.bytes_kept, 1728u);
  // Without the classes a mixed codec is refused (it would store everything at 4 bits under a mixed label).
  rkv::CompressedPrompt again = rkv::compress_prompt(*be, prompt, route, A, budgets, memo);
  EXPECT_THROW(rkv::encode_compressed(*be, again, codec), rkv::InputError);
}

}  // namespace
