// ripplekv's scorer plugins against kvpress's own presses on the same tensors (tests/fixtures/kvpress, written by
// tests/reference/make_kvpress_fixtures.py with kvpress, torch and transformers pinned in
// scripts/requirements-kvpress.txt; the versions are in presses.json).
//
// The fixture is one seeded synthetic layer (H = 9, H_kv = 3, d = 64, T = 300): post-RoPE keys, values and queries.
// Each case runs the real .so plugin through the host's path, as a run does:
//   ParamSet::validate -> PluginInstance::create -> query_scorer_requirements -> compute_attention_stats (from the
//   fixture's Q and K) / window_queries -> run_scorer -> select_positions (the host's top-k, protected positions)
// and compares
//   scores: |ours * scale - kvpress| <= 1e-5 * max(|kvpress|, 1e-3 * max_j |kvpress|) on the compared positions
//           (the floor keeps near-zero entries, e.g. z-scores around 0, from demanding more than float32 gives;
//           non_causal_attention: 1e-4, see its case);
//   kept positions: at kvpress's own kept count for compression_ratio 0.9 / 0.7 / 0.5 (10/30/50% kept), the host's
//           selection equals the positions kvpress.compress() kept, per KV head — except where kvpress's choice is a
//           torch.topk tie-break among equal scores (listed per case, with the reason).
// Convention differences are written in each plugin's file comment; the README's "kvpress" decisions list them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "kvpress_fixture.hpp"

