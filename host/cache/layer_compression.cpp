#include "cache/layer_compression.hpp"

#include "core/errors.hpp"

namespace rkv {

LayerCompression compress_layer(const PluginInstance& scorer, const ScorerRequirements& req, LayerKV& kv,
                                const LayerCompressionRequest& r) {
  LayerCompression out;
  const int64_t T = r.prefix_tokens < 0 ? kv.length : r.prefix_tokens;
  if (T < 1 || T > kv.length)
    throw InputError("layer " + std::to_string(r.layer) + ": prefix length T = " + std::to_string(T) +
                     " must be in [1, " + std::to_string(kv.length) + "] (the cache)");
  if (r.budget >= T) {
    out.selection = select_positions(nullptr, kv.n_kv_heads, T, r.budget, req.protected_spec(), r.layer);
  } else {
    ScorerCallInputs in;
    in.layer = r.layer;
    in.n_heads = r.n_heads;
    in.kv = &kv;
    in.prefix_tokens = T;
    in.stats = r.stats;
    in.window_queries = r.window_queries;
    in.window = r.window;
    in.rope_inv_freq = r.rope_inv_freq;
    in.value_output_norms = r.value_output_norms;
    const std::vector<int64_t> kept(static_cast<size_t>(kv.n_kv_heads), r.budget);  // b_l < T on every KV head
    in.head_budgets = &kept;  // read only by a budget-dependent scorer
    ScoreResult scored = run_scorer(scorer, req, in);
    out.warnings = std::move(scored.warnings);
    out.selection = select_positions(scored.scores.data(), kv.n_kv_heads, T, r.budget, req.protected_spec(), r.layer);
  }
  out.compaction = compact_layer(kv, out.selection);
  out.warnings.insert(out.warnings.end(), out.selection.warnings.begin(), out.selection.warnings.end());
  return out;
}

}  // namespace rkv
