// Scorer conformance (conformance/conformance.hpp, check_scorer): the rules of docs/ARCHITECTURE.md "Budget semantics" that hold
// for every scorer, on seeded random queries, keys and values, through the host's real path (the statistics as
// ScoreMemo::scores computes them, call_scorer, and compress_layer = run_scorer -> select_positions -> compact_layer).
#include <algorithm>
#include <cmath>
#include <limits>
#include <cstring>
#include <exception>
#include <set>
#include <sstream>
#include <stdexcept>

#include "cache/attention_stats.hpp"
#include "cache/layer_compression.hpp"
#include "cache/selection.hpp"
#include "model/rope.hpp"
#include "model/synthetic_model.hpp"
#include "conformance/conformance.hpp"
#include "conformance/conformance_rule.hpp"
#include "plugin/instance.hpp"
#include "conformance/conformance_inputs.hpp"
#include "plugin/scorer_call.hpp"

namespace rkv {

namespace {

using conformance::RuleTally;
using namespace conformance;  // Shape, Input, make_input (conformance_inputs.hpp)

std::string str(int64_t v) { return std::to_string(v); }

/// b_l values to try for a prompt of T positions with `pc` protected: 1, around the protected count, between it and
/// T, T - 1, T and above T.
std::vector<int64_t> budgets_for(int64_t T, int64_t pc) {
  std::set<int64_t> b = {1, pc - 1, pc, pc + 1, (pc + T) / 2, T - 1, T, T + 5};
  std::vector<int64_t> out;
  for (int64_t x : b)
    if (x >= 1) out.push_back(x);
  return out;
}

/// The tallies of the per-input rules.
struct Tallies {
  RuleTally finite{"scores_finite"}, deterministic{"deterministic"}, budget{"budget_respected"},
      kept{"protected_kept"}, priority{"protected_priority"};
};

/// Empty when a and b are bitwise equal, else where they first differ.
std::string first_difference(const std::vector<float>& a, const std::vector<float>& b, int64_t T) {
  if (a.size() != b.size()) return "sizes " + str(static_cast<int64_t>(a.size())) + " and " + str(static_cast<int64_t>(b.size()));
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      std::ostringstream os;
      os.precision(9);
      os << "KV head " << static_cast<int64_t>(i) / T << ", position " << static_cast<int64_t>(i) % T << ": " << a[i]
         << " then " << b[i];
      return os.str();
    }
  return "";
}

/// Every rule on one input. `fresh` creates a new instance (with its requirements) for the determinism check, which
/// is skipped when `determinism` is false.
template <typename Fresh>
void check_input(const PluginInstance& inst, const ScorerRequirements& req, const Input& in, Fresh&& fresh,
                 bool determinism, Tallies& t) {
  const int64_t T = in.T, Hkv = in.shape.Hkv, d = in.shape.d;
  // scores_finite
  ScoreResult first;
  try {
    first = call_scorer(inst, req, in.call());
  } catch (const std::exception& e) {
    t.finite.fail(in.label + ": " + e.what());
    t.deterministic.skip(), t.budget.skip(), t.kept.skip(), t.priority.skip();
    return;
  }
  if (first.scores.size() != static_cast<size_t>(Hkv * T)) {
    t.finite.fail(in.label + ": " + str(static_cast<int64_t>(first.scores.size())) + " scores, expected [H_kv, T]");
    t.deterministic.skip(), t.budget.skip(), t.kept.skip(), t.priority.skip();
    return;
  }
  for (int64_t i = 0; i < Hkv * T; ++i)
    if (!std::isfinite(first.scores[static_cast<size_t>(i)])) {
      std::ostringstream os;
      os << in.label << ": score " << first.scores[static_cast<size_t>(i)] << " at KV head " << i / T << ", position "
         << i % T;
      t.finite.fail(os.str());
      t.deterministic.skip(), t.budget.skip(), t.kept.skip(), t.priority.skip();
      return;
    }
  t.finite.pass();

  // deterministic: the same instance again, then a fresh instance with the same params
  if (determinism) try {
    const ScoreResult again = call_scorer(inst, req, in.call());
    std::string diff = first_difference(first.scores, again.scores, T);
    if (diff.empty()) {
      auto [other, other_req] = fresh();
      const ScoreResult third = call_scorer(other, other_req, in.call());
      diff = first_difference(first.scores, third.scores, T);
      if (!diff.empty()) diff = "a fresh instance differs at " + diff;
    } else {
      diff = "a second call differs at " + diff;
    }
    if (diff.empty())
      t.deterministic.pass();
    else
      t.deterministic.fail(in.label + ": " + diff);
  } catch (const std::exception& e) {
    t.deterministic.fail(in.label + ": " + e.what());
  }

  // budget_respected, protected_kept, protected_priority: through the run's compression of one layer
  const std::vector<int64_t> prot = protected_positions(T, req.protected_spec());
  const int64_t pc = static_cast<int64_t>(prot.size());
  for (int64_t b : budgets_for(T, pc)) {
    const std::string where = in.label + ", b_l " + str(b);
    LayerKV kv = in.kv;
    LayerCompressionRequest r;
    r.layer = in.layer;
    r.n_heads = in.shape.H;
    r.budget = b;
    r.prefix_tokens = T;
    r.stats = in.has_stats ? &in.stats : nullptr;
    r.window_queries = in.has_window_queries ? &in.window_queries : nullptr;
    r.window = in.window;
    r.rope_inv_freq = &in.inv_freq;
    r.value_output_norms = in.value_output_norms.empty() ? nullptr : &in.value_output_norms;
    LayerCompression res;
    try {
      res = compress_layer(inst, req, kv, r);
    } catch (const std::exception& e) {
      t.budget.fail(where + ": " + e.what());
      continue;
    }
    const Selection& sel = res.selection;
    std::string bad;
    if (b >= T) {
      if (!sel.untouched || kv.length != T || kv.k != in.kv.k || kv.v != in.kv.v)
        bad = "b_l >= T but the layer was not left whole";
    } else if (sel.untouched || sel.kept != b || static_cast<int64_t>(sel.positions.size()) != Hkv * b) {
      bad = "kept " + str(sel.kept) + " positions per head, expected " + str(b);
    } else if (kv.length != b || kv.capacity != b) {
      bad = "the compacted layer holds " + str(kv.length) + " positions, expected " + str(b);
    } else {
      for (int64_t h = 0; h < Hkv && bad.empty(); ++h) {
        const int64_t* p = sel.head_positions(h);
        for (int64_t i = 0; i < b && bad.empty(); ++i) {
          if (p[i] < 0 || p[i] >= T || (i > 0 && p[i] <= p[i - 1]))
            bad = "KV head " + str(h) + " keeps position " + str(p[i]) + " out of order or outside [0, T)";
          else if (std::memcmp(kv.k_at(h, i), in.kv.k_at(h, p[i]), static_cast<size_t>(d) * sizeof(float)) != 0 ||
                   std::memcmp(kv.v_at(h, i), in.kv.v_at(h, p[i]), static_cast<size_t>(d) * sizeof(float)) != 0)
            bad = "compacted row " + str(i) + " of KV head " + str(h) + " is not position " + str(p[i]);
        }
      }
    }
    if (bad.empty())
      t.budget.pass();
    else
      t.budget.fail(where + ": " + bad);
    if (b >= T || !bad.empty()) continue;

    // Protected positions: all of them when they fit, else the first b_l in priority order with a warning.
    const bool fits = b >= pc;
    std::string miss;
    for (int64_t h = 0; h < Hkv && miss.empty(); ++h) {
      const int64_t* p = sel.head_positions(h);
      const std::set<int64_t> kept_set(p, p + b);
      for (int64_t k = 0; k < std::min(b, pc) && miss.empty(); ++k)
        if (!kept_set.count(prot[static_cast<size_t>(k)]))
          miss = "KV head " + str(h) + " dropped protected position " + str(prot[static_cast<size_t>(k)]) +
                 " (priority " + str(k) + " of " + str(pc) + ")";
    }
    if (!fits && miss.empty()) {
      const bool warned = std::any_of(res.warnings.begin(), res.warnings.end(), [](const std::string& w) {
        return w.find("protected count") != std::string::npos;
      });
      if (!warned) miss = "no warning that b_l is below the protected count " + str(pc);
    }
    RuleTally& rule = fits ? t.kept : t.priority;
    if (miss.empty())
      rule.pass();
    else
      rule.fail(where + ": " + miss);
  }
}

std::string describe_requirements(const ScorerRequirements& r) {
  std::ostringstream os;
  os << "window " << r.window << ", sinks " << r.sinks << ", recent " << r.recent;
  if (r.wants(RKV_STAT_QUERY_MOMENTS)) os << ", query_skip " << r.query_skip;
  os << ", stats {";
  const std::pair<uint64_t, const char*> names[] = {{RKV_STAT_KEYS, "keys"},
                                                    {RKV_STAT_VALUES, "values"},
                                                    {RKV_STAT_WINDOW_ATTENTION, "window_attention"},
                                                    {RKV_STAT_CUMULATIVE_ATTENTION, "cumulative_attention"},
                                                    {RKV_STAT_WINDOW_QUERIES, "window_queries"},
                                                    {RKV_STAT_PRE_ROPE_KEYS, "pre_rope_keys"},
                                                    {RKV_STAT_QUERY_MOMENTS, "query_moments"},
                                                    {RKV_STAT_VALUE_OUTPUT_NORMS, "value_output_norms"}};
  bool first = true;
  for (const auto& [bit, name] : names)
    if (r.wants(bit)) os << (first ? "" : ", ") << name, first = false;
  os << "}";
  if (r.budget_dependent == RKV_BUDGET_FINAL)
    os << ", budget-dependent (scored again for each layer's head budgets; allocators read its budget-free ranking)";
  if (r.budget_dependent == RKV_BUDGET_ALLOCATION)
    os << ", budget-dependent (scored again for each layer's head budgets, allocators included)";
  return os.str();
}

bool same_requirements(const ScorerRequirements& a, const ScorerRequirements& b) {
  return a.stats == b.stats && a.window == b.window && a.sinks == b.sinks && a.recent == b.recent &&
         a.query_skip == b.query_skip && a.budget_dependent == b.budget_dependent;
}


}  // namespace

