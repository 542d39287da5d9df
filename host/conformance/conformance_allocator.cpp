// Allocator conformance (conformance/conformance.hpp, check_allocator): docs/ARCHITECTURE.md "Budget semantics" ("Allocator output:
// |A| finite, non-negative reals whose sum is within 1e-6 * B of B"; the host's integerization), on a fixed set of
// requests, through call_allocator (the plugin's answer as written) and run_allocator (the run's path).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <numeric>
#include <sstream>

#include "model/synthetic_model.hpp"
#include "plugin/allocator_call.hpp"
#include "conformance/conformance.hpp"
#include "conformance/conformance_rule.hpp"
#include "plugin/instance.hpp"

namespace rkv {

namespace {

using conformance::RuleTally;

struct Request {
  std::string label;
  int64_t n_layers, T, B;
  std::vector<double> profile;  ///< passed only to allocators that need a profile
  int64_t protected_count;      ///< -1: standalone `allocate`
  std::vector<int64_t> spans = {};  ///< layer_spans (empty: all T)
};

/// Gemma 3 270M's spans at T: 15 sliding layers of min(T, 512), global layers 5, 11, 17 of T.
std::vector<int64_t> gemma_spans(int64_t T) {
  std::vector<int64_t> s(18, std::min<int64_t>(T, 512));
  for (int64_t l : {5, 11, 17}) s[static_cast<size_t>(l)] = T;
  return s;
}

std::vector<double> random_profile(int64_t n, uint64_t seed, double offset) {
  SyntheticRng rng(seed);
  std::vector<double> p(static_cast<size_t>(n));
  for (auto& x : p) x = offset + static_cast<double>(rng.next());
  return p;
}

std::vector<Request> requests() {
  std::vector<Request> r;
  r.push_back({"one layer", 1, 100, 37, {0.5}, 32});
  r.push_back({"B = |A| (one position per layer)", 4, 64, 4, random_profile(4, 1, 0.0), 32});
  r.push_back({"B = |A| T - 1", 4, 64, 255, random_profile(4, 2, 1.0), 32});
  r.push_back({"B = |A| T (everything kept)", 4, 64, 256, random_profile(4, 3, 0.0), -1});
  r.push_back({"T = 1", 3, 1, 3, random_profile(3, 4, 0.0), 1});
  r.push_back({"SmolLM2 shape, f = 0.2", 30, 1024, 6144, random_profile(30, 5, 0.0), 32});
  r.push_back({"negative profile", 6, 200, 300, {-0.9, -0.1, -3.0, -0.5, -2.2, -1.0}, 8});
  r.push_back({"constant profile", 6, 200, 600, std::vector<double>(6, 0.7), -1});
  r.push_back({"wide-range profile", 5, 50, 100, {-1e6, 0.0, 3.0, 1e6, -2.0}, 4});
  r.push_back({"extreme finite profile", 3, 50, 60, {1e308, -1e308, 0.0}, 4});  // max - min overflows a double
  r.push_back({"protected count above B / |A|", 8, 512, 128, random_profile(8, 6, 2.0), 32});
  r.push_back({"B not a multiple of |A|", 7, 100, 101, random_profile(7, 7, 0.5), 0});
  // Layers with different spans (sliding windows): B = 0.25 sum span; every b_l must stay within its span.
  r.push_back({"Gemma 3 spans, f = 0.25", 18, 2048, 3456, random_profile(18, 8, 0.0), 32, gemma_spans(2048)});
  r.push_back({"Gemma 3 spans, f = 0.9", 18, 2048, 12442, random_profile(18, 9, 0.0), -1, gemma_spans(2048)});
  return r;
}

std::string str(int64_t v) { return std::to_string(v); }

std::string label_of(const Request& q) {
  return q.label + " (|A| " + str(q.n_layers) + ", T " + str(q.T) + ", B " + str(q.B) + ", protected " +
         str(q.protected_count) + ")";
}

}  // namespace

std::vector<ConformanceCase> check_allocator(const PluginInfo& info, const ParamSet& params) {
  std::vector<ConformanceCase> cases;
  HostServices host;
  std::vector<PluginInstance> instances;
  try {
    instances.push_back(PluginInstance::create(info, params, host));
    cases.push_back({"create", true, "params: " + (params.to_string().empty() ? "(none)" : params.to_string())});
  } catch (const std::exception& e) {
    cases.push_back({"create", false, e.what()});
    return cases;
  }
  const PluginInstance& inst = instances.front();
  if (serves_head_budgets(inst)) {
    const std::vector<ConformanceCase> heads = check_head_allocator(info, params, inst);
    cases.insert(cases.end(), heads.begin(), heads.end());
    if (!serves_layer_budgets(inst)) return cases;  // a per-head allocator only: the rkv.allocator/1 rules do not apply
  }

  RuleTally call("allocate_call"), finite("finite"), non_negative("non_negative"), sums("sums_to_B"),
      integer("integer_budgets"), deterministic("deterministic");
  const std::vector<Request> reqs = requests();
  for (const Request& q : reqs) {
    const std::string where = label_of(q);
    Allocation a;
    try {
      a = call_allocator(inst, q.profile, q.B, q.T, q.n_layers, q.protected_count, q.spans);
      call.pass();
    } catch (const std::exception& e) {
      call.fail(where + ": " + e.what());
      finite.skip(), non_negative.skip(), sums.skip(), integer.skip(), deterministic.skip();
      continue;
    }
    const std::vector<double>& x = a.raw;
    bool ok = true;
    for (size_t l = 0; l < x.size() && ok; ++l)
      if (!std::isfinite(x[l])) {
        finite.fail(where + ": layer " + str(static_cast<int64_t>(l)) + " got " + std::to_string(x[l]));
        ok = false;
      }
    if (!ok) {
      non_negative.skip(), sums.skip(), integer.skip(), deterministic.skip();
      continue;
    }
    finite.pass();
    for (size_t l = 0; l < x.size() && ok; ++l)
      if (x[l] < 0) {
        non_negative.fail(where + ": layer " + str(static_cast<int64_t>(l)) + " got " + std::to_string(x[l]));
        ok = false;
      }
    if (ok) non_negative.pass();
    const double sum = std::accumulate(x.begin(), x.end(), 0.0);
    if (std::fabs(sum - static_cast<double>(q.B)) > 1e-6 * static_cast<double>(q.B)) {
      std::ostringstream os;
      os.precision(12);
      os << where << ": sum " << sum << ", off by " << sum - static_cast<double>(q.B) << " (tolerance 1e-6 B)";
      sums.fail(os.str());
      ok = false;
    } else {
      sums.pass();
    }

    // The run's path: validation and integerization.
    if (!ok) {
      integer.skip();
    } else {
      try {
        const Allocation run = run_allocator(inst, q.profile, q.B, q.T, q.n_layers, q.protected_count, q.spans);
        std::string bad;
        if (static_cast<int64_t>(run.budgets.size()) != q.n_layers)
          bad = str(static_cast<int64_t>(run.budgets.size())) + " budgets";
        else if (std::accumulate(run.budgets.begin(), run.budgets.end(), int64_t{0}) != q.B)
          bad = "integer budgets do not sum to B";
        for (size_t l = 0; l < run.budgets.size() && bad.empty(); ++l) {
          const int64_t cap = q.spans.empty() ? q.T : q.spans[l];
          if (run.budgets[l] < 1 || run.budgets[l] > cap)
            bad = "layer " + str(static_cast<int64_t>(l)) + " gets " + str(run.budgets[l]) + ", outside [1, span " +
                  str(cap) + "]";
        }
        if (bad.empty())
          integer.pass();
        else
          integer.fail(where + ": " + bad);
      } catch (const std::exception& e) {
        integer.fail(where + ": " + e.what());
      }
    }

    // deterministic: a second call and a fresh instance give the same bits.
    try {
      const Allocation again = call_allocator(inst, q.profile, q.B, q.T, q.n_layers, q.protected_count, q.spans);
      const PluginInstance other = PluginInstance::create(info, params, host);
      const Allocation third = call_allocator(other, q.profile, q.B, q.T, q.n_layers, q.protected_count, q.spans);
      std::string diff;
      for (size_t l = 0; l < x.size() && diff.empty(); ++l) {
        const char* who = std::memcmp(&x[l], &again.raw[l], sizeof(double)) != 0   ? "a second call"
                          : std::memcmp(&x[l], &third.raw[l], sizeof(double)) != 0 ? "a fresh instance"
                                                                                     : nullptr;
        if (who) {
          std::ostringstream os;
          os.precision(17);
          os << who << " differs at layer " << l << ": " << x[l] << " then "
             << (std::strcmp(who, "a second call") == 0 ? again.raw[l] : third.raw[l]);
          diff = os.str();
        }
      }
      if (diff.empty())
        deterministic.pass();
      else
        deterministic.fail(where + ": " + diff);
    } catch (const std::exception& e) {
      deterministic.fail(where + ": " + e.what());
    }
  }
  const std::string over = str(static_cast<int64_t>(reqs.size())) +
                           " requests (one layer, B = |A|, B = |A| T - 1, B = |A| T, T = 1, 30 layers, negative / "
                           "constant / wide-range / +-1e308 profiles, protected count -1 .. above B / |A|, Gemma 3 layer spans)";
  cases.push_back(call.result("allocate() succeeds on " + over));
  cases.push_back(finite.result("every x_l finite on " + str(finite.checked()) + " requests"));
  cases.push_back(non_negative.result("every x_l >= 0 on " + str(non_negative.checked()) + " requests"));
  cases.push_back(sums.result("sum x_l within 1e-6 B of B on " + str(sums.checked()) + " requests"));
  cases.push_back(integer.result("host integerization: sum exactly B, 1 <= b_l <= T on " + str(integer.checked()) +
                                 " requests"));
  cases.push_back(deterministic.result("bitwise equal on a second call and a fresh instance, " +
                                       str(deterministic.checked()) + " requests"));
  return cases;
}

}  // namespace rkv
