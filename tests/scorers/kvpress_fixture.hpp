// The kvpress reference fixture (tests/fixtures/kvpress: one seeded synthetic layer, the presses' scores and kept
// positions, written by tests/reference/make_kvpress_fixtures.py) and the host path a test runs a ripplekv plugin
// through on it, as a run does: ParamSet::validate -> PluginInstance::create -> query_scorer_requirements ->
// compute_attention_stats / window_queries / value_output_norms -> run_scorer -> select_positions. Shared by
// test_kvpress_fixtures.cpp (the scorer presses) and test_kvpress_allocation.cpp (head and layer splits).
//
// Thread rules: single-threaded tests; the fixture is loaded once per process and never written.
#pragma once
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "backend/cpu/value_output_norms.hpp"
#include "cache/attention_stats.hpp"
#include "cache/kv_cache.hpp"
#include "cache/selection.hpp"
#include "model/rope.hpp"
#include "plugin/allocator_call.hpp"
#include "plugin/params.hpp"
#include "plugin/registry.hpp"
#include "plugin/scorer_call.hpp"

namespace rkv_kvpress_fixture {

using json = nlohmann::json;

inline const std::string kDir = std::string(RKV_TEST_SOURCE_DIR) + "/tests/fixtures/kvpress/";

struct Layer {
  int64_t H = 0, Hkv = 0, d = 0, T = 0;
  std::vector<float> k, v, q;  // [Hkv, T, d], [Hkv, T, d], [H, T, d]
  std::vector<float> k0, q0;   // before RoPE: [Hkv, T, d], [H, T, d] (layer_prerope.f32)
  std::vector<float> wo;       // o_proj [(H + Hkv) d, H d] (layer_wo.i8 / 64)
  json presses;
  json root;                   // all of presses.json
};

inline const Layer& layer() {
  static const Layer L = [] {
    Layer l;
    std::ifstream jf(kDir + "presses.json");
    if (!jf) throw std::runtime_error("missing " + kDir + "presses.json");
    const json j = json::parse(jf);
    l.H = j["shape"]["n_heads"];
    l.Hkv = j["shape"]["n_kv_heads"];
    l.d = j["shape"]["head_dim"];
    l.T = j["shape"]["prefix_tokens"];
    l.presses = j["presses"];
    l.root = j;
    std::ifstream bf(kDir + "layer.f32", std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(bf)), std::istreambuf_iterator<char>());
    const size_t nkv = static_cast<size_t>(l.Hkv * l.T * l.d), nq = static_cast<size_t>(l.H * l.T * l.d);
    if (bytes.size() != (2 * nkv + nq) * sizeof(float)) throw std::runtime_error("layer.f32 has the wrong size");
    const float* f = reinterpret_cast<const float*>(bytes.data());
    l.k.assign(f, f + nkv);
    l.v.assign(f + nkv, f + 2 * nkv);
    l.q.assign(f + 2 * nkv, f + 2 * nkv + nq);
    std::ifstream pf(kDir + "layer_prerope.f32", std::ios::binary);
    std::vector<char> pre((std::istreambuf_iterator<char>(pf)), std::istreambuf_iterator<char>());
    if (pre.size() != (nkv + nq) * sizeof(float)) throw std::runtime_error("layer_prerope.f32 has the wrong size");
    const float* p = reinterpret_cast<const float*>(pre.data());
    l.k0.assign(p, p + nkv);
    l.q0.assign(p + nkv, p + nkv + nq);
    std::ifstream wf(kDir + "layer_wo.i8", std::ios::binary);
    std::vector<char> wo((std::istreambuf_iterator<char>(wf)), std::istreambuf_iterator<char>());
    if (wo.size() != static_cast<size_t>((l.H + l.Hkv) * l.d * l.H * l.d))
      throw std::runtime_error("layer_wo.i8 has the wrong size");
    for (char b : wo) l.wo.push_back(static_cast<float>(static_cast<int8_t>(b)) / 64.0f);
    return l;
  }();
  return L;
}

