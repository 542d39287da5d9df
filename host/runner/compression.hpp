// The compression pipeline of one prompt on any backend (DESIGN.md "Data flow of ripplekv run"):
//
//   prefill once (full cache; the scorers' statistics computed in the same pass, queries kept when asked)
//   -> per ablation cell: allocator -> b_l per compressible layer
//      -> per layer: statistics -> scorer -> scores -> host top-k (protected positions first) -> compacted cache
//
// The prefill is shared by every cell; scores depend only on the scorer (and its params), so they are memoized per
// prompt and scorer (ScoreMemo), and each cell pays only for selection and compaction. Scorer plugins run on the CPU:
// they get a host copy of the layer (Backend::download_layer) and the host copies of the statistics.
//
// Thread rules: a PrefilledPrompt and a ScoreMemo belong to one thread at a time; plugin instances are never called
// concurrently (the ABI's rule); the backend's rules apply to every call that takes one.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "cache/attention_stats.hpp"
#include "plugin/allocator_call.hpp"
#include "plugin/scorer_call.hpp"
#include "runner/decode_policy.hpp"

namespace rkv {

/// A scorer as a cell uses it: the instance, what it declared, and a key naming it with its params.
struct ScorerUse {
  const PluginInstance* instance = nullptr;
  ScorerRequirements requirements;
  std::string key;  ///< id + params; equal keys give equal scores
};

/// Which scorer ranks each layer's positions: one scorer for every layer (a homogeneous cell), or a route
/// (runner/scorer_route.hpp): a scorer per routed layer and the cell's [scorer] for the others. Holds pointers: the
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

/// What the prefill of an evaluation prompt must produce for a set of scorers.
struct PrefillNeeds {
  int64_t keep_queries = 0;                   ///< window queries (RKV_STAT_WINDOW_QUERIES): the largest window
  std::vector<AttentionStatsOptions> stats;   ///< distinct statistics requests
};

/// The union of what `scorers` need (each distinct statistics request once), plus the cumulative attention of the
/// whole prompt when `cumulative_for_decode` (a decode policy that seeds accumulated attention from it).
PrefillNeeds prefill_needs(const std::vector<const ScorerUse*>& scorers, bool cumulative_for_decode = false);

/// The compressible layers A of a model: `listed` (budget.layers; each must be below the model's layer count), every
/// layer when it is empty, or with `global_only` (budget.layers = "global") the layers without a sliding window.
/// Throws rkv::InputError naming `config_path` and budget.layers for a layer beyond the model, and for "global" on a
/// model whose every layer slides.
std::vector<int64_t> resolve_compressible_layers(const std::vector<int64_t>& listed, bool global_only,
                                                 const ModelConfig& model, const std::string& config_path);

/// The global budget B of a cell over a prompt of T positions: from budget.fraction (B = round(f sum span_l)) or
/// budget.tokens (sum min(tokens, span_l)) over the spans of A (ModelConfig::layer_spans; cache/budget.hpp). Exactly
/// one of the two is set. rkv::InputError as budget_total_from_fraction / _from_tokens.
int64_t cell_budget_total(const std::optional<double>& fraction, const std::optional<int64_t>& tokens,
                          const std::vector<int64_t>& spans);

/// A prompt after one full prefill.
struct PrefilledPrompt {
  std::vector<int32_t> tokens;                      ///< the T prompt tokens
  std::unique_ptr<BackendCache> cache;              ///< full cache, length T in every layer
  int64_t n_queries = 0;                            ///< queries kept per layer: the last n_queries prompt positions
  std::vector<std::vector<float>> queries;          ///< per layer, float32 [H, n_queries, d] after RoPE
  std::vector<AttentionStatsOptions> stats_options; ///< the statistics computed during the prefill ...
  std::vector<std::vector<AttentionStats>> stats;   ///< ... [request][layer]
  std::vector<float> last_logits;                   ///< float32 [V], the prediction after position T - 1
  double seconds = 0;                               ///< prefill wall time
};

/// Prefills `tokens` (positions 0..T-1) on `backend` into a fresh cache, with what `needs` asks for. Throws
/// rkv::InputError for an empty prompt.
PrefilledPrompt prefill_prompt(Backend& backend, const std::vector<int32_t>& tokens, const PrefillNeeds& needs);

/// Statistics and scores of one prompt, memoized per scorer key and layer.
class ScoreMemo {
 public:
  /// Scores [H_kv, T] of `layer` for `scorer` on `prompt`, calling the scorer once. The statistics come from the
  /// prefill; rkv::InputError when the prefill did not compute what the scorer asks for (naming the scorer).
  const ScoreResult& scores(Backend& backend, const PrefilledPrompt& prompt, const ScorerUse& scorer, int64_t layer);

