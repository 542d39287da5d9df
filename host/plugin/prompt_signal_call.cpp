#include "plugin/prompt_signal_call.hpp"

#include <cmath>
#include <limits>

#include "core/cancel.hpp"
#include "core/errors.hpp"
#include "plugin/call_guard.hpp"

namespace rkv {

namespace {
std::string who_of(const PluginInstance& inst, int64_t layer) {
  return "per-prompt signal '" + inst.id() + "' (layer " + std::to_string(layer) + ")";
}
}  // namespace

PromptSignalValue call_prompt_signal(const PluginInstance& inst, const ScorerRequirements& req,
                                     const ScorerCallInputs& in) {
  const std::string who = who_of(inst, in.layer);
  const auto* vt = static_cast<const rkv_prompt_signal_v1*>(inst.interface(RKV_INTERFACE_PROMPT_SIGNAL_V1));
  if (!RKV_HAS_FIELD(vt, rkv_prompt_signal_v1, layer_value) || !vt->layer_value)
    throw InputError(who + ": does not serve " RKV_INTERFACE_PROMPT_SIGNAL_V1);
  ScorerCallInputs no_budgets = in;
  no_budgets.head_budgets = nullptr;
  const ScorerInputTensors inputs(who, req, no_budgets);
  PromptSignalValue out;
  out.value = std::numeric_limits<double>::quiet_NaN();
  DiagnosticLog log;
  throw_if_cancelled();  // between per-layer calls
  const rkv_status s = [&] {
    const PluginCallScope in_flight(inst.id(), "layer_value");
    return vt->layer_value(inst.raw(), inputs.abi(), &out.value, log.abi());
  }();
  if (s == RKV_ERROR_CANCELLED) throw Cancelled();
  if (s != RKV_OK) throw InputError(who + " failed (" + status_name(s) + "): " + log.error_text());
  for (const auto& m : log.warnings()) out.warnings.push_back(who + ": " + m);
  return out;
}

PromptSignalValue run_prompt_signal(const PluginInstance& inst, const ScorerRequirements& req,
                                    const ScorerCallInputs& in) {
  PromptSignalValue out = call_prompt_signal(inst, req, in);
  if (!std::isfinite(out.value))
    throw InputError(who_of(inst, in.layer) + " returned a non-finite value (" + std::to_string(out.value) + ")");
  return out;
}

}  // namespace rkv
