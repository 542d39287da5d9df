// The host side of "rkv.prompt_signal/1" (ABI minor 7): call a per-prompt signal on one layer of the prompt being
// compressed and check its value (abi/ripplekv/plugin.h; docs/ARCHITECTURE.md "Per-prompt signals"). Its
// requirements come from query_scorer_requirements (plugin/scorer_call.hpp), which reads a signal's the same way.
//
// Thread rules: one PluginInstance is never called from two threads at once (the ABI's rule); these functions add
// no shared state.
#pragma once
#include <string>
#include <vector>

#include "plugin/instance.hpp"
#include "plugin/scorer_call.hpp"

namespace rkv {

/// A per-prompt signal's value s_l for one layer of one prompt, and its warnings (prefixed with its id and layer).
struct PromptSignalValue {
  double value = 0.0;
  std::vector<std::string> warnings;
};

/// The call alone: builds the inputs as a scorer of requirements `req` gets them (ScorerInputTensors; head_budgets
/// never passed) and calls layer_value(); the value as written (NaN when the plugin wrote nothing). For tools that
/// judge the answer themselves (conformance). Throws rkv::InputError naming the signal and layer when the instance
/// does not serve rkv.prompt_signal/1, a requested statistic is missing, or the call fails; rkv::Cancelled when it
/// returned RKV_ERROR_CANCELLED.
PromptSignalValue call_prompt_signal(const PluginInstance& inst, const ScorerRequirements& req,
                                     const ScorerCallInputs& in);

/// call_prompt_signal, and rkv::InputError naming the signal and the layer when the value is NaN or infinite.
PromptSignalValue run_prompt_signal(const PluginInstance& inst, const ScorerRequirements& req,
                                    const ScorerCallInputs& in);

}  // namespace rkv
