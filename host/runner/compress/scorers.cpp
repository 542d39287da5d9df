#include "runner/compress/scorers.hpp"

#include "core/errors.hpp"
#include "runner/plan/scorer_route.hpp"

namespace rkv {

rkv_attention_shape attention_shape(const ModelConfig& c) {
  return rkv_attention_shape{sizeof(rkv_attention_shape), c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim};
}

ScorerUse make_scorer_use(const PluginInstance& instance, const PluginChoice& choice, const ModelConfig& config) {
  ScorerUse use;
  use.instance = &instance;
  use.requirements = query_scorer_requirements(instance, attention_shape(config));
  use.key = choice.key();
  return use;
}

LayerScorers::LayerScorers(const ScorerUse& fallback, std::map<int64_t, const ScorerUse*> routed)
    : fallback_(&fallback), routed_(std::move(routed)) {
  for (const auto& [layer, use] : routed_)
    if (!use) throw InputError("LayerScorers: no scorer for routed layer " + std::to_string(layer));
}

const ScorerUse& LayerScorers::at(int64_t layer) const {
  const auto it = routed_.find(layer);
  return it == routed_.end() ? *fallback_ : *it->second;
}

int64_t LayerScorers::protected_count(const std::vector<int64_t>& layers, int64_t T) const {
  int64_t count = 0;
  for (int64_t l : layers) count = std::max(count, at(l).requirements.protected_count(T));
  return count;
}

bool LayerScorers::same_protected_spec(const std::vector<int64_t>& layers) const {
  for (int64_t l : layers) {
    const ProtectedSpec a = at(l).requirements.protected_spec(), b = at(layers.front()).requirements.protected_spec();
    if (a.sinks != b.sinks || a.recent != b.recent) return false;
  }
  return true;
}

const PluginInstance& InstancePool::get(const PluginChoice& c) {
  const std::string key = c.key();
  auto it = pool_.find(key);
  if (it == pool_.end())
    it = pool_.emplace(key, std::make_unique<PluginInstance>(PluginInstance::create(*c.info, c.params, host_))).first;
  return *it->second;
}

void ScorerSet::add_cell(const CellConfig& cell, const std::string& what) {
  check_route_layers(cell.route, config_.n_layers, what);
  auto add = [&](const PluginChoice& choice) {
    const std::string key = choice.key();
    if (!uses_.count(key)) uses_.emplace(key, make_scorer_use(pool_.get(choice), choice, config_));
  };
  add(*cell.scorer);
  for (const RouteEntry& e : cell.route) add(e.scorer);
  if (cell.per_prompt_signal) add(*cell.signal);  // its statistics join the shared prefill's
}

LayerScorers ScorerSet::layers_of(const CellConfig& cell) const {
  std::map<int64_t, const ScorerUse*> routed;
  for (const RouteEntry& e : cell.route)
    for (int64_t l : e.layers) routed[l] = &at(e.scorer);
  return LayerScorers(at(*cell.scorer), std::move(routed));
}

std::vector<const ScorerUse*> ScorerSet::all() const {
  std::vector<const ScorerUse*> out;
  for (const auto& kv : uses_) out.push_back(&kv.second);
  return out;
}

}  // namespace rkv
