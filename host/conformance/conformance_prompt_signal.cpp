// Per-prompt signal conformance (conformance/conformance.hpp, check_prompt_signal): a signal serving
// rkv.prompt_signal/1 is called on the scorer kit's seeded layers (conformance_inputs.hpp) with the statistics it
// requested and nothing else, through call_prompt_signal, as ScoreMemo::prompt_profile calls it in a run.
#include <cmath>
#include <cstring>
#include <exception>
#include <sstream>

#include "conformance/conformance.hpp"
#include "conformance/conformance_inputs.hpp"
#include "conformance/conformance_rule.hpp"
#include "plugin/instance.hpp"
#include "plugin/prompt_signal_call.hpp"
#include "plugin/scorer_call.hpp"

namespace rkv {

namespace {

using namespace conformance;

std::string str(int64_t v) { return std::to_string(v); }

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

std::string shape_label(const Shape& s) {
  return "H " + str(s.H) + " / H_kv " + str(s.Hkv) + " / d " + str(s.d);
}

}  // namespace

std::vector<ConformanceCase> check_prompt_signal(const PluginInfo& info, const ParamSet& params) {
  std::vector<ConformanceCase> cases;
  HostServices host;
  try {
    const PluginInstance probe = PluginInstance::create(info, params, host);
    cases.push_back({"create", true, "params: " + (params.to_string().empty() ? "(none)" : params.to_string())});
  } catch (const std::exception& e) {
    cases.push_back({"create", false, e.what()});
    return cases;
  }
  RuleTally requirements("requirements"), finite("value_finite"), deterministic("deterministic"),
      varies("varies_with_prompt");
  int64_t n_inputs = 0;
  for (const Shape& s : kShapes) {
    const std::string label = shape_label(s);
    PluginInstance inst = PluginInstance::create(info, params, host);
    ScorerRequirements req;
    try {
      req = query_scorer_requirements(inst, attention_shape_of(s));
      PluginInstance other = PluginInstance::create(info, params, host);
      const ScorerRequirements again = query_scorer_requirements(other, attention_shape_of(s));
      if (again.stats != req.stats || again.window != req.window || again.query_skip != req.query_skip) {
        requirements.fail(label + ": two instances declared different requirements");
        continue;
      }
      requirements.pass();
    } catch (const std::exception& e) {
      requirements.fail(label + ": " + e.what());
      continue;
    }
    for (size_t ti = 0; ti < std::size(kLengths); ++ti)
      for (size_t vi = 0; vi < std::size(kVariants); ++vi) {
        const int64_t layer = static_cast<int64_t>((ti + vi) % kLayers);
        const Input in = make_input(s, kLengths[ti], kVariants[vi], layer, req, 1000 + 7 * ti + vi);
        ++n_inputs;
        double first = 0.0;
        try {
          first = call_prompt_signal(inst, req, in.call()).value;
          if (!std::isfinite(first)) {
            finite.fail(in.label + ": value " + std::to_string(first) + " (NaN also means never written)");
            deterministic.skip();
            continue;
          }
          finite.pass();
        } catch (const std::exception& e) {
          finite.fail(in.label + ": " + e.what());
          deterministic.skip();
          continue;
        }
        try {
          PluginInstance fresh = PluginInstance::create(info, params, host);
          const ScorerRequirements fresh_req = query_scorer_requirements(fresh, attention_shape_of(s));
          const double again = call_prompt_signal(inst, req, in.call()).value;
          const double from_fresh = call_prompt_signal(fresh, fresh_req, in.call()).value;
          if (same_bits(first, again) && same_bits(first, from_fresh)) {
            deterministic.pass();
          } else {
            std::ostringstream os;
            os.precision(17);
            os << in.label << ": " << first << ", then " << again << ", from a fresh instance " << from_fresh;
            deterministic.fail(os.str());
          }
        } catch (const std::exception& e) {
          deterministic.fail(in.label + ": the second call failed: " + e.what());
        }
      }
    // varies_with_prompt: two random prompts of T = 64, every layer
    try {
      bool differ = false;
      for (int64_t layer = 0; layer < kLayers && !differ; ++layer) {
        const Input a = make_input(s, 64, Variant::random, layer, req, 77);
        const Input b = make_input(s, 64, Variant::random, layer, req, 78);
        differ = !same_bits(call_prompt_signal(inst, req, a.call()).value, call_prompt_signal(inst, req, b.call()).value);
      }
      if (differ)
        varies.pass();
      else
        varies.fail(label + ": two random prompts of 64 positions give the same value on every layer");
    } catch (const std::exception& e) {
      varies.fail(label + ": " + e.what());
    }
  }
  const std::string over = str(n_inputs) + " inputs (3 shapes x T in {1, 7, 64, 300} x random / tied / peaked), only "
                           "the requested statistics given";
  cases.push_back(requirements.result("prefill requirements, the same from two instances, on 3 shapes"));
  cases.push_back(finite.result("layer_value() finite on " + over));
  cases.push_back(deterministic.result("a second call and a fresh instance give the same bits, on " + over));
  cases.push_back(varies.result("two random prompts of T = 64 differ on some layer, on 3 shapes"));
  return cases;
}

}  // namespace rkv
