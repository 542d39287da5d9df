// The scorers of a cell as the compression uses them: each scorer's plugin instance with what it declared for this
// model (ScorerUse), which scorer ranks which layer (LayerScorers: one for every layer, or a route), and the pool of
// plugin instances a run or a generation creates once per distinct (plugin, params).
//
// Thread rules: a ScorerUse and a LayerScorers are read-only views (the instances must outlive them); plugin instances
// are never called concurrently (the ABI's rule), so an InstancePool belongs to one thread.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/model.hpp"
#include "plugin/instance.hpp"
#include "plugin/scorer_call.hpp"
#include "runner/plan/run_plan.hpp"

namespace rkv {

/// The attention shape plugins are told for `config`: {L, H, H_kv, d}.
rkv_attention_shape attention_shape(const ModelConfig& config);

/// A scorer as a cell uses it: the instance, what it declared, and a key naming it with its params.
struct ScorerUse {
  const PluginInstance* instance = nullptr;
  ScorerRequirements requirements;
  std::string key;  ///< PluginChoice::key(): equal keys give equal scores
};

/// The ScorerUse of `instance` (created from `choice`, borrowed) on a model of `config`: its requirements for that
/// shape (query_scorer_requirements; errors as that, naming the scorer).
ScorerUse make_scorer_use(const PluginInstance& instance, const PluginChoice& choice, const ModelConfig& config);

/// Which scorer ranks each layer's positions: one scorer for every layer (a homogeneous cell), or a route
/// (runner/plan/scorer_route.hpp): a scorer per routed layer and the cell's [scorer] for the others. Holds pointers: the
/// ScorerUse objects must outlive it.
class LayerScorers {
 public:
  /// Every layer scored by `every_layer` (implicit, so a homogeneous cell passes its ScorerUse as it is).
  LayerScorers(const ScorerUse& every_layer) : fallback_(&every_layer) {}  // NOLINT(google-explicit-constructor)
  /// Model layer l scored by routed.at(l) when l is routed, else by `fallback`. Null entries are not allowed.
  LayerScorers(const ScorerUse& fallback, std::map<int64_t, const ScorerUse*> routed);
  /// The scorer of model layer `layer`.
  const ScorerUse& at(int64_t layer) const;
  /// The largest protected count at T over `layers` (model indices): the count an allocator is told (the pyramid
  /// window's default), so a layer's protected positions never exceed what its scorer protects.
  int64_t protected_count(const std::vector<int64_t>& layers, int64_t prefix_tokens) const;
  /// True when every layer of `layers` is scored by a scorer with the same protected positions (sinks, recent).
  bool same_protected_spec(const std::vector<int64_t>& layers) const;

 private:
  const ScorerUse* fallback_;
  std::map<int64_t, const ScorerUse*> routed_;
};

/// One plugin instance per distinct PluginChoice::key(), created on first use with the pool's host services.
class InstancePool {
 public:
  /// `host` must outlive the pool.
  explicit InstancePool(const HostServices& host) : host_(host) {}
  /// The instance of `choice`; rkv::InputError naming the plugin when it cannot be created.
  const PluginInstance& get(const PluginChoice& choice);

 private:
  const HostServices& host_;
  std::map<std::string, std::unique_ptr<PluginInstance>> pool_;
};

/// The scorers of a run's cells (or of one cell): one ScorerUse per distinct scorer any of them names ([scorer] and
/// every route entry's), created once from the pool. ScorerUse objects never move once added (LayerScorers point to
/// them), so the set may grow while earlier LayerScorers are in use. The pool must outlive the set.
class ScorerSet {
 public:
  ScorerSet(InstancePool& pool, const ModelConfig& config) : pool_(pool), config_(config) {}
  /// Adds the scorers of `cell` (which has a [scorer]), and its per-prompt signal (CellConfig::per_prompt_signal:
  /// a ScorerUse whose requirements are the signal's, so the shared prefill computes what it reads). rkv::InputError naming `what` (the config and cell) and
  /// 'scorer.route' when a route names a layer the model does not have; the scorers' own errors otherwise.
  void add_cell(const CellConfig& cell, const std::string& what);
  /// The ScorerUse of `choice`, which add_cell() added.
  const ScorerUse& at(const PluginChoice& choice) const { return uses_.at(choice.key()); }
  /// The scorer of every layer of `cell` (added before): its [scorer], and each route entry's on that entry's layers.
  LayerScorers layers_of(const CellConfig& cell) const;
  /// Every ScorerUse, in key order: what one shared prefill computes statistics for (prefill_needs).
  std::vector<const ScorerUse*> all() const;

 private:
  InstancePool& pool_;
  const ModelConfig& config_;
  std::map<std::string, ScorerUse> uses_;
};

}  // namespace rkv
