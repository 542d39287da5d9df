#include "cache/layer_compression.hpp"

namespace rkv {

LayerCompression compress_layer(const PluginInstance& scorer, const ScorerRequirements& req, LayerKV& kv,
                                int64_t layer, int64_t n_heads, int64_t budget, const AttentionStats* stats,
                                const std::vector<float>* window_queries) {
  LayerCompression out;
  const int64_t T = kv.length;
  if (budget >= T) {
    out.selection = select_positions(nullptr, kv.n_kv_heads, T, budget, req.protected_spec(), layer);
  } else {
    ScorerCallInputs in;
    in.layer = layer;
    in.n_heads = n_heads;
    in.kv = &kv;
    in.stats = stats;
    in.window_queries = window_queries;
    ScoreResult scored = run_scorer(scorer, req, in);
    out.warnings = std::move(scored.warnings);
    out.selection = select_positions(scored.scores.data(), kv.n_kv_heads, T, budget, req.protected_spec(), layer);
  }
  out.compaction = compact_layer(kv, out.selection);
  out.warnings.insert(out.warnings.end(), out.selection.warnings.begin(), out.selection.warnings.end());
  return out;
}

}  // namespace rkv
