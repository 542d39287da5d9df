// One layer's compression after prefill: scorer -> selection -> compaction (docs/ARCHITECTURE.md "Data flow": per layer,
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

/// What to compress in one layer.
struct LayerCompressionRequest {
  int64_t layer = 0;          ///< model layer index (messages, records)
  int64_t n_heads = 0;        ///< H
  int64_t budget = 0;         ///< b_l, positions kept among the T eligible ones (>= 1)
  int64_t prefix_tokens = -1; ///< T, eligible positions 0 .. T-1; -1: the whole cache (kv.length). Positions
                              ///< T .. kv.length-1 (e.g. the question when only the context is compressed) are kept
  const AttentionStats* stats = nullptr;              ///< [H, T] statistics the scorer asked for (or null)
  const std::vector<float>* window_queries = nullptr; ///< [H, w, d] when the scorer asked for them
  int64_t window = -1;  ///< the statistics' window when not min(window, T) (decode time; ScorerCallInputs::window)
  const std::vector<double>* rope_inv_freq = nullptr;  ///< the layer's RoPE frequencies (ScorerCallInputs)
  const std::vector<float>* value_output_norms = nullptr;  ///< [H, kv.length] when asked (ScorerCallInputs)
};

/// What compress_layer() did.
struct LayerCompression {
  Selection selection;                ///< kept positions per KV head (empty when untouched)
  CompactionReport compaction;        ///< bytes and lengths before/after
  std::vector<std::string> warnings;  ///< the scorer's warnings, then the selection's (b_l below protected count)
};

/// Compresses one layer's cache `kv` to b_l of its T eligible positions: when b_l >= T the layer is left untouched
/// and the scorer is not called; otherwise run_scorer() (with the statistics `req` asks for, and b_l as every KV
/// head's budget for a budget-dependent scorer), select_positions()
/// with req's protected positions, and compact_layer(). Throws rkv::InputError as those functions do; `kv` is
/// unchanged when anything throws.
LayerCompression compress_layer(const PluginInstance& scorer, const ScorerRequirements& req, LayerKV& kv,
                                const LayerCompressionRequest& request);

}  // namespace rkv
