// One table-driven matrix that any scorer plugin runs through: tiny hand-built caches whose kept positions are worked
// out by hand below, pushed through the whole host path with the real .so plugins found by
// PluginRegistry::discover() (build/lib/ripplekv/plugins):
//   ParamSet::validate -> PluginInstance::create -> query_scorer_requirements -> compute_attention_stats
//   -> compress_layer (run_scorer -> select_positions -> compact_layer).
//
// How the caches are built (so that attention is computable by hand). Each case gives, per query head h and key j,
// a positive weight w[h][j]. Head dim d = 2, G = 2 query heads per KV head. The key of KV head g at position j is
// k = (ln w[2g][j], ln w[2g+1][j]); every query of head h (any position t) is q = sqrt(2) e_{h mod 2}. The logit is
// q . k / sqrt(d) = ln w[h][j], so the causal softmax is
//     A[h, t, j] = w[h][j] / Z_h(t),      Z_h(t) = sum_{i <= t} w[h][i].
// Weights 1 give logits exactly 0, hence uniform attention A = 1 / (t + 1) with bitwise-equal entries (exact ties).
// Values: v[g][j] = (1000 * layer + 100 * g + j, -j), so the compacted rows name their source position.
//
// SnapKV window votes: for a non-window key j < T - w, all w window queries see j, so
//     a[h, j] = w[h][j] * C_h,   C_h = sum_{t = T-w}^{T-1} 1 / Z_h(t).
// When every head's weights sum to the same totals (as in every case below) C_h is the same C for all heads, and the
// order of the votes is the order of the weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "cache/attention_stats.hpp"
#include "cache/layer_compression.hpp"
#include "plugin/params.hpp"
#include "plugin/registry.hpp"
#include "plugin/scorer_call.hpp"