namespace {

using namespace rkv_kvpress_fixture;

// Tolerances of the pre-RoPE ports (measured):
//  - expected_attention: 1e-5 (worst 1.6e-6).
//  - leverage, compactor: kvpress computes X, X^T X and its Cholesky in float32; the same torch code run in float64
//    with the same sketch agrees with this port to 3e-14, but kvpress's float32 scores differ from it by up to
//    1.5e-4 (worst here: leverage 1.4e-4, compactor 9.7e-5), so those scores are compared at 3e-4. The kept positions
//    are identical to kvpress's at 10/30/50% on every KV head.
constexpr double EA_TOL = 1e-5, LEV_TOL = 3e-4, CMP_TOL = 3e-4;

std::vector<Case> cases() {
  std::vector<Case> c;
  c.push_back({"knorm", "org.ripplekv.scorer.knorm", {}});
  c.push_back({"keydiff", "org.ripplekv.scorer.keydiff", {}});
  // lagkv defaults (n_sink 4, lag 128): sinks + tail = 4 + 168 positions score 1, more than any of the budgets, so
  // kvpress's kept set is a torch.topk tie-break among them at every ratio (ours: the sinks, then the earliest).
  c.push_back({"lagkv", "org.ripplekv.scorer.lagkv", {}});
  // lag 32: sinks + tail = 4 + 40 = 44 positions score 1; at 10% (29 kept) kvpress picks among them by tie-break.
  // Without cross_scoring the scores are ranks r / 32, equal across partitions: ties at every budget's boundary.
  c.push_back({"lagkv_lag32", "org.ripplekv.scorer.lagkv", {P("lag_size", I(32))}});
  c.push_back({"cur", "org.ripplekv.scorer.cur", {}});
  c.push_back({"cur_kv_avg_w8", "org.ripplekv.scorer.cur", {P("leverage_type", S("kv_avg")), P("local_window_size", I(8))}});
  c.push_back({"cur_key_global", "org.ripplekv.scorer.cur",
               {P("leverage_type", S("key")), P("use_local_approximation", B(false)), P("num_sinks", I(0))}});
  c.push_back({"tova", "org.ripplekv.scorer.tova", {}});
  c.push_back({"observed_attention", "org.ripplekv.scorer.observed_attention", {}});
  // snapkv with kvpress's defaults: window 64, kernel 5, avg pooling, GQA mean. kvpress averages the window's votes
  // (ours sum them: scale 1/64) and pads the window with max + 1 (ours protects it): window scores are not compared.
  // At 10% (29 kept < 64) kvpress keeps 29 of the 64 tied window positions by tie-break; ripplekv keeps the most
  // recent 29.
  c.push_back({"snapkv", "org.ripplekv.scorer.snapkv",
               {P("window", I(64)), P("kernel", I(5)), P("pooling", S("avg")), P("gqa", S("mean"))}, 1.0f / 64.0f,
               [](int64_t j, int64_t T) { return j < T - 64; }});
  // non_causal_attention: kvpress's logits are unscaled dot products (|q . k| about 100 here) rounded to float32,
  // about 1e-5 absolute, which moves its softmax, hence its z-scores, by up to 3e-5 relative from the exact values
  // (measured: float32 logits vs float64 ones differ by 3.3e-5 on this layer). Ours are computed in double, so the
  // scores agree to 1e-4, not 1e-5; the kept positions are identical.
  const std::vector<double> all = {0.9, 0.7, 0.5};
  c.push_back({"non_causal_attention", "org.ripplekv.scorer.non_causal_attention", {}, 1.0f, nullptr, true, all, 1e-4});
  c.push_back({"non_causal_attention_chunk64", "org.ripplekv.scorer.non_causal_attention", {P("chunk_size", I(64))},
               1.0f, nullptr, true, all, 1e-4});
  c.push_back({"random_seed0", "org.ripplekv.scorer.random", {P("seed", I(0))}});
  c.push_back({"random_seed42", "org.ripplekv.scorer.random", {P("seed", I(42))}});
  // streamingllm: kvpress's scores depend on the ratio (1 on sinks and the kept recent span, 0 between); ours are
  // sinks protected + position. Kept positions only.
  c.push_back({"streamingllm", "org.ripplekv.scorer.streamingllm", {P("sinks", I(4))}, 1.0f, nullptr, false});
  // chunkkv: kvpress keeps whole chunks (its count is a multiple of the chunk length); at that count the host keeps
  // the same positions.
  c.push_back({"chunkkv_snapkv", "org.ripplekv.scorer.chunkkv", {P("chunk_length", I(20))}, 1.0f, nullptr, true, all,
               1e-5, 20});
  c.push_back({"chunkkv_knorm", "org.ripplekv.scorer.chunkkv", {P("chunk_length", I(20)), P("inner", S("knorm"))}, 1.0f,
               nullptr, true, all, 1e-5, 20});
  c.push_back({"chunkkv_knorm_chunk7", "org.ripplekv.scorer.chunkkv", {P("chunk_length", I(7)), P("inner", S("knorm"))},
               1.0f, nullptr, true, all, 1e-5, 7});
  // expected_attention: the host's query moments (add_query_moments on the fixture's pre-RoPE queries Q0, as the
  // prefill computes them from its own queries turned back) and the layer's RoPE frequencies (theta 10000).
  c.push_back({"expected_attention", "org.ripplekv.scorer.expected_attention", {}, 1.0f, nullptr, true, all, EA_TOL});
  c.push_back({"expected_attention_nocov_f64_eps", "org.ripplekv.scorer.expected_attention",
               {P("use_covariance", B(false)), P("n_future_positions", I(64)), P("n_sink", I(0)), P("epsilon", F(0.01))},
               1.0f, nullptr, true, all, EA_TOL});
  c.push_back({"expected_attention_no_vnorm", "org.ripplekv.scorer.expected_attention",
               {P("use_vnorm", B(false)), P("n_sink", I(8))}, 1.0f, nullptr, true, all, EA_TOL});
  // leverage / compactor: the sketch is torch.randn after torch.manual_seed(seed) (the fixture seeds before each
  // call). The pre-RoPE keys are the host's: the fixture's post-RoPE keys turned back by R(-j).
  c.push_back({"leverage_seed0", "org.ripplekv.scorer.leverage", {P("seed", I(0))}, 1.0f, nullptr, true, all, LEV_TOL,
               0, true});
  c.push_back({"leverage_k16_seed7", "org.ripplekv.scorer.leverage", {P("seed", I(7)), P("sketch_dimension", I(16))},
               1.0f, nullptr, true, all, LEV_TOL, 0, true});
  c.push_back({"compactor_seed0", "org.ripplekv.scorer.compactor", {P("seed", I(0)), P("blending", F(0.35))}, 1.0f,
               nullptr, true, all, CMP_TOL});
  c.push_back({"compactor_chunk64_seed3", "org.ripplekv.scorer.compactor",
               {P("seed", I(3)), P("blending", F(0.7)), P("chunk_size", I(64)), P("sink_size_start", I(4)),
                P("sink_size_end", I(8)), P("sketch_dimension", I(32))},
               1.0f, nullptr, true, all, CMP_TOL});
  // criticalkv is budget-dependent: without budgets it returns the inner press's scores (compared with the case's
  // `scores`), with every KV head keeping kvpress's n_kept it returns both stages (compared with that ratio's own
  // press.score()); its value-output norms are the CPU backend's, from the fixture's o_proj. Inner SnapKV with a
  // window of 8 (protected here, scored max + 1 by kvpress): stage 1 (14 / 45 / 75 positions) holds it at every ratio.
  c.push_back({"criticalkv_snapkv_w8", "org.ripplekv.scorer.criticalkv", {P("window", I(8))}, 1.0f, nullptr, true, all});
  c.push_back({"criticalkv_knorm_ratio025_eps0001", "org.ripplekv.scorer.criticalkv",
               {P("inner", S("knorm")), P("first_stage_ratio", F(0.25)), P("epsilon", F(1e-3))}, 1.0f, nullptr, true,
               all});
  return c;
}

class KvpressFixture : public ::testing::TestWithParam<Case> {};


TEST_P(KvpressFixture, MatchesKvpress) {
  const Case& c = GetParam();
  const Layer& L = layer();
  const json& ref = press_case(c.fixture);
  const int64_t T = L.T, Hkv = L.Hkv;
  const Prepared p = prepare(c.plugin, c.params, c.host_rotated_keys);
  const bool by_budget = ref.value("budget_dependent", false);
  ASSERT_EQ(p.req.budget_dependent, by_budget) << "the plugin's budget_dependent does not match the press";
  const rkv::ScoreResult res = rkv::run_scorer(p.inst, p.req, p.call());

  std::vector<double> expected = scores_of(ref["scores"], Hkv, T);  // kvpress's scores (ChunkKV: its chunk scores)
  if (c.chunk > 0) {
    std::vector<double> chunked(expected.size());
    for (int64_t c0 = 0; c0 < T; c0 += c.chunk) {
      const int64_t c1 = std::min(T, c0 + c.chunk);
      double sum = 0.0;
      for (int64_t g = 0; g < Hkv; ++g)
        for (int64_t j = c0; j < c1; ++j) sum += expected[static_cast<size_t>(g * T + j)];
      for (int64_t g = 0; g < Hkv; ++g)
        for (int64_t j = c0; j < c1; ++j) chunked[static_cast<size_t>(g * T + j)] = sum / static_cast<double>(c1 - c0);
    }
    expected = chunked;
  }
  // A budget-dependent scorer without budgets returns its budget-free ranking: the inner press's scores.
  if (c.compare_scores) expect_scores(c, res.scores, expected, Hkv, T, c.fixture + (by_budget ? " (no budget)" : ""));

  int64_t heads_compared = 0, heads_identical = 0;
  for (const auto& kept : ref["kept"]) {
    const double ratio = kept["compression_ratio"];
    if (std::find(c.kept_ratios.begin(), c.kept_ratios.end(), ratio) == c.kept_ratios.end()) continue;
    SCOPED_TRACE("compression_ratio " + std::to_string(ratio));
    const int64_t n_kept = kept["n_kept"];
    const std::vector<float>* scores = &res.scores;
    rkv::ScoreResult budgeted;
    if (by_budget) {  // this ratio's own scores, with every KV head keeping n_kept
      const std::vector<int64_t> budgets(static_cast<size_t>(Hkv), n_kept);
      budgeted = rkv::run_scorer(p.inst, p.req, p.call(&budgets));
      expected = scores_of(kept["scores"], Hkv, T);
      expect_scores(c, budgeted.scores, expected, Hkv, T, c.fixture + " at " + std::to_string(n_kept) + " kept");
      scores = &budgeted.scores;
    }
    const rkv::Selection sel = rkv::select_positions(scores->data(), Hkv, T, n_kept, p.req.protected_spec(), 0);
    heads_identical += expect_kept(c, sel, kept, expected, Hkv, T);
    heads_compared += Hkv;
  }
  EXPECT_EQ(heads_compared, static_cast<int64_t>(c.kept_ratios.size()) * Hkv);
  std::printf("%s: kept positions identical to kvpress's on %lld of %lld (ratio, KV head) pairs, the rest equal up to "
              "kvpress's ties\n", c.fixture.c_str(), static_cast<long long>(heads_identical),
              static_cast<long long>(heads_compared));
}

INSTANTIATE_TEST_SUITE_P(Presses, KvpressFixture, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.fixture; });

