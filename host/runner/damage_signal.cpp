#include "runner/damage_signal.hpp"

#include <algorithm>
#include <variant>

#include "core/errors.hpp"
#include "plugin/instance.hpp"
#include "plugin/scorer_call.hpp"
#include "runner/compression.hpp"
#include "runner/compression_damage.hpp"

namespace rkv {

namespace {

const rkv_param_spec kFraction = {sizeof(rkv_param_spec),
                                  "fraction",
                                  RKV_PARAM_FLOAT,
                                  "budget fraction f in (0, 1] that layer l alone is compressed to (of its span)",
                                  0,
                                  0,
                                  0.2,
                                  nullptr,
                                  1,
                                  1,
                                  0.0,
                                  1.0,
                                  nullptr};
const char* const kOfChoices[] = {"compression", "sharing", nullptr};
const rkv_param_spec kOf = {sizeof(rkv_param_spec),
                            "of",
                            RKV_PARAM_CHOICE,
                            "which damage: \"compression\" (only layer l compressed to `fraction`) or \"sharing\" (only "
                            "layer l reads layer l - 1's cache; layer 0 gets the largest D_l)",
                            0,
                            0,
                            0.0,
                            "compression",
                            0,
                            0,
                            0.0,
                            0.0,
                            kOfChoices};
const rkv_param_spec* const kParams[] = {&kFraction, &kOf, nullptr};
const rkv_plugin_descriptor kDescriptor = {
    sizeof(rkv_plugin_descriptor), kDamageSignalId, RKV_KIND_SIGNAL, "1.0.0",
    "oracle: compression damage D_l (mean KL, only layer l compressed with the cell's scorer) or sharing damage (only "
    "layer l reads layer l - 1's cache) on the calibration split",
    kParams, 0};

}  // namespace

const PluginInfo& damage_signal_info() {
  static const PluginInfo info{&kDescriptor, nullptr};
  return info;
}

bool is_damage_signal(const PluginInfo* info) { return info == &damage_signal_info(); }

const PluginInfo& resolve_plugin_or_builtin(const PluginRegistry& reg, const std::string& id, rkv_plugin_kind kind) {
  if ((kind == RKV_KIND_SIGNAL || kind == 0) && (id == "damage" || id == kDamageSignalId)) return damage_signal_info();
  return reg.resolve(id, kind);
}

std::vector<std::vector<double>> damage_per_example(Backend& backend, const PluginChoice& scorer, const ParamSet& params,
                                                    const std::vector<TextWindow>& examples, int64_t prefix_tokens) {
  const double fraction = std::get<double>(params.values().at("fraction"));
  const ModelConfig& mc = backend.model().config;
  HostServices host;
  const PluginInstance instance = PluginInstance::create(*scorer.info, scorer.params, host);
  ScorerUse use;
  use.instance = &instance;
  use.requirements = query_scorer_requirements(
      instance, rkv_attention_shape{sizeof(rkv_attention_shape), mc.n_layers, mc.n_heads, mc.n_kv_heads, mc.head_dim});
  use.key = scorer.id + "{" + scorer.params.to_string() + "}";
  std::vector<std::vector<int32_t>> windows;
  for (const auto& w : examples) windows.push_back(w.tokens);
  if (std::get<std::string>(params.values().at("of")) == "compression")
    return compression_damage(backend, {&use}, windows, prefix_tokens, {fraction}).front().front();
  // Sharing damage: layer 0 cannot share; as a profile it counts as the most sensitive layer (its largest d_l).
  std::vector<std::vector<double>> d = sharing_damage(backend, windows, prefix_tokens);
  for (auto& row : d) {
    double top = 0;
    for (size_t l = 1; l < row.size(); ++l) top = std::max(top, row[l]);
    if (!row.empty()) row[0] = top;
  }
  return d;
}

}  // namespace rkv
