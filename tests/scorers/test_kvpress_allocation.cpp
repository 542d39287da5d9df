// The head and layer splits of kvpress's and FFY0/DefensiveKV's presses on the kvpress fixture
// (tests/fixtures/kvpress/presses.json: CriticalAdaKV, and the "defensivekv" key): ripplekv's scorer with its
// allocator (adakv, global_topk) as allocate_cell and compress_prompt compose them in a run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "kvpress_fixture.hpp"

namespace {

using namespace rkv_kvpress_fixture;

TEST(KvpressFixtureFiles, CriticalAdaKVIsAdaKVHeadsThenCriticalKV) {
  // kvpress CriticalAdaKVPress splits the layer's budget over heads by AdaKV's rule on the inner scores (alpha
  // safeguard 0.2), then runs CriticalKV's two stages within each head's budget. In ripplekv that is
  // `[allocator] heads = "adakv"` reading criticalkv's budget-free scores (the inner SnapKV's), then criticalkv with
  // those head budgets, as allocate_cell and compress_prompt do in a run.
  const Layer& L = layer();
  const json& ref = press_case("critical_adakv_snapkv_w8");
  const int64_t T = L.T, Hkv = L.Hkv;
  const Prepared p = prepare("criticalkv", {P("window", I(8))}, false);
  const rkv::ScoreResult budget_free = rkv::run_scorer(p.inst, p.req, p.call());
  const rkv::PluginInfo& ada = registry().resolve("adakv", RKV_KIND_ALLOCATOR);
  rkv::HostServices host;
  const rkv::PluginInstance alloc = rkv::PluginInstance::create(
      ada, rkv::ParamSet::validate(*ada.descriptor, {P("alpha_safeguard", F(ref["args"]["alpha_safeguard"]))}), host);
  int64_t identical = 0;
  for (const auto& kept : ref["kept"]) {
    const int64_t n_kept = kept["n_kept"];
    SCOPED_TRACE(std::to_string(n_kept) + " kept per head on average");
    const std::vector<int64_t> layer_budget = {n_kept};
    rkv::HeadAllocationInputs in;
    in.scores = &budget_free.scores;
    in.protected_mask.assign(static_cast<size_t>(T), 0);
    for (int64_t j : rkv::protected_positions(T, p.req.protected_spec())) in.protected_mask[static_cast<size_t>(j)] = 1;
    in.layer_budgets = &layer_budget;
    in.budget_total = n_kept;
    in.prefix_tokens = T;
    in.n_layers = 1;
    in.n_kv_heads = Hkv;
    in.protected_count = p.req.protected_count(T);
    const rkv::HeadAllocation heads = rkv::run_head_allocator(alloc, in);
    EXPECT_EQ(heads.budgets[0], kept["head_kept"].get<std::vector<int64_t>>());
    const rkv::ScoreResult s = rkv::run_scorer(p.inst, p.req, p.call(&heads.budgets[0]));
    const rkv::Selection sel =
        rkv::select_positions_per_head(s.scores.data(), Hkv, T, heads.budgets[0], p.req.protected_spec(), 0);
    for (int64_t g = 0; g < Hkv; ++g) {
      const std::vector<int64_t> want = kept["positions"][static_cast<size_t>(g)].get<std::vector<int64_t>>();
      const std::vector<int64_t> got(sel.head_positions(g), sel.head_positions(g) + sel.head_kept_count(g));
      EXPECT_EQ(got, want) << "KV head " << g;
      identical += got == want ? 1 : 0;
    }
  }
  std::printf("critical_adakv_snapkv_w8: kept positions identical to kvpress's on %lld of %lld (ratio, KV head) "
              "pairs\n", static_cast<long long>(identical), static_cast<long long>(3 * Hkv));
}

// DefensiveKV and Layer-DefensiveKV against FFY0/DefensiveKV's own presses (presses.json "defensivekv", written with
// --defensivekv; the reference's score() and its compress()'s top-k split, see make_kvpress_fixtures.py).
const json& defensivekv_ref() {
  const json& j = layer().root.at("defensivekv");
  return j;
}

/// The fixture's o_proj with query head h's block scaled by 1 + ((layer + h) % 3) / 2 (the script's layer_wo_scale).
std::vector<float> layer_wo(int64_t l) {
  const Layer& L = layer();
  std::vector<float> w = L.wo;
  const int64_t cols = L.H * L.d;
  for (size_t i = 0; i < w.size(); ++i) {
    const int64_t h = static_cast<int64_t>(i) % cols / L.d;
    w[i] *= 1.0f + static_cast<float>((l + h) % 3) / 2.0f;
  }
  return w;
}

/// Kept positions per KV head of `scores` [H_kv, T] for head budgets `b` (the host's selection).
std::vector<std::vector<int64_t>> kept_of(const std::vector<float>& scores, const std::vector<int64_t>& b,
                                          const rkv::ScorerRequirements& req) {
  const Layer& L = layer();
  const rkv::Selection sel = rkv::select_positions_per_head(scores.data(), L.Hkv, L.T, b, req.protected_spec(), 0);
  std::vector<std::vector<int64_t>> out;
  for (int64_t g = 0; g < L.Hkv; ++g) out.emplace_back(sel.head_positions(g), sel.head_positions(g) + sel.head_kept_count(g));
  return out;
}

rkv::HeadAllocation split_heads(const rkv::PluginInstance& alloc, const Prepared& p, const std::vector<float>& scores,
                                const std::vector<int64_t>* layer_budgets, int64_t n_layers, int64_t budget_total) {
  const Layer& L = layer();
  rkv::HeadAllocationInputs in;
  in.scores = &scores;
  in.protected_mask.assign(static_cast<size_t>(L.T), 0);
  for (int64_t j : rkv::protected_positions(L.T, p.req.protected_spec())) in.protected_mask[static_cast<size_t>(j)] = 1;
  in.layer_budgets = layer_budgets;
  in.budget_total = budget_total;
  in.prefix_tokens = L.T;
  in.n_layers = n_layers;
  in.n_kv_heads = L.Hkv;
  in.protected_count = p.req.protected_count(L.T);
  return rkv::run_head_allocator(alloc, in);
}

const rkv::PluginInstance& allocator(const char* id, std::vector<rkv::UserParam> params) {
  static rkv::HostServices host;
  static std::map<std::string, rkv::PluginInstance> made;
  const rkv::PluginInfo& info = registry().resolve(id, RKV_KIND_ALLOCATOR);
  return made.emplace(id, rkv::PluginInstance::create(info, rkv::ParamSet::validate(*info.descriptor, params), host))
      .first->second;
}

TEST(KvpressFixtureFiles, DefensiveKVIsItsScoresThenAnAdaSplitWithoutSafeguard) {
  // The reference scores the layer with its compression ratio (the stage-1 cap b - w) and keeps one top-k of
  // H_kv b over the layer's flattened scores. Here: defensivekv budgeted with b on every head (as allocate_cell gives
  // a scorer budgeted for allocators), adakv with alpha_safeguard 0 on those scores, then each head's selection.
  const Layer& L = layer();
  const json& ref = defensivekv_ref();
  const Prepared p = prepare("defensivekv", {P("window", I(ref["window"])), P("kernel", I(ref["kernel"]))}, false);
  const rkv::PluginInstance& ada = allocator("adakv", {P("alpha_safeguard", F(0.0))});
  const Case c{"defensivekv", "defensivekv", {}};
  int64_t capped = 0;  // (ratio, head) pairs where stage 1 stopped at the cap, not at the attention mass
  for (const auto& k : ref["defensivekv"]) {
    const int64_t b = k["n_kept_total"].get<int64_t>() / L.Hkv;
    const float q_scale = k["query_scale"];
    SCOPED_TRACE("b_l " + std::to_string(b) + ", query scale " + std::to_string(q_scale));
    const std::vector<int64_t> share(static_cast<size_t>(L.Hkv), b);
    Prepared scaled = prepare("defensivekv", {P("window", I(ref["window"])), P("kernel", I(ref["kernel"]))}, false);
    for (float& x : scaled.wq) x *= q_scale;  // the fixture's queries times a power of two (exact)
    const Prepared& q = q_scale == 1.0f ? p : scaled;
    const rkv::ScoreResult s = rkv::run_scorer(q.inst, q.req, q.call(&share));
    {
      const float top = *std::max_element(s.scores.begin(), s.scores.end());
      const int64_t n = L.T - ref["window"].get<int64_t>(), cap = n * b / L.T - ref["window"].get<int64_t>();
      for (int64_t g = 0; g < L.Hkv; ++g)
        capped += std::count(s.scores.begin() + g * L.T, s.scores.begin() + g * L.T + n, top) == cap ? 1 : 0;
    }
    expect_scores(c, s.scores, scores_of(k["scores"], L.Hkv, L.T), L.Hkv, L.T, "defensivekv at " + std::to_string(b));
    const std::vector<int64_t> layer_budget = {b};
    const rkv::HeadAllocation h = split_heads(ada, p, s.scores, &layer_budget, 1, b);
    std::vector<int64_t> want_heads;
    for (const auto& x : k["positions"]) want_heads.push_back(static_cast<int64_t>(x.size()));
    EXPECT_EQ(h.budgets[0], want_heads);
    // The final selection scores again with the per-head budgets; the stage-1 cap reads their mean, b.
    const rkv::ScoreResult final_scores = rkv::run_scorer(q.inst, q.req, q.call(&h.budgets[0]));
    EXPECT_EQ(final_scores.scores, s.scores);
    EXPECT_EQ(kept_of(final_scores.scores, h.budgets[0], q.req), k["positions"].get<std::vector<std::vector<int64_t>>>());
  }
  EXPECT_EQ(capped, 9);  // the flattened queries reach the cap on every head at every ratio
}

TEST(KvpressFixtureFiles, LayerDefensiveKVIsOneTopKOverEveryLayerAndHead) {
  // Three layers that differ by o_proj. The reference scores each with the run's ratio and keeps one top-k of
  // H_kv L b over all of them. Here: defensivekv per layer budgeted with the share floor(B / |A|) = b, and the
  // global_topk allocator; its split (before the host's integerization) equals the reference's count per (layer,
  // head) exactly. The host then makes each layer's row a multiple of H_kv; the heads whose integer budget equals
  // the reference's keep exactly its positions.
  const Layer& L = layer();
  const json& ref = defensivekv_ref();
  Prepared p = prepare("defensivekv", {P("window", I(ref["window"])), P("kernel", I(ref["kernel"]))}, false);
  const rkv::PluginInstance& global = allocator("global_topk", {});
  const int64_t n_layers = ref["layers"];
  const Case c{"layer_defensivekv", "defensivekv", {}};
  int64_t heads_equal = 0, heads = 0;
  for (const auto& k : ref["layer_defensivekv"]) {
    const int64_t B = k["n_kept_total"].get<int64_t>() / L.Hkv, b = B / n_layers;
    SCOPED_TRACE("B " + std::to_string(B));
    const std::vector<int64_t> share(static_cast<size_t>(L.Hkv), b);
    std::vector<float> all;
    std::vector<std::vector<float>> per_layer;
    for (int64_t l = 0; l < n_layers; ++l) {
      const std::vector<float> wo = layer_wo(l);
      rkv::cpu::WeightRef w;
      w.f32 = wo.data();
      w.rows = (L.H + L.Hkv) * L.d;
      w.cols = L.H * L.d;
      p.norms = rkv::cpu::value_output_norms(p.kv, w, L.H);
      per_layer.push_back(rkv::run_scorer(p.inst, p.req, p.call(&share)).scores);
      expect_scores(c, per_layer.back(), scores_of(k["scores"][static_cast<size_t>(l)], L.Hkv, L.T), L.Hkv, L.T,
                    "layer " + std::to_string(l));
      all.insert(all.end(), per_layer.back().begin(), per_layer.back().end());
    }
    const rkv::HeadAllocation h = split_heads(global, p, all, nullptr, n_layers, B);
    for (int64_t l = 0; l < n_layers; ++l)
      for (int64_t g = 0; g < L.Hkv; ++g) {
        const std::vector<int64_t> want = k["positions"][static_cast<size_t>(l)][static_cast<size_t>(g)];
        EXPECT_EQ(h.raw[static_cast<size_t>(l * L.Hkv + g)], static_cast<double>(want.size())) << "layer " << l << ", head " << g;
        const int64_t got = h.budgets[static_cast<size_t>(l)][static_cast<size_t>(g)];
        EXPECT_LE(std::abs(got - static_cast<int64_t>(want.size())), L.Hkv) << "layer " << l << ", head " << g;
        ++heads;
        if (got != static_cast<int64_t>(want.size())) continue;
        ++heads_equal;
        std::vector<int64_t> one(static_cast<size_t>(L.Hkv), got);
        EXPECT_EQ(kept_of(per_layer[static_cast<size_t>(l)], one, p.req)[static_cast<size_t>(g)], want)
            << "layer " << l << ", head " << g;
      }
  }
  std::printf("layer_defensivekv: the host's integer budget equals the reference's count on %lld of %lld (ratio, "
              "layer, head); those keep the reference's positions\n", static_cast<long long>(heads_equal),
              static_cast<long long>(heads));
  EXPECT_GE(heads_equal, heads / 3);
}

TEST(KvpressFixtureFiles, DefensiveKVMasksWhatASlidingWindowHides) {
  // attention_window W: a window query at position p sees keys p - W + 1 .. p. W = 0 and a W past T are full
  // attention (identical scores); W = 1: each query sees only itself, a window position, so no position before the
  // window gets any attention and every score is 0 (the maximum of all-zero scores is 0 too, on the window as well).
  const Layer& L = layer();
  const Prepared p = prepare("defensivekv", {P("window", I(16))}, false);
  rkv::ScorerCallInputs in = p.call();
  const std::vector<float> full = rkv::run_scorer(p.inst, p.req, in).scores;
  in.attention_window = 1000;
  EXPECT_EQ(rkv::run_scorer(p.inst, p.req, in).scores, full);
  in.attention_window = 1;
  const std::vector<float> one = rkv::run_scorer(p.inst, p.req, in).scores;
  EXPECT_EQ(one, std::vector<float>(static_cast<size_t>(L.Hkv * L.T), 0.0f));
  in.attention_window = 100;
  EXPECT_NE(rkv::run_scorer(p.inst, p.req, in).scores, full);
  in.attention_window = -1;
  EXPECT_THROW(rkv::run_scorer(p.inst, p.req, in), rkv::InputError);
}

}  // namespace