TEST(KvpressFixtureFiles, NonCausalAttentionRefusesPromptsLongerThanMaxTokens) {
  // It requests the last max_tokens queries; on a longer prompt it would score with some queries missing.
  const Layer& L = layer();
  const rkv::PluginInfo& info = registry().resolve("non_causal_attention", RKV_KIND_SCORER);
  rkv::HostServices host;
  const rkv::PluginInstance inst = rkv::PluginInstance::create(
      info, rkv::ParamSet::validate(*info.descriptor, {P("max_tokens", I(100))}), host);
  const rkv::ScorerRequirements req =
      rkv::query_scorer_requirements(inst, rkv_attention_shape{sizeof(rkv_attention_shape), 30, L.H, L.Hkv, L.d});
  EXPECT_EQ(req.window, 100);
  rkv::LayerKV kv;
  kv.n_kv_heads = L.Hkv;
  kv.head_dim = L.d;
  kv.capacity = kv.length = L.T;
  kv.k = L.k;
  kv.v = L.v;
  const std::vector<float> wq = rkv::window_queries(rkv::QueriesView{L.q.data(), L.H, L.T, L.d}, 100);
  rkv::ScorerCallInputs in;
  in.n_heads = L.H;
  in.kv = &kv;
  in.window_queries = &wq;
  try {
    rkv::run_scorer(inst, req, in);
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("longer than max_tokens = 100"), std::string::npos) << e.what();
  }
}

TEST(KvpressFixtureFiles, EveryPressCaseIsChecked) {
  // A press case added to the fixture without a test here fails, so nothing is silently unchecked.
  std::vector<std::string> tested = {"critical_adakv_snapkv_w8"};  // test_kvpress_allocation.cpp
  for (const auto& c : cases()) tested.push_back(c.fixture);
  for (const auto& p : layer().presses)
    EXPECT_NE(std::find(tested.begin(), tested.end(), p["name"].get<std::string>()), tested.end()) << p["name"];
}

TEST(KvpressFixtureFiles, KeptCountsAreKvpressTruncation) {
  // kvpress keeps int(T (1 - ratio)) (compute_n_kept); 1 - 0.9 = 0.09999999999999998 in binary, so at T = 300 it keeps
  // 29 where ripplekv's floor(f T + 0.5) with f = 0.1 keeps 30. The fixture's counts pin that difference.
  const json& knorm = press_case("knorm");
  std::vector<int64_t> counts;
  for (const auto& k : knorm["kept"]) counts.push_back(k["n_kept"]);
  EXPECT_EQ(counts, (std::vector<int64_t>{29, 90, 150}));
}

}  // namespace