namespace {

using Positions = std::vector<int64_t>;

struct LayerCase {
  std::vector<std::vector<double>> weights;  ///< [H][T], H = 2 * H_kv
  int64_t budget;                            ///< b_l
  std::vector<Positions> kept;               ///< per KV head, ascending; empty: the layer stays untouched
  bool warning;                              ///< a "below the protected count" warning is expected
};

struct ScorerCase {
  std::string name;
  std::string scorer;  ///< plugin id
  std::vector<rkv::UserParam> params;
  int64_t T;
  std::vector<LayerCase> layers;
};

rkv::UserParam P(const std::string& k, rkv::ParamValue v) { return rkv::UserParam{k, std::move(v), false, "test"}; }
rkv::ParamValue I(int64_t v) { return rkv::ParamValue(v); }
rkv::ParamValue S(const char* v) { return rkv::ParamValue(std::string(v)); }

std::vector<double> ones(int64_t T) { return std::vector<double>(static_cast<size_t>(T), 1.0); }

/// gtest prints the case name instead of the bytes of the struct.
void PrintTo(const ScorerCase& c, std::ostream* os) { *os << c.name; }

const char* kSnap = "org.ripplekv.scorer.snapkv";
const char* kH2O = "org.ripplekv.scorer.h2o";
const char* kStream = "org.ripplekv.scorer.streamingllm";
const char* kKnorm = "org.ripplekv.scorer.knorm";
const char* kTova = "org.ripplekv.scorer.tova";

std::vector<ScorerCase> cases() {
  std::vector<ScorerCase> c;
  const int64_t T = 10;
  const auto u = ones(T);

  // ---- snapkv: GQA aggregation, mean vs max (kernel 1 = no pooling; window 2 = keys 8, 9) ----------------------
  // Head 0 weights a = [1 6 4 1 1 1 2 1 | 1 1], head 1 weights b = [1 1 4 1 5 1 3 1 | 1 1]. Both sum to 17 over the
  // non-window keys, so Z(8) = 18, Z(9) = 19 for both heads and C = 1/18 + 1/19 = 37/342 ~ 0.1082.
  //   mean: C (a + b) / 2 ~ C * [1, 3.5, 4, 1, 3, 1, 2.5, 1]  -> top 2: j2 (4), j1 (3.5)   -> kept {1, 2, 8, 9}
  //   max:  C max(a, b)   = C * [1, 6,   4, 1, 5, 1, 3,   1]  -> top 2: j1 (6), j4 (5)     -> kept {1, 4, 8, 9}
  // Budget 5 gives the same set for both (mean adds j4 = 3, max adds j2 = 4): {1, 2, 4, 8, 9}.
  const std::vector<double> ga = {1, 6, 4, 1, 1, 1, 2, 1, 1, 1}, gb = {1, 1, 4, 1, 5, 1, 3, 1, 1, 1};
  c.push_back({"snapkv_gqa_mean", kSnap, {P("window", I(2)), P("kernel", I(1)), P("gqa", S("mean"))}, T,
               {{{ga, gb}, 4, {{1, 2, 8, 9}}, false}, {{ga, gb}, 5, {{1, 2, 4, 8, 9}}, false}}});
  c.push_back({"snapkv_gqa_max", kSnap, {P("window", I(2)), P("kernel", I(1)), P("gqa", S("max"))}, T,
               {{{ga, gb}, 4, {{1, 4, 8, 9}}, false}, {{ga, gb}, 5, {{1, 2, 4, 8, 9}}, false}}});

  // ---- snapkv: max vs avg pooling at the edges (kernel 3, pad 1; window 2; both heads alike) ------------------
  // Votes over the non-window keys 0..7 are C * w with w = [2 4 3 1 1 1 1 5] (C common). Budget 5 = window + 3.
  //   max (-inf padding):  j0 max(2,4)=4, j1 max(2,4,3)=4, j2 max(4,3,1)=4, j3 max(3,1,1)=3, j4 1, j5 1,
  //                        j6 max(1,1,5)=5, j7 max(1,5)=5
  //                        -> j6, j7 (5, tie -> both), then the tie 4 at j0, j1, j2 goes to j0 -> kept {0, 6, 7, 8, 9}
  //   avg (zero padding counted, /3): j0 (0+2+4)/3=2, j1 (2+4+3)/3=3, j2 (4+3+1)/3=8/3, j3 5/3, j4 1, j5 1,
  //                        j6 (1+1+5)/3=7/3, j7 (1+5+0)/3=2
  //                        -> j1 (3), j2 (8/3), j6 (7/3); both edges j0, j7 (2) lose -> kept {1, 2, 6, 8, 9}
  const std::vector<double> ew = {2, 4, 3, 1, 1, 1, 1, 5, 1, 1};
  c.push_back({"snapkv_pool_max_edges", kSnap, {P("window", I(2)), P("kernel", I(3)), P("pooling", S("max"))}, T,
               {{{ew, ew}, 5, {{0, 6, 7, 8, 9}}, false}}});
  c.push_back({"snapkv_pool_avg_edges", kSnap, {P("window", I(2)), P("kernel", I(3)), P("pooling", S("avg"))}, T,
               {{{ew, ew}, 5, {{1, 2, 6, 8, 9}}, false}}});

  // ---- snapkv: pooling kernel larger than T (kernel 11 > T = 10; pad 5; 8 non-window keys) --------------------
  // Votes C * w, w = [8 1 1 1 1 1 1 1]. The pooling window of j covers keys max(0, j-5) .. min(7, j+5):
  //   j0: 0..5, j1: 0..6, j2..j5: 0..7, j6: 1..7, j7: 2..7.
  //   max: key 0 (8) lies in the windows of j0..j5 -> all 8C; tie -> earliest: top 2 = j0, j1 -> kept {0, 1, 8, 9}
  //   avg: sums j0 13, j1 14, j2..j5 15, j6 7, j7 6 (each /11) -> top 2: j2, j3 (15, tie -> earlier)
  //        -> kept {2, 3, 8, 9}
  const std::vector<double> kw = {8, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  c.push_back({"snapkv_kernel_gt_T_max", kSnap, {P("window", I(2)), P("kernel", I(11)), P("pooling", S("max"))}, T,
               {{{kw, kw}, 4, {{0, 1, 8, 9}}, false}}});
  c.push_back({"snapkv_kernel_gt_T_avg", kSnap, {P("window", I(2)), P("kernel", I(11)), P("pooling", S("avg"))}, T,
               {{{kw, kw}, 4, {{2, 3, 8, 9}}, false}}});

  // ---- snapkv: ties (uniform attention, every vote exactly C = 1/9 + 1/10, default kernel 7, pad 3) -----------
  //   max: every pooled value is C -> all tie -> earliest: j0, j1, j2 -> kept {0, 1, 2, 8, 9}
  //   avg: in-range counts j0 4, j1 5, j2 6, j3 7, j4 7, j5 6, j6 5, j7 4 (times C/7) -> j3, j4 (7), then the tie
  //        j2 = j5 (6) goes to j2 -> kept {2, 3, 4, 8, 9}
  // Second layer, 2 KV heads; KV head 1 has the edge weights w = [2 4 3 1 1 1 1 5] above, now under kernel 7: the
  // window of j covers j-3 .. j+3, so j0..j3 reach key 1 (4) but not key 7, and j4..j7 reach key 7 (5)
  //   -> pooled [4 4 4 4 5 5 5 5] -> top 3: j4, j5, j6 (tie at 5 -> earliest) -> {4, 5, 6, 8, 9}.
  // The two KV heads of one layer keep the same count at different positions.
  c.push_back({"snapkv_ties_max", kSnap, {P("window", I(2)), P("pooling", S("max"))}, T,
               {{{u, u}, 5, {{0, 1, 2, 8, 9}}, false},
                {{u, u, ew, ew}, 5, {{0, 1, 2, 8, 9}, {4, 5, 6, 8, 9}}, false}}});
  c.push_back({"snapkv_ties_avg", kSnap, {P("window", I(2)), P("pooling", S("avg"))}, T,
               {{{u, u}, 5, {{2, 3, 4, 8, 9}}, false}}});

  // ---- snapkv: window >= T (default window 32 is clamped to T = 10: every position is the window, protected) ---
  //   b_l = 6 < protected count 10: keep the 6 most recent (recent priority is most recent first) -> {4..9}, warning
  //   b_l = 10 >= T and b_l = 12 >= T: untouched
  c.push_back({"snapkv_window_ge_T", kSnap, {}, T,
               {{{ga, gb}, 6, {{4, 5, 6, 7, 8, 9}}, true}, {{ga, gb}, 10, {}, false}}});
  // ---- snapkv: b_l >= T leaves the layer untouched; b_l below the protected count (window 4, b_l 3) ----------
  c.push_back({"snapkv_budget_ge_T", kSnap, {P("window", I(2))}, T, {{{ga, gb}, 12, {}, false}}});
  c.push_back({"snapkv_budget_below_window", kSnap, {P("window", I(4))}, T, {{{ga, gb}, 3, {{7, 8, 9}}, true}}});

  // ---- h2o: cumulative attention, GQA mean, recent 2, 2 KV heads ---------------------------------------------
  // KV head 0: query head 0 weights 1 except w[3] = 4; query head 1 weights 1 except w[6] = 4. KV head 1: uniform.
  //   head 0: Z(t) = t+1 for t < 3, t+4 for t >= 3 -> 1/Z = [1, 1/2, 1/3, 1/7, 1/8, 1/9, 1/10, 1/11, 1/12, 1/13].
  //     Suffix sums S0(j) = sum_{t>=j} 1/Z(t): S0(9) .0769, S0(8) .1603, S0(7) .2512, S0(6) .3512, S0(5) .4623,
  //     S0(4) .5873, S0(3) .7301, S0(2) 1.0635, S0(1) 1.5635, S0(0) 2.5635.
  //     cum0[j] = w[j] S0(j) = [2.5635, 1.5635, 1.0635, 4 * .7301 = 2.9205, .5873, .4623, .3512, .2512, .1603, .0769]
  //   head 1: Z(t) = t+1 for t < 6, t+4 for t >= 6 -> 1/Z = [1, 1/2, 1/3, 1/4, 1/5, 1/6, 1/10, 1/11, 1/12, 1/13].
  //     S1 = [2.8012, 1.8012, 1.3012, .9678, .7178, .5178, .3512, .2512, .1603, .0769]
  //     cum1 = [2.8012, 1.8012, 1.3012, .9678, .7178, .5178, 4 * .3512 = 1.4047, .2512, .1603, .0769]
  //   normalize = false: mean = [2.6823, 1.6823, 1.1823, 1.9442, .6526, .4901, .8779, .2512 | ...]
  //     b_l 5 = recent {8, 9} + top 3: j0 2.68, j3 1.94, j1 1.68 -> {0, 1, 3, 8, 9}
  //   normalize = true (divide by T - j = 10, 9, ..., 3 for j = 0..7):
  //     head 0: [.2564, .1737, .1329, .4172, .0979, .0925, .0878, .0837]
  //     head 1: [.2801, .2001, .1627, .1383, .1196, .1036, .3512, .0837]
  //     mean:   [.2682, .1869, .1478, .2777, .1088, .0980, .2195, .0837]
  //     top 3: j3 .2777, j0 .2682, j6 .2195 -> {0, 3, 6, 8, 9}   (j1 .1869 is now behind j6)
  //   KV head 1 (uniform): cum[j] = sum_{t>=j} 1/(t+1) decreases with j, and so does cum[j] / (10 - j) (a mean of a
  //     decreasing sequence over a shrinking tail) -> top 3 = j0, j1, j2 -> {0, 1, 2, 8, 9} in both modes.
  const std::vector<double> h0 = {1, 1, 1, 4, 1, 1, 1, 1, 1, 1}, h1 = {1, 1, 1, 1, 1, 1, 4, 1, 1, 1};
  c.push_back({"h2o_gqa_mean", kH2O, {P("recent", I(2))}, T,
               {{{h0, h1, u, u}, 5, {{0, 1, 3, 8, 9}, {0, 1, 2, 8, 9}}, false}}});
  c.push_back({"h2o_normalize", kH2O, {P("recent", I(2)), P("normalize", rkv::ParamValue(true))}, T,
               {{{h0, h1, u, u}, 5, {{0, 3, 6, 8, 9}, {0, 1, 2, 8, 9}}, false}}});
  // b_l below the protected count: recent 4, b_l 3 -> the 3 most recent {7, 8, 9}, warning.
  // recent >= T (default 32 clamped to 10): b_l 5 -> {5..9}, warning; b_l 10 -> untouched.
  c.push_back({"h2o_budget_below_recent", kH2O, {P("recent", I(4))}, T, {{{h0, h1}, 3, {{7, 8, 9}}, true}}});
  c.push_back({"h2o_recent_ge_T", kH2O, {}, T,
               {{{h0, h1}, 5, {{5, 6, 7, 8, 9}}, true}, {{h0, h1}, 10, {}, false}}});

  // ---- streamingllm: sinks + most recent (scores = position) ------------------------------------------------
  //   sinks 4, b_l 6: {0, 1, 2, 3} + the 2 most recent {8, 9}; with 2 KV heads both keep the same.
  //   b_l 4 = sinks: {0, 1, 2, 3}, no warning (not below the protected count).
  //   b_l 3 < sinks: {0, 1, 2} (sinks in order), warning.      b_l 10: untouched.
  //   sinks 0, b_l 3: the 3 most recent {7, 8, 9}.
  c.push_back({"streamingllm_sinks_recent", kStream, {}, T,
               {{{u, u, u, u}, 6, {{0, 1, 2, 3, 8, 9}, {0, 1, 2, 3, 8, 9}}, false},
                {{u, u}, 4, {{0, 1, 2, 3}}, false}}});
  c.push_back({"streamingllm_budget_le_sinks", kStream, {}, T,
               {{{u, u}, 3, {{0, 1, 2}}, true}, {{u, u}, 10, {}, false}}});
  c.push_back({"streamingllm_no_sinks", kStream, {P("sinks", I(0))}, T, {{{ga, gb}, 3, {{7, 8, 9}}, false}}});

  // ---- kvpress ports (tests/scorers/test_kvpress_fixtures.cpp checks them against kvpress itself) ----------------
  // knorm: key (ln a_j, ln b_j) has norm 0 exactly where both weights are 1 (j = 0, 3, 5, 7, 8, 9): those score
  // -0 = 0, the highest, and tie; the host takes the earliest: budget 3 -> {0, 3, 5}. Budget 7 adds the next best,
  // the smallest nonzero norm: j6 (ln 2, ln 3) = 1.27 < j1 (ln 6, 0) = 1.79 -> {0, 3, 5, 6, 7, 8, 9}.
  c.push_back({"knorm_zero_norms_tie", kKnorm, {}, T,
               {{{ga, gb}, 3, {{0, 3, 5}}, false}, {{ga, gb}, 7, {{0, 3, 5, 6, 7, 8, 9}}, false}}});
  // tova: the last query's attention A[h, 9, j] = w_h[j] / Z_h(9), Z = 19 for both heads, mean over the 2 heads:
  // (a + b) / 38 = [2, 7, 8, 2, 6, 2, 5, 2, 2, 2] / 38; position 9 protected. Budget 3: {9} + j2 (8), j1 (7).
  // Budget 5 adds j4 (6) and j6 (5).
  c.push_back({"tova_last_query", kTova, {}, T,
               {{{ga, gb}, 3, {{1, 2, 9}}, false}, {{ga, gb}, 5, {{1, 2, 4, 6, 9}}, false}}});
  return c;
}

const rkv::PluginRegistry& registry() {
  static const rkv::PluginRegistry r = rkv::PluginRegistry::discover();
  return r;
}

class ScorerMatrix : public ::testing::TestWithParam<ScorerCase> {};

TEST_P(ScorerMatrix, KeepsHandComputedPositions) {
  const ScorerCase& sc = GetParam();
  const rkv::PluginInfo& info = registry().resolve(sc.scorer, RKV_KIND_SCORER);
  // The plugin really is a separate shared library in the build's plugin folder.
  EXPECT_NE(info.library->path.find("ripplekv/plugins/rkv_scorer_"), std::string::npos) << info.library->path;
  const rkv::ParamSet params = rkv::ParamSet::validate(*info.descriptor, sc.params);
  rkv::HostServices host;
  const int64_t T = sc.T, d = 2, G = 2;

  for (size_t l = 0; l < sc.layers.size(); ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    const LayerCase& lc = sc.layers[l];
    const int64_t H = static_cast<int64_t>(lc.weights.size()), Hkv = H / G;
    // One instance per layer: layers of a case may differ in head count (1 or 2 KV heads).
    const rkv_attention_shape shape{sizeof(rkv_attention_shape), static_cast<int64_t>(sc.layers.size()), H, Hkv, d};
    const rkv::PluginInstance inst = rkv::PluginInstance::create(info, params, host);
    const rkv::ScorerRequirements req = rkv::query_scorer_requirements(inst, shape);

    // Cache with spare capacity on odd layers (exercises the strided key path and the contiguous copy).
    rkv::LayerKV kv;
    kv.n_kv_heads = Hkv;
    kv.head_dim = d;
    kv.capacity = T + static_cast<int64_t>(l % 2) * 3;
    kv.length = T;
    kv.k.assign(static_cast<size_t>(Hkv * kv.capacity * d), 0.0f);
    kv.v.assign(kv.k.size(), 0.0f);
    for (int64_t g = 0; g < Hkv; ++g)
      for (int64_t j = 0; j < T; ++j) {
        kv.k_at(g, j)[0] = static_cast<float>(std::log(lc.weights[static_cast<size_t>(2 * g)][static_cast<size_t>(j)]));
        kv.k_at(g, j)[1] = static_cast<float>(std::log(lc.weights[static_cast<size_t>(2 * g + 1)][static_cast<size_t>(j)]));
        kv.v_at(g, j)[0] = static_cast<float>(1000 * static_cast<int64_t>(l) + 100 * g + j);
        kv.v_at(g, j)[1] = static_cast<float>(-j);
      }
    const rkv::LayerKV original = kv;
    std::vector<float> q(static_cast<size_t>(H * T * d), 0.0f);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) q[static_cast<size_t>((h * T + t) * d + h % 2)] = std::sqrt(2.0f);

    const rkv::AttentionStats stats = rkv::compute_attention_stats(
        rkv::QueriesView{q.data(), H, T, d}, rkv::KeysView{kv.k.data(), Hkv, T, d, kv.capacity * d},
        req.stats_options());
    const rkv::LayerCompression res =
        rkv::compress_layer(inst, req, kv, {static_cast<int64_t>(l), H, lc.budget, -1, &stats, nullptr});

    const bool warned = std::any_of(res.warnings.begin(), res.warnings.end(), [](const std::string& w) {
      return w.find("below the scorer's protected count") != std::string::npos;
    });
    EXPECT_EQ(warned, lc.warning);

    if (lc.kept.empty()) {
      EXPECT_TRUE(res.selection.untouched);
      EXPECT_TRUE(res.compaction.untouched);
      EXPECT_EQ(kv.length, T);
      EXPECT_EQ(kv.capacity, original.capacity);
      EXPECT_EQ(kv.k, original.k);
      EXPECT_EQ(kv.v, original.v);
      continue;
    }
    ASSERT_FALSE(res.selection.untouched);
    ASSERT_EQ(static_cast<int64_t>(lc.kept.size()), Hkv);
    for (int64_t g = 0; g < Hkv; ++g) {
      SCOPED_TRACE("KV head " + std::to_string(g));
      const Positions& want = lc.kept[static_cast<size_t>(g)];
      ASSERT_EQ(static_cast<int64_t>(want.size()), lc.budget);
      const Positions got(res.selection.head_positions(g), res.selection.head_positions(g) + res.selection.kept);
      EXPECT_EQ(got, want);
      // Compacted rows are the original rows of the kept positions, in order.
      for (int64_t i = 0; i < lc.budget; ++i) {
        const int64_t p = want[static_cast<size_t>(i)];
        EXPECT_EQ(kv.k_at(g, i)[0], original.k_at(g, p)[0]);
        EXPECT_EQ(kv.k_at(g, i)[1], original.k_at(g, p)[1]);
        EXPECT_EQ(kv.v_at(g, i)[0], static_cast<float>(1000 * static_cast<int64_t>(l) + 100 * g + p));
        EXPECT_EQ(kv.v_at(g, i)[1], static_cast<float>(-p));
      }
    }
    EXPECT_EQ(kv.length, lc.budget);
    EXPECT_EQ(kv.capacity, lc.budget);
    EXPECT_EQ(res.compaction.bytes_before, original.bytes());
    EXPECT_EQ(res.compaction.bytes_after, static_cast<size_t>(2 * Hkv * lc.budget * d) * sizeof(float));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, ScorerMatrix, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<ScorerCase>& i) { return i.param.name; });

}  // namespace
