// One layer's compression after prefill: scorer -> selection -> compaction (DESIGN.md "Data flow": per layer,
// scorer(K, V, requested stats) -> scores -> host top-k -> compact cache). The scorer is passed per call, so a
// runner may route different layers to different scorers.
//
// Thread rules: mutates `kv`; the scorer instance must not be in use on another thread.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cache/attention_stats.hpp"
#include "cache/compaction.hpp"
#include "cache/kv_cache.hpp"
#include "cache/selection.hpp"
#include "plugin/scorer_call.hpp"

namespace rkv {

/// What compress_layer() did.
struct LayerCompression {
  Selection selection;                ///< kept positions per KV head (empty when untouched)
  CompactionReport compaction;        ///< bytes and lengths before/after
  std::vector<std::string> warnings;  ///< the scorer's warnings, then the selection's (b_l below protected count)
};

/// Compresses layer `layer` (its cache `kv`, holding exactly the T = kv.length prompt positions) to budget b_l:
/// when b_l >= T the layer is left untouched and the scorer is not called; otherwise run_scorer() with the
/// statistics `stats` (and `window_queries`) that `req` asks for, select_positions() with req's protected
/// positions, and compact_layer(). `n_heads` is H. Throws rkv::InputError as those functions do; `kv` is unchanged
/// when anything throws.
LayerCompression compress_layer(const PluginInstance& scorer, const ScorerRequirements& req, LayerKV& kv,
                                int64_t layer, int64_t n_heads, int64_t budget, const AttentionStats* stats,
                                const std::vector<float>* window_queries = nullptr);

}  // namespace rkv
