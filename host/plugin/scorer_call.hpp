// The host side of "rkv.scorer/1": ask a scorer what it needs, build its input tensors, call it, validate its
// scores (abi/ripplekv/plugin.h; docs/ARCHITECTURE.md "Plugin ABI").
//
// Thread rules: one PluginInstance is never called from two threads at once (the ABI's rule); these functions add
// no shared state.
#pragma once
#include <ripplekv/plugin.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cache/attention_stats.hpp"
#include "cache/kv_cache.hpp"
#include "cache/selection.hpp"
#include "plugin/instance.hpp"

namespace rkv {

/// What a scorer declared for a model shape (rkv_scorer_requirements, validated).
struct ScorerRequirements {
  uint64_t stats = 0;   ///< RKV_STAT_* mask
  int64_t window = 0;   ///< w for window attention / window queries (>= 1 when either is requested)
  int64_t sinks = 0;    ///< leading positions protected
  int64_t recent = 0;   ///< trailing positions protected
  bool decode_scoring = false;  ///< score() also works on a cache while decoding (ABI minor 2; false for older plugins)
  uint64_t decode_stats = 0;    ///< RKV_STAT_* mask needed then
  int64_t query_skip = 0;       ///< leading prompt positions left out of RKV_STAT_QUERY_MOMENTS (ABI minor 4; 0 before)
  /// RKV_BUDGET_* (ABI minor 6; RKV_BUDGET_NONE before): nonzero when score() reads head_budgets, so its scores are
  /// computed once per (layer, budgets) and never shared across budgets; RKV_BUDGET_ALLOCATION when an allocator
  /// reading the scores must pass the layer's budget share too.
  uint32_t budget_dependent = RKV_BUDGET_NONE;
  bool budgeted_for_allocators() const { return budget_dependent == RKV_BUDGET_ALLOCATION; }

  /// The requirements of a decode-time call: these with `stats` replaced by decode_stats.
  ScorerRequirements for_decode() const {
    ScorerRequirements r = *this;
    r.stats = decode_stats;
    return r;
  }

  bool wants(uint64_t stat) const { return (stats & stat) != 0; }
  /// The window after clamping to T (what rkv_scorer_inputs.window carries).
  int64_t effective_window(int64_t prefix_tokens) const;
  ProtectedSpec protected_spec() const { return ProtectedSpec{sinks, recent}; }
  /// Number of distinct protected positions for a prefix of T (sinks and recent may overlap).
  int64_t protected_count(int64_t prefix_tokens) const;
  /// The attention statistics to compute for this scorer (compute_attention_stats / AttentionStatsAccumulator).
  AttentionStatsOptions stats_options() const;
};

/// Calls requirements() of scorer `inst` for `shape` (or of a per-prompt signal: a signal-kind instance serving
/// rkv.prompt_signal/1, whose sinks and recent are set to 0 and which may not declare decode_scoring or
/// budget_dependent). Throws rkv::InputError naming the plugin when it fails or
/// declares unknown statistics bits, negative counts (query_skip included), a window < 1 while asking for window
/// statistics, or a prefill-only statistic (RKV_STAT_QUERY_MOMENTS, RKV_STAT_VALUE_OUTPUT_NORMS) among its
/// decode-time statistics; rkv::Cancelled when it returned RKV_ERROR_CANCELLED.
ScorerRequirements query_scorer_requirements(const PluginInstance& inst, const rkv_attention_shape& shape);

/// The same, for a check on a nominal shape before the model is loaded (`ripplekv validate`): when `shape_may_fail`
/// and the plugin's requirements() call itself fails (it may refuse that shape), returns std::nullopt instead of
/// throwing; what the plugin declared is checked and refused as above either way.
std::optional<ScorerRequirements> query_scorer_requirements(const PluginInstance& inst,
                                                            const rkv_attention_shape& shape, bool shape_may_fail);

/// What one score() call sees: one layer of one example after prefill.
struct ScorerCallInputs {
  int64_t layer = 0;          ///< model layer index
  int64_t n_heads = 0;        ///< H (the attention statistics' first dimension)
  const LayerKV* kv = nullptr;     ///< keys after RoPE and values; the scorer sees positions 0 .. T - 1
  int64_t prefix_tokens = -1;      ///< T, positions eligible for compression; -1: all kv->length positions
  const AttentionStats* stats = nullptr;         ///< must hold every statistic the scorer asked for (else null)
  const std::vector<float>* window_queries = nullptr;  ///< [H, w, d] when RKV_STAT_WINDOW_QUERIES was asked
  /// The window w of the statistics when it is not min(requirements' window, T): at decode time, the number of
  /// queries decoded since the last compression (>= 1). -1: the prefill's rule.
  int64_t window = -1;
  /// The layer's RoPE frequencies [d/2] (Model::layer_inv_freq): passed to the plugin as rkv_scorer_inputs
  /// .rope_inv_freq and used to turn the cached keys back for RKV_STAT_PRE_ROPE_KEYS (each by its stored position,
  /// kv->pos, or its cache index when the layer tracks none). Null: no RoPE information (pre-RoPE keys refused).
  const std::vector<double>* rope_inv_freq = nullptr;
  /// ||W_o v||_1 per query head and entry, float32 [H, kv->length] (Backend::value_output_norms), when
  /// RKV_STAT_VALUE_OUTPUT_NORMS was asked; the scorer gets each head's first T entries.
  const std::vector<float>* value_output_norms = nullptr;
  /// How many positions each KV head of this layer keeps, [H_kv], each in [0, T] (rkv_scorer_inputs.head_budgets,
  /// ABI minor 6): passed only to a scorer whose requirements say budget_dependent, for the prefill's final selection
  /// (and, for RKV_BUDGET_ALLOCATION, scores an allocator reads). Null: the scorer's budget-free ranking.
  const std::vector<int64_t>* head_budgets = nullptr;
  /// The layer's sliding window W (ModelConfig::layer_window), 0 for full attention (rkv_scorer_inputs
  /// .attention_window, ABI minor 6).
  int64_t attention_window = 0;
};

/// The rkv_scorer_inputs of one call and the tensors it points to (owned here), built from `in` under `req`: only the
/// requested statistics are set (others NULL); keys and values as contiguous [H_kv, T, d] views (copied when the
/// layer has spare capacity); pre-RoPE keys a copy turned back by R(-p); head_budgets only for a budget-dependent
/// requirement. The scorer and the per-prompt signal calls (plugin/prompt_signal_call.hpp) share it. Throws
/// rkv::InputError starting with `who` when a requested statistic is missing or misshaped, T is outside [1, cache],
/// or a head budget is outside [0, T]. Not copyable (abi() points into it); `in`'s vectors must outlive it.
class ScorerInputTensors {
 public:
  ScorerInputTensors(const std::string& who, const ScorerRequirements& req, const ScorerCallInputs& in);
  ScorerInputTensors(const ScorerInputTensors&) = delete;
  ScorerInputTensors& operator=(const ScorerInputTensors&) = delete;
  const rkv_scorer_inputs* abi() const { return &si_; }
  int64_t prefix_tokens() const { return prefix_tokens_; }
  int64_t n_kv_heads() const { return n_kv_heads_; }

