// Per-head allocator conformance ("rkv.allocator/2"; conformance/conformance.hpp, check_head_allocator): on a fixed
// set of requests with seeded scores, through run_head_allocator (the run's path: the plugin's answer validated and
// integerized): the call succeeds with finite, non-negative reals summing to H_kv B (each row to H_kv b_l when layer
// budgets are given); the integer budgets keep every row's sum exactly and every head within [floor, T]; and a second
// call and a fresh instance give the same bits.
#include <cstring>
#include <exception>
#include <numeric>
#include <sstream>

#include "cache/selection.hpp"
#include "conformance/conformance.hpp"
#include "conformance/conformance_rule.hpp"
#include "model/synthetic_model.hpp"
#include "plugin/allocator_call.hpp"
#include "plugin/instance.hpp"

namespace rkv {

namespace {

using conformance::RuleTally;

struct HeadRequest {
  std::string label;
  int64_t n_layers, n_kv_heads, T, B;
  int64_t sinks, recent;             ///< the protected positions (-1 sinks: no scorer, no mask)
  std::vector<int64_t> layer_budgets;///< empty: the plugin splits B itself
  uint64_t seed;
};

std::vector<HeadRequest> head_requests() {
  std::vector<HeadRequest> r;
  r.push_back({"one layer, one head", 1, 1, 50, 20, 2, 4, {}, 1});
  r.push_back({"SmolLM2 shape, f = 0.2", 30, 3, 256, 1536, 4, 16, {}, 2});
  r.push_back({"composed with layer budgets", 4, 2, 64, 100, 1, 8, {10, 20, 30, 40}, 3});
  r.push_back({"layer budgets at T and at 1", 3, 4, 32, 65, 0, 0, {32, 1, 32}, 4});
  r.push_back({"protected count above b_l", 2, 2, 100, 20, 4, 32, {}, 5});
  r.push_back({"B = |A| T (everything kept)", 3, 2, 16, 48, 1, 2, {}, 6});
  r.push_back({"no scorer (no protected mask)", 5, 2, 40, 77, -1, 0, {}, 7});
  r.push_back({"T = 1", 3, 2, 1, 3, 0, 1, {}, 8});
  return r;
}

std::string str(int64_t v) { return std::to_string(v); }

HeadAllocationInputs inputs_of(const HeadRequest& q, const PluginInstance& inst, std::vector<float>& scores) {
  HeadAllocationInputs in;
  const uint64_t flags = inst.info().descriptor->flags;
  if (flags & RKV_FLAG_NEEDS_PROFILE) {
    SyntheticRng rng(q.seed + 100);
    for (int64_t l = 0; l < q.n_layers; ++l) in.profile.push_back(static_cast<double>(rng.next()));
  }
  SyntheticRng rng(q.seed);
  scores.resize(static_cast<size_t>(q.n_layers * q.n_kv_heads * q.T));
  for (auto& s : scores) s = rng.next();
  in.scores = &scores;
  if (q.sinks >= 0) {
    in.protected_mask.assign(static_cast<size_t>(q.T), 0);
    const std::vector<int64_t> prot = protected_positions(q.T, ProtectedSpec{q.sinks, q.recent});
    for (int64_t p : prot) in.protected_mask[static_cast<size_t>(p)] = 1;
    in.protected_count = static_cast<int64_t>(prot.size());
  }
  in.layer_budgets = q.layer_budgets.empty() ? nullptr : &q.layer_budgets;
  in.budget_total = q.B;
  in.prefix_tokens = q.T;
  in.n_layers = q.n_layers;
  in.n_kv_heads = q.n_kv_heads;
  return in;
}

}  // namespace

std::vector<ConformanceCase> check_head_allocator(const PluginInfo& info, const ParamSet& params,
                                                  const PluginInstance& inst) {
  std::vector<ConformanceCase> cases;
  HostServices host;  // for the fresh instance of the determinism rule
  RuleTally call("allocate_heads_call"), integer("head_integer_budgets"), deterministic("head_deterministic");
  const std::vector<HeadRequest> reqs = head_requests();
  for (const HeadRequest& q : reqs) {
    const std::string where = q.label + " (|A| " + str(q.n_layers) + ", H_kv " + str(q.n_kv_heads) + ", T " +
                              str(q.T) + ", B " + str(q.B) + ")";
    std::vector<float> scores;
    const HeadAllocationInputs in = inputs_of(q, inst, scores);
    HeadAllocation a;
    try {
      a = run_head_allocator(inst, in);
      call.pass();
    } catch (const std::exception& e) {
      call.fail(where + ": " + e.what());
      integer.skip(), deterministic.skip();
      continue;
    }
    std::string bad;
    if (static_cast<int64_t>(a.budgets.size()) != q.n_layers) bad = str(static_cast<int64_t>(a.budgets.size())) + " rows";
    if (bad.empty() && std::accumulate(a.layer_budgets.begin(), a.layer_budgets.end(), int64_t{0}) != q.B)
      bad = "layer budgets do not sum to B";
    for (int64_t l = 0; l < q.n_layers && bad.empty(); ++l) {
      const auto& row = a.budgets[static_cast<size_t>(l)];
      const int64_t b = std::min(a.layer_budgets[static_cast<size_t>(l)], q.T);
      const int64_t lo = std::max<int64_t>(1, std::min(in.protected_count, b));
      if (!q.layer_budgets.empty() && a.layer_budgets[static_cast<size_t>(l)] != q.layer_budgets[static_cast<size_t>(l)])
        bad = "layer rank " + str(l) + " changed its given budget";
      else if (std::accumulate(row.begin(), row.end(), int64_t{0}) != q.n_kv_heads * b)
        bad = "layer rank " + str(l) + "'s heads do not sum to H_kv b_l = " + str(q.n_kv_heads * b);
      for (size_t h = 0; h < row.size() && bad.empty(); ++h)
        if (row[h] < lo || row[h] > q.T)
          bad = "layer rank " + str(l) + ", KV head " + str(static_cast<int64_t>(h)) + " gets " + str(row[h]) +
                ", outside [" + str(lo) + ", T]";
    }
    if (bad.empty())
      integer.pass();
    else
      integer.fail(where + ": " + bad);
    try {
      const HeadAllocation again = run_head_allocator(inst, in);
      const PluginInstance other = PluginInstance::create(info, params, host);
      const HeadAllocation third = run_head_allocator(other, in);
      const size_t n = a.raw.size() * sizeof(double);
      if (std::memcmp(a.raw.data(), again.raw.data(), n) != 0)
        deterministic.fail(where + ": a second call differs");
      else if (std::memcmp(a.raw.data(), third.raw.data(), n) != 0)
        deterministic.fail(where + ": a fresh instance differs");
      else
        deterministic.pass();
    } catch (const std::exception& e) {
      deterministic.fail(where + ": " + e.what());
    }
  }
  const std::string over = str(static_cast<int64_t>(reqs.size())) +
                           " requests (one head, 30 layers x 3 heads, given layer budgets incl. T and 1, protected "
                           "count above b_l, B = |A| T, no scorer, T = 1)";
  cases.push_back(call.result("allocate_heads() succeeds with finite reals >= 0 summing to H_kv B (rows to H_kv b_l) "
                              "on " + over));
  cases.push_back(integer.result("host integerization: rows exactly H_kv b_l, heads in [min(protected, b_l), T] on " +
                                 str(integer.checked()) + " requests"));
  cases.push_back(deterministic.result("bitwise equal on a second call and a fresh instance, " +
                                       str(deterministic.checked()) + " requests"));
  return cases;
}

}  // namespace rkv
