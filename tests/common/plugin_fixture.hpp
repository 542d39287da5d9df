// Real plugins (build/lib/ripplekv/plugins) for tests that drive scorers and allocators directly: one registry per
// process, instances kept alive for the fixture's lifetime. Header-only; for tests under tests/.
//
// Thread rules: one test thread.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "plugin/params.hpp"
#include "plugin/registry.hpp"
#include "runner/compress/scorers.hpp"

namespace rkv_test {

/// Creates plugin instances by id and kind, and scorers with their requirements for a model shape.
class PluginFixture {
 public:
  /// An instance of plugin `id` (full or short) of `kind` with `params` validated against its descriptor; it lives as
  /// long as the fixture. Throws rkv::InputError for an unknown id or a bad parameter.
  const rkv::PluginInstance& instance(const std::string& id, rkv_plugin_kind kind,
                                      std::vector<rkv::UserParam> params = {}) {
    static const rkv::PluginRegistry reg = rkv::PluginRegistry::discover();
    const rkv::PluginInfo& info = reg.resolve(id, kind);
    instances_.push_back(std::make_unique<rkv::PluginInstance>(
        rkv::PluginInstance::create(info, rkv::ParamSet::validate(*info.descriptor, params), host_)));
    return *instances_.back();
  }

  /// A ScorerUse of scorer `id` with `params` for the attention shape of `config`, keyed `key` (default: the id).
  rkv::ScorerUse scorer(const std::string& id, std::vector<rkv::UserParam> params, const rkv::ModelConfig& config,
                        const std::string& key = "") {
    rkv::ScorerUse use;
    use.instance = &instance(id, RKV_KIND_SCORER, std::move(params));
    use.requirements = rkv::query_scorer_requirements(
        *use.instance, rkv_attention_shape{sizeof(rkv_attention_shape), config.n_layers, config.n_heads,
                                           config.n_kv_heads, config.head_dim});
    use.key = key.empty() ? id : key;
    return use;
  }

  size_t size() const { return instances_.size(); }

 private:
  rkv::HostServices host_;
  std::vector<std::unique_ptr<rkv::PluginInstance>> instances_;
};

}  // namespace rkv_test