 private:
  rkv_scorer_inputs si_{};
  int64_t prefix_tokens_ = 0, n_kv_heads_ = 0;
  int64_t kv_shape_[3] = {}, ht_shape_[2] = {}, wq_shape_[3] = {}, mean_shape_[2] = {}, cov_shape_[3] = {};
  int64_t freq_shape_[1] = {}, budgets_shape_[1] = {}, t_shape_[1] = {};
  std::vector<float> k_scratch_, v_scratch_, k0_, norm_rows_;
  DLTensor keys_{}, values_{}, win_{}, cum_{}, wq_{}, k0t_{}, qmean_{}, qcov_{}, freq_{}, vnorms_{}, budgets_{}, rc_{};
};

/// The scorer's output for one layer.
struct ScoreResult {
  std::vector<float> scores;          ///< float32 [H_kv, T], all finite
  std::vector<std::string> warnings;  ///< the plugin's warnings, prefixed with its id and the layer
};

/// The call alone, without checking the scores: builds the inputs and calls score() exactly as run_scorer() does and
/// returns the scores as written (the host pre-fills NaN, so an unwritten entry reads NaN) with the warnings. For
/// tools that judge the answer themselves (conformance/conformance.hpp). Throws rkv::InputError as run_scorer() does,
/// except for non-finite scores.
ScoreResult call_scorer(const PluginInstance& inst, const ScorerRequirements& req, const ScorerCallInputs& in);

/// Calls score() of `inst` for one layer. Only the statistics in `req` are passed (other tensors are NULL); keys
/// and values are passed as contiguous [H_kv, T, d] views (copied when the layer has spare capacity); pre-RoPE keys
/// are a copy turned back by R(-p) (rope_unrotate_half with the cos/sin of p inv_freq, as the forward rotated them);
/// the query moments come from `stats` (the prefill's).
/// Throws rkv::InputError naming the plugin id when a requested statistic is missing or of the wrong shape, when
/// the call fails, or when a returned score is NaN or infinite (naming the KV head and position); rkv::Cancelled when
/// it returned RKV_ERROR_CANCELLED (a scorer polling the host's is_cancelled()). The scores tensor handed to the plugin
/// is its own exactly-sized heap allocation, so the sanitizer build catches a write past it.
ScoreResult run_scorer(const PluginInstance& inst, const ScorerRequirements& req, const ScorerCallInputs& in);

}  // namespace rkv