inline const json& press_case(const std::string& name) {
  for (const auto& p : layer().presses)
    if (p["name"] == name) return p;
  throw std::runtime_error("no press case '" + name + "' in presses.json");
}

struct Case {
  std::string fixture;                 ///< press case name in presses.json
  std::string plugin;                  ///< ripplekv plugin id
  std::vector<rkv::UserParam> params;  ///< ripplekv params that reproduce the kvpress arguments
  float scale = 1.0f;                  ///< kvpress score = ours * scale (snapkv: kvpress averages, we sum, over w)
  /// Positions whose scores are compared (default all); kvpress's sentinel scores elsewhere are conventions.
  std::function<bool(int64_t j, int64_t T)> compare_score = nullptr;
  bool compare_scores = true;
  /// Ratios whose kept positions are compared (kvpress's choice elsewhere is a torch.topk tie-break).
  std::vector<double> kept_ratios = {0.9, 0.7, 0.5};
  double tol = 1e-5;  ///< relative score tolerance
  /// ChunkKV: the fixture holds the inner press's scores (ChunkKVPress has no score() of its own); the expected
  /// scores are then kvpress's chunk scores computed here from them: sum over KV heads, mean over the chunk's
  /// positions (the remainder chunk over its own), broadcast to every position of the chunk and every head.
  int64_t chunk = 0;
  /// Leverage: the cache holds K0 rotated by the host's own RoPE (model/rope.hpp, angles in double), so the pre-RoPE
  /// keys the host turns back are K0 to float rounding. The fixture's post-RoPE keys were rotated by transformers
  /// with float32 angles (up to 1.5e-5 rad off at T = 300); turned back exactly they differ from K0 by 4e-6
  /// relative, which the leverage's (X^T X)^{-1} amplifies to 6e-4 (measured with k = 16). Compactor needs the
  /// fixture's own post-RoPE keys for its attention part, so it gets those (its leverage part is weighted by
  /// blending and stays within CMP_TOL).
  bool host_rotated_keys = false;
};

inline void PrintTo(const Case& c, std::ostream* os) { *os << c.fixture; }

inline rkv::UserParam P(const std::string& k, rkv::ParamValue v) { return rkv::UserParam{k, std::move(v), false, "test"}; }
inline rkv::ParamValue I(int64_t v) { return rkv::ParamValue(v); }
inline rkv::ParamValue S(const char* v) { return rkv::ParamValue(std::string(v)); }
inline rkv::ParamValue B(bool v) { return rkv::ParamValue(v); }
inline rkv::ParamValue F(double v) { return rkv::ParamValue(v); }

inline const rkv::PluginRegistry& registry() {
  static const rkv::PluginRegistry r = rkv::PluginRegistry::discover();
  return r;
}


/// A scorer plugin set up on the fixture's layer as a run sets it up, with the inputs of one score() call.
struct Prepared {
  rkv::PluginInstance inst;
  rkv::ScorerRequirements req;
  rkv::LayerKV kv;
  std::vector<double> inv_freq;
  rkv::AttentionStats stats;
  std::vector<float> wq, norms;

  /// The call's inputs; `budgets` ([H_kv]) for a budget-dependent scorer, null for its budget-free ranking.
  rkv::ScorerCallInputs call(const std::vector<int64_t>* budgets = nullptr) const {
    rkv::ScorerCallInputs in;
    in.layer = 0;
    in.n_heads = layer().H;
    in.kv = &kv;
    in.stats = &stats;
    in.window_queries = req.wants(RKV_STAT_WINDOW_QUERIES) ? &wq : nullptr;
    in.rope_inv_freq = &inv_freq;
    in.value_output_norms = req.wants(RKV_STAT_VALUE_OUTPUT_NORMS) ? &norms : nullptr;
    in.head_budgets = budgets;
    return in;
  }
};

