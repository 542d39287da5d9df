#include "runner/profile/damage_signal.hpp"

#include <algorithm>
#include <variant>

#include "core/errors.hpp"
#include "plugin/instance.hpp"
#include "plugin/scorer_call.hpp"
#include "runner/compress/compress_prompt.hpp"
#include "runner/profile/compression_damage.hpp"

namespace rkv {

std::vector<std::vector<double>> damage_per_example(Backend& backend, const PluginChoice& scorer, const ParamSet& params,
                                                    const std::vector<TextWindow>& examples, int64_t prefix_tokens,
                                                    const std::function<void(int64_t)>& on_example) {
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
    return compression_damage(backend, {&use}, windows, prefix_tokens, {fraction}, on_example,
                              damage_codec(params, mc.head_dim))
        .front()
        .front();
  // Sharing damage: layer 0 cannot share; as a profile it counts as the most sensitive layer (its largest d_l).
  std::vector<std::vector<double>> d = sharing_damage(backend, windows, prefix_tokens, on_example);
  for (auto& row : d) {
    double top = 0;
    for (size_t l = 1; l < row.size(); ++l) top = std::max(top, row[l]);
    if (!row.empty()) row[0] = top;
  }
  return d;
}

}  // namespace rkv