/// A model shape whose requirements() succeeded, with its instance.
struct Usable {
  size_t shape_index;
  Shape shape;
  PluginInstance instance;
  ScorerRequirements req;
};

/// The decode-time matrix: for a scorer that declares decode_scoring, every usable shape x held lengths
/// {2, 9, 64} x decoded-window sizes {1, window} (clamped to T), random and peaked, through the rules of
/// check_input with the decode requirements (decode_stats; protection of the first and last entries held).
/// Appends decode_scores_finite, decode_budget_respected and decode_protected_kept, or one "not applicable" case
/// "decode_time" for a prefill-only scorer.
void check_decode_time(const std::vector<Usable>& usable, std::vector<ConformanceCase>& cases) {
  if (usable.empty()) {  // requirements() failed or were refused on every shape: nothing to score at decode time
    cases.push_back({"decode_time", false, "no shape had valid requirements"});
    return;
  }
  if (!usable.front().req.decode_scoring) {
    cases.push_back({"decode_time", true,
                     "not applicable: the scorer declares no decode-time scoring (decode_scoring = 0: prefill only)"});
    return;
  }
  Tallies t;
  int64_t n_inputs = 0;
  const auto no_fresh = []() -> std::pair<PluginInstance, ScorerRequirements> {
    throw std::logic_error("no determinism check at decode time");
  };
  for (const Usable& u : usable) {
    const ScorerRequirements req = u.req.for_decode();
    for (int64_t T : {2, 9, 64})
      for (int64_t w : {int64_t{1}, std::max<int64_t>(1, req.window)})
        for (Variant v : {Variant::random, Variant::peaked}) {
          ++n_inputs;
          const uint64_t seed = 7919ull * (u.shape_index + 1) + 101ull * static_cast<uint64_t>(T) + static_cast<uint64_t>(w);
          Input in;
          try {
            in = make_input(u.shape, T, v, 1, req, seed, w);
          } catch (const std::exception& e) {
            t.finite.fail("decode time, T " + str(T) + ": the host could not build the statistics: " + e.what());
            continue;
          }
          in.label = "decode time, " + in.label + ", " + str(in.window) + " decoded queries";
          check_input(u.instance, req, in, no_fresh, false, t);
        }
  }
  const std::string over = str(n_inputs) + " decode-time inputs (held T in {2, 9, 64} x 1 or window decoded queries)";
  ConformanceCase finite = t.finite.result("[H_kv, T] float32, all finite on " + over);
  finite.name = "decode_scores_finite";
  cases.push_back(finite);
  ConformanceCase budget = t.budget.result(str(t.budget.checked()) + " (input, target) pairs: min(target, T) entries "
                                           "per head, protected entries first");
  budget.name = "decode_budget_respected";
  cases.push_back(budget);
  ConformanceCase kept = t.kept.result(str(t.kept.checked()) + " (input, target) pairs with protected count <= target < T",
                                       "not applicable: the scorer protects no entry below T");
  kept.name = "decode_protected_kept";
  cases.push_back(kept);
}