/// `kind`: RKV_KIND_SCORER, or RKV_KIND_SIGNAL for a per-prompt signal (rkv.prompt_signal/1: the same inputs).
inline Prepared prepare(const std::string& plugin, const std::vector<rkv::UserParam>& user, bool host_rotated_keys,
                        rkv_plugin_kind kind = RKV_KIND_SCORER) {
  const Layer& L = layer();
  const int64_t T = L.T, Hkv = L.Hkv, H = L.H, d = L.d;
  const rkv::PluginInfo& info = registry().resolve(plugin, kind);
  const rkv::ParamSet params = rkv::ParamSet::validate(*info.descriptor, user);
  static rkv::HostServices host;  // an instance keeps a pointer to its host for life
  rkv::PluginInstance inst = rkv::PluginInstance::create(info, params, host);
  const rkv_attention_shape shape{sizeof(rkv_attention_shape), 30, H, Hkv, d};
  Prepared p{std::move(inst), {}, {}, {}, {}, {}, {}};
  p.req = rkv::query_scorer_requirements(p.inst, shape);
  rkv::LayerKV& kv = p.kv;
  kv.n_kv_heads = Hkv;
  kv.head_dim = d;
  kv.capacity = T;
  kv.length = T;
  kv.k = L.k;
  kv.v = L.v;
  p.inv_freq = rkv::rope_inv_freq(d, 10000.0, rkv::RopeScaling{});
  if (host_rotated_keys) {
    kv.k = L.k0;
    for (int64_t g = 0; g < Hkv; ++g)
      for (int64_t j = 0; j < T; ++j) rkv::rope_rotate_by(kv.k.data() + (g * T + j) * d, p.inv_freq, j);
  }
  const rkv::QueriesView qv{L.q.data(), H, T, d};
  p.stats = rkv::compute_attention_stats(qv, rkv::KeysView{kv.k.data(), Hkv, T, d, T * d}, p.req.stats_options());
  if (p.req.wants(RKV_STAT_QUERY_MOMENTS))
    rkv::add_query_moments(rkv::QueriesView{L.q0.data(), H, T, d}, p.req.query_skip, p.stats);
  if (p.req.wants(RKV_STAT_WINDOW_QUERIES)) p.wq = rkv::window_queries(qv, p.req.effective_window(T));
  if (p.req.wants(RKV_STAT_VALUE_OUTPUT_NORMS)) {  // the CPU backend's ||W_o v||_1 from the fixture's o_proj
    rkv::cpu::WeightRef wo;
    wo.f32 = L.wo.data();
    wo.rows = (H + Hkv) * d;
    wo.cols = H * d;
    p.norms = rkv::cpu::value_output_norms(kv, wo, H);
  }
  return p;
}

/// kvpress's scores [H_kv][T] as doubles, row-major.
inline std::vector<double> scores_of(const json& rows, int64_t Hkv, int64_t T) {
  std::vector<double> out(static_cast<size_t>(Hkv * T));
  for (int64_t g = 0; g < Hkv; ++g)
    for (int64_t j = 0; j < T; ++j) out[static_cast<size_t>(g * T + j)] = rows[static_cast<size_t>(g)][static_cast<size_t>(j)];
  return out;
}