 private:
  std::map<std::pair<std::string, int64_t>, ScoreResult> scores_;
};

/// The budgets of one cell over the compressible layers A: b_l per layer and, with a per-head allocator, b[l, h].
struct CellBudgets {
  std::vector<int64_t> layers;              ///< [|A|] b_l, summing to B
  std::vector<std::vector<int64_t>> heads;  ///< [|A|][H_kv] entries per head (row l sums to H_kv b_l); empty: none
  std::vector<std::string> warnings;        ///< the allocators' warnings
};

/// Runs a cell's allocators (DESIGN.md "Per-head budgets"): `layer_alloc` serves rkv.allocator/1 (b_l), optionally
/// followed by `head_alloc` (rkv.allocator/2 with those b_l as layer budgets); or `layer_alloc` serves only
/// rkv.allocator/2 and splits B over layers and heads itself. A per-head allocator that sets RKV_FLAG_NEEDS_SCORES is
/// given each layer's scorer's scores of every layer of A (memoized in `memo`) and the protected mask. `profile` is
/// over A. The allocators are told the largest protected count of the layers' scorers (LayerScorers). Throws
/// rkv::InputError naming the plugin when it serves neither interface, as the allocator calls do, and for a per-head
/// allocator over a route whose scorers protect different positions (one protected mask serves every layer).
CellBudgets allocate_cell(Backend& backend, const PrefilledPrompt& prompt, const LayerScorers& scorers, ScoreMemo& memo,
                          const PluginInstance& layer_alloc, const PluginInstance* head_alloc,
                          const std::vector<int64_t>& layers, const std::vector<double>& profile, int64_t budget_total);

/// The cache of one cell after compression.
struct CompressedPrompt {
  std::unique_ptr<BackendCache> cache;  ///< compacted per layer to [H_kv, b_l, d] or per head (layers not in A whole)
  std::vector<int64_t> budgets;         ///< per model layer: b_l, or T for a layer left whole
  std::vector<std::vector<int64_t>> head_budgets;  ///< per model layer: b[l, h] (empty rows: the layer's b_l)
  size_t bytes_full = 0;                ///< cache bytes before compression (T positions every layer)
  size_t bytes_kept = 0;                ///< cache bytes after
  /// Position of the first token fed after the prompt: T (original positions, the default), or with rerotate the
  /// longest KV head over all layers after re-rotation, i.e. the cache length (kvpress' pipeline after
  /// KeyRerotationPress: context_length = cache.get_seq_length(), kvpress/pipeline.py; equal to its value whenever
  /// every layer keeps the same count, as kvpress does). Every kept key then lies before the new tokens.
  int64_t next_position = 0;
  /// With rerotate, per model layer the original prompt position of every entry held, KV head by KV head in cache
  /// order (int32, the stored positions before re-rotation; DecodePolicy::begin seeds accumulated attention from
  /// them); an empty row: the stored positions are the original ones (always without rerotate).
  std::vector<std::vector<int32_t>> prompt_positions;
  std::vector<std::string> warnings;    ///< scorer and selection warnings (e.g. b_l below the protected count)
  double seconds = 0;                   ///< scoring + selection + compaction wall time
};

/// Copies `prompt`'s full cache and compresses every layer of `layers` (model layer indices, the set A) to
/// `budgets` (one per entry of `layers`; b_l >= span_l leaves the layer whole), layer l ranked by `scorers.at(l)` (a
/// ScorerUse for a homogeneous cell, or a route). A sliding-window layer
/// holds only the last span_l = min(T, W) positions (runner/sliding_window.hpp): its selection is made among those,
/// and every sliding layer outside A or left whole is cut to them too; `budgets` in the result are then at most
/// span_l, and bytes_full is what the uncompressed cache holds once cut to its windows (window_bytes()). With `head_budgets`
/// ([|A|][H_kv], from allocate_cell) each KV head keeps its own count (select_positions_per_head). With `rerotate`
/// ([compression] rerotate; kvpress KeyRerotationPress) every compacted layer's kept keys are re-rotated right after
/// its compaction to the contiguous positions 0 .. b_{l,h} - 1 of each KV head (Backend::rerotate_layer; a layer left
/// whole already is at 0 .. T - 1), and next_position is the cache length instead of T. Throws rkv::InputError for
/// rerotate on a model with sliding-window layers (re-rotated positions would move entries across the window).
CompressedPrompt compress_prompt(Backend& backend, const PrefilledPrompt& prompt, const LayerScorers& scorers,
                                 const std::vector<int64_t>& layers, const std::vector<int64_t>& budgets,
                                 ScoreMemo& memo, const std::vector<std::vector<int64_t>>* head_budgets = nullptr,
                                 bool rerotate = false);

/// Bytes the full cache `full` of a prompt of T positions holds once every sliding-window layer keeps only its
/// window (Backend::bytes of a cut copy; full.bytes() on a model without windows shorter than T): what a compressed
/// cell's kv_bytes is compared against.
size_t window_bytes(Backend& backend, const BackendCache& full, int64_t prefix_tokens);

/// The prefill's cumulative attention of every layer ([L] of [H, T]) when one of its statistics requests computed it,
/// else null: what DecodePolicy::begin() seeds accumulated attention with.
const std::vector<AttentionStats>* prompt_cumulative_attention(const PrefilledPrompt& prompt);

/// Backend::extend (no capture) followed by drop_out_of_window() at the last position fed: what every decode path
/// without a decode session uses, so a sliding-window layer never holds entries older than its window.
std::vector<float> extend_cache(Backend& backend, BackendCache& cache, const std::vector<int32_t>& tokens,
                                int64_t start_pos, LogitsFor which);

/// Feeds one token at `position` on `cache` and returns its logits float32 [V]; with `decode` (may be null) the
/// extend observes what the session needs and the session evicts or compresses afterwards. rkv::Cancelled when the
/// enclosing CancelScope's flag is set (core/cancel.hpp), checked before the token.
std::vector<float> decode_token(Backend& backend, BackendCache& cache, int32_t token, int64_t position,
                                DecodeSession* decode);

/// Teacher-forced continuation on a cache: feeds `tokens` at positions start_pos.. (appending to `cache`) and
/// returns the logits after each of them, float32 [n, V]. With a `decode` session (decode_policy.hpp) the tokens go
/// one at a time through decode_token(); without, all at once.
std::vector<float> continuation_logits(Backend& backend, const std::vector<int32_t>& tokens, int64_t start_pos,
                                       BackendCache& cache, DecodeSession* decode = nullptr);

/// Greedy decoding on a cache that holds a prompt of `start_pos` positions: the first token is argmax of
/// `first_logits` (the prompt's last logits); stops after `max_new_tokens` or at an id in `stop_ids`.
/// Returns the generated ids (without the stop id) and the decode speed in tokens per second.
struct GreedyResult {
  std::vector<int32_t> tokens;
  double tokens_per_second = 0;
};
/// With `decode`, the session follows every decoded token (decode_token()).
GreedyResult greedy_decode(Backend& backend, const std::vector<float>& first_logits, int64_t start_pos,
                           BackendCache& cache, int64_t max_new_tokens, const std::vector<int32_t>& stop_ids,
                           DecodeSession* decode = nullptr);

}  // namespace rkv
