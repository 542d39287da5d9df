// What a sliding-window layer holds (Gemma 2/3, Mistral v0.1; llama.cpp's iSWA cache, llama_kv_cache::prune_swa).
//
// A layer of window W masks key position p for a query at position q iff q - p >= W (backend/cpu/forward.cpp
// window_starts). So once the token at position p_max is in the cache, no later query can see an entry with
// p_max - p >= W: the layer needs only the entries at positions above p_max - W, at most W of them. After a prompt of
// T tokens that is positions [T - span, T), span = min(T, W) (ModelConfig::layer_span).
//
// The prefill keeps every position (the scorers' statistics cover the whole prompt); compression (compress_prompt)
// selects inside the span and the decode paths call drop_out_of_window() after every extend, so kv_bytes counts what
// a layer really holds. A global layer (window 0) is never touched here.
//
// Thread rules: pure functions, or the backend's rules for the calls that take one.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "cache/selection.hpp"
#include "model/model.hpp"

namespace rkv {

/// Throws rkv::InputError, starting with `where` (the config file and the cell), when a setting that cannot follow a
/// window cut is asked of a model with sliding-window layers: key re-rotation (`rerotate`: renumbered positions would
/// move entries across the window) or a decode policy that keeps state per held entry (DecodePolicyTraits::
/// per_entry_state: h2o, periodic). Returns
/// otherwise (every model without sliding windows). Called before any work, so a run fails before its first cell.
void check_sliding_window_support(const ModelConfig& config, bool rerotate, const std::string& decode_policy,
                                  const std::string& where);

/// The first prompt position layer `layer` still holds after a prompt of T tokens: T - layer_span(layer, T) (0 for a
/// global layer or a prompt within the window).
int64_t window_first_position(const ModelConfig& config, int64_t layer, int64_t prefix_tokens);

/// True when some layer of `config` attends through a sliding window.
bool has_sliding_window(const ModelConfig& config);

/// True when some layer of `config` has a window shorter than T (so compression must drop entries before it).
bool window_drops_entries(const ModelConfig& config, int64_t prefix_tokens);

/// select_positions() restricted to the last `span` of T positions (the ones a sliding-window layer holds):
/// positions before T - span are dropped whatever their scores; the scorer's sinks are not protected there (they lie
/// before the window; `recent` is), and b_l = budget (1 <= budget) keeps min(budget, span) entries per KV head.
/// With span = T this is select_positions() itself. The result indexes the layer's T prefilled entries (prefix_tokens
/// = T) and is never untouched when span < T. scores: float32 [n_kv_heads, T] (larger = keep), borrowed; may be
/// null when budget >= span. Throws rkv::InputError as select_positions() does and when span is outside [1, T].
Selection select_in_window(const float* scores, int64_t n_kv_heads, int64_t prefix_tokens, int64_t span,
                           int64_t budget, const ProtectedSpec& spec, int64_t layer);

/// The same for per-head budgets (select_positions_per_head()): head h keeps min(head_budgets[h], span) entries.
Selection select_in_window_per_head(const float* scores, int64_t n_kv_heads, int64_t prefix_tokens, int64_t span,
                                    const std::vector<int64_t>& head_budgets, const ProtectedSpec& spec,
                                    int64_t layer);

/// Drops, in every sliding-window layer of the model, the entries no query after position `last_position` can see
/// (last_position - p >= W), with one compaction per layer that holds any. Call it after every Backend::extend that
/// ended at `last_position`. A layer without stored positions is left alone. Returns the entries dropped in all.
int64_t drop_out_of_window(Backend& backend, BackendCache& cache, int64_t last_position);

}  // namespace rkv