/// |ours * scale - kvpress| within c.tol (relative, with the floor described at the top) on the compared positions.
inline void expect_scores(const Case& c, const std::vector<float>& ours, const std::vector<double>& expected, int64_t Hkv,
                   int64_t T, const std::string& what) {
  // kvpress's float32 max (CriticalKV's stage 1, printed as 3.40282347e+38) is a sentinel: ours must be FLT_MAX
  // there, and it is left out of the floor's max_j |kvpress| so it does not swamp the other entries' tolerance.
  const auto sentinel = [](double x) { return x >= 3.4e38; };
  double worst = 0.0;
  int64_t compared = 0, sentinels = 0;
  for (int64_t g = 0; g < Hkv; ++g) {
    const double* row = expected.data() + g * T;
    double maxabs = 0.0;
    for (int64_t j = 0; j < T; ++j)
      if (!sentinel(row[j])) maxabs = std::max(maxabs, std::fabs(row[j]));
    for (int64_t j = 0; j < T; ++j) {
      if (c.compare_score && !c.compare_score(j, T)) continue;
      const double want = row[j];
      const double got = static_cast<double>(ours[static_cast<size_t>(g * T + j)]) * c.scale;
      if (sentinel(want) || got == static_cast<double>(FLT_MAX)) {
        EXPECT_TRUE(sentinel(want) && got == static_cast<double>(FLT_MAX))
            << what << ": KV head " << g << ", position " << j << ": ours " << got << ", kvpress " << want;
        ++sentinels;
        continue;
      }
      const double denom = std::max(std::fabs(want), 1e-3 * maxabs);
      const double rel = denom > 0 ? std::fabs(got - want) / denom : std::fabs(got - want);
      worst = std::max(worst, rel);
      ++compared;
      EXPECT_LE(rel, c.tol) << what << ": KV head " << g << ", position " << j << ": ours " << got << ", kvpress " << want;
    }
  }
  EXPECT_GT(compared, T);
  std::printf("%s: %lld scores compared, worst relative difference %.3g", what.c_str(), static_cast<long long>(compared),
              worst);
  if (sentinels > 0) std::printf("; %lld stage-1 (FLT_MAX) entries equal", static_cast<long long>(sentinels));
  std::printf("\n");
}

/// Kept positions. With the scores compared, kvpress's kept set is determined only up to its ties: with b = the
/// lowest kvpress score among the positions kvpress kept, every position scored above b must be kept by both, and
/// every position ripplekv keeps must score at least b (within the score tolerance); which of the positions tied at
/// b are kept is torch.topk's order in kvpress and the earlier position (or the protected one) here. Without compared
/// scores (streamingllm) the sets must be equal. Returns the number of KV heads whose sets are identical.
inline int64_t expect_kept(const Case& c, const rkv::Selection& sel, const json& kept, const std::vector<double>& expected,
                    int64_t Hkv, int64_t T) {
  int64_t identical = 0;
  for (int64_t g = 0; g < Hkv; ++g) {
    const std::vector<int64_t> want = kept["positions"][static_cast<size_t>(g)].get<std::vector<int64_t>>();
    const std::vector<int64_t> got(sel.head_positions(g), sel.head_positions(g) + sel.head_kept_count(g));
    if (got == want) {
      ++identical;
      continue;
    }
    EXPECT_TRUE(c.compare_scores) << "KV head " << g << ", " << want.size() << " kept: ours differ from kvpress's";
    if (!c.compare_scores) continue;
    EXPECT_EQ(got.size(), want.size()) << "KV head " << g;
    if (got.size() != want.size() || want.empty()) continue;
    const double* r = expected.data() + g * T;
    double b = r[want[0]], maxabs = 0.0;
    for (int64_t j : want) b = std::min(b, r[j]);
    for (int64_t j = 0; j < T; ++j) maxabs = std::max(maxabs, std::fabs(r[j]));
    const double slack = c.tol * std::max(std::fabs(b), 1e-3 * maxabs);
    for (int64_t j = 0; j < T; ++j) {
      const bool in_got = std::binary_search(got.begin(), got.end(), j);
      const bool in_want = std::binary_search(want.begin(), want.end(), j);
      if (r[j] > b + slack) {
        EXPECT_TRUE(in_got && in_want) << "KV head " << g << ", position " << j << " (kvpress score " << r[j]
                                       << " > boundary " << b << ") kept by ours " << in_got << ", kvpress " << in_want;
      }
      if (in_got) EXPECT_GE(r[j], b - slack) << "KV head " << g << ": ours keep position " << j << " scored " << r[j]
                                              << " below kvpress's boundary " << b;
    }
  }
  return identical;
}
}  // namespace rkv_kvpress_fixture