std::vector<ConformanceCase> check_scorer(const PluginInfo& info, const ParamSet& params) {
  std::vector<ConformanceCase> cases;
  HostServices host;
  try {
    const PluginInstance probe = PluginInstance::create(info, params, host);
    cases.push_back({"create", true, "params: " + (params.to_string().empty() ? "(none)" : params.to_string())});
  } catch (const std::exception& e) {
    cases.push_back({"create", false, e.what()});
    return cases;
  }
  auto fresh_for = [&](const Shape& s) {
    return [&info, &params, &host, s]() {
      PluginInstance other = PluginInstance::create(info, params, host);
      const ScorerRequirements r = query_scorer_requirements(other, attention_shape_of(s));
      return std::make_pair(std::move(other), r);
    };
  };

  // requirements: one instance per shape, requirements() once per instance (the ABI's rule: "called once per
  // instance and model"); a second instance must declare the same.
  RuleTally requirements("requirements");
  std::vector<Usable> usable;
  std::string first_declared;
  for (size_t si = 0; si < std::size(kShapes); ++si) {
    const Shape& s = kShapes[si];
    const std::string label = "H " + str(s.H) + " / H_kv " + str(s.Hkv) + " / d " + str(s.d);
    try {
      auto [inst, a] = fresh_for(s)();
      const ScorerRequirements b = fresh_for(s)().second;
      if (!same_requirements(a, b)) {
        requirements.fail(label + ": two instances declared different requirements (" + describe_requirements(a) +
                          " then " + describe_requirements(b) + ")");
        continue;
      }
      if (first_declared.empty()) first_declared = describe_requirements(a) + " (for " + label + ")";
      requirements.pass();
      usable.push_back(Usable{si, s, std::move(inst), a});
    } catch (const std::exception& e) {
      requirements.fail(label + ": " + e.what());
    }
  }
  cases.push_back(requirements.result(first_declared + "; the same from two instances, " +
                                      str(requirements.checked()) + " shapes"));

  // The matrix of inputs.
  Tallies t;
  int64_t n_inputs = 0;
  for (const Usable& u : usable) {
    const Shape& s = u.shape;
    const ScorerRequirements& req = u.req;
    const uint64_t si = u.shape_index;
    for (size_t ti = 0; ti < std::size(kLengths); ++ti)
      for (size_t vi = 0; vi < std::size(kVariants); ++vi) {
        const int64_t layer = static_cast<int64_t>((ti + vi) % kLayers);
        const uint64_t seed = 1000003ull * (si + 1) + 1009ull * (ti + 1) + 17ull * (vi + 1);
        ++n_inputs;
        Input in;
        try {
          in = make_input(s, kLengths[ti], kVariants[vi], layer, req, seed);
        } catch (const std::exception& e) {
          t.finite.fail("H " + str(s.H) + " / H_kv " + str(s.Hkv) + " / d " + str(s.d) + ", T " + str(kLengths[ti]) +
                        ": the host could not build the requested statistics: " + e.what());
          t.deterministic.skip(), t.budget.skip(), t.kept.skip(), t.priority.skip();
          continue;
        }
        check_input(u.instance, req, in, fresh_for(s), true, t);
      }
  }
  const std::string over = str(n_inputs) + " inputs (" + str(static_cast<int64_t>(usable.size())) +
                           " shapes x T in {1, 7, 64, 300} x random / tied / peaked)";
  cases.push_back(t.finite.result("[H_kv, T] float32, all finite on " + over));
  cases.push_back(t.deterministic.result("bitwise equal on a second call and a fresh instance, " + over));
  cases.push_back(t.budget.result(str(t.budget.checked()) +
                                  " (input, b_l) pairs, b_l from 1 to T + 5: min(b_l, T) distinct positions per head, "
                                  "compacted cache of b_l rows"));
  cases.push_back(t.kept.result(str(t.kept.checked()) + " (input, b_l) pairs with protected count <= b_l < T",
                                "not applicable: the scorer protects no position below T"));
  cases.push_back(t.priority.result(str(t.priority.checked()) +
                                        " (input, b_l) pairs with b_l below the protected count: sinks first, then "
                                        "the most recent, and a warning",
                                    "not applicable: the scorer protects at most one position"));

  // decode_*: the same rules on decode-time inputs (abi/ripplekv/plugin.h "Decode-time scoring") for a scorer that
  // declares decode_scoring: the cache as held while decoding (T entries), the decode_stats statistics over the
  // 1 .. window tokens decoded since the last compression.
  check_decode_time(usable, cases);

  // short_prompt: the same rules on a prompt shorter than the scorer's window or protected span.
  if (usable.empty()) {
    cases.push_back({"short_prompt", false, "no shape had valid requirements"});
  } else {
    const Shape& s = usable.front().shape;
    const ScorerRequirements& req = usable.front().req;
    // sinks and recent are each at most INT64_MAX: their sum saturates instead of overflowing
    const int64_t protected_span =
        req.sinks > std::numeric_limits<int64_t>::max() - req.recent ? std::numeric_limits<int64_t>::max()
                                                                     : req.sinks + req.recent;
    const int64_t span = std::max(req.window, protected_span);
    constexpr int64_t kLongestShortPrompt = 4096;  // T = span - 1 beyond this is no short prompt to synthesize
    if (span <= 1) {
      cases.push_back({"short_prompt", true, "not applicable: window " + str(req.window) + ", protected span " +
                                                 str(protected_span)});
    } else if (span - 1 > kLongestShortPrompt) {
      cases.push_back({"short_prompt", true, "not applicable: window " + str(req.window) + ", protected span " +
                                                 str(protected_span) + " (every prompt up to T = " +
                                                 str(kLongestShortPrompt) + " is shorter)"});
    } else {
      Tallies st;
      const int64_t T = span - 1;
      try {
        const Input in = make_input(s, T, Variant::random, 0, req, 4242);
        check_input(usable.front().instance, req, in, fresh_for(s), false, st);
      } catch (const std::exception& e) {
        st.finite.fail("T " + str(T) + ": the host could not build the requested statistics: " + e.what());
      }
      ConformanceCase c{"short_prompt", true, ""};
      for (const RuleTally* r : {&st.finite, &st.budget, &st.kept, &st.priority}) {
        const ConformanceCase sub = r->result("");
        if (!sub.passed) {
          c.passed = false;
          c.detail = sub.name + ": " + sub.detail;
          break;
        }
      }
      if (c.passed)
        c.detail = "T = " + str(T) + " < window / protected span " + str(span) + ": scores finite, " +
                   str(st.budget.checked()) + " budgets respected, protected positions kept";
      cases.push_back(c);
    }
  }
  return cases;
}

}  // namespace rkv
