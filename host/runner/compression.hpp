// The compression pipeline of one prompt on the CPU backend (DESIGN.md "Data flow of ripplekv run"):
//
//   prefill once (full cache, queries kept for the scorer statistics)
//   -> per ablation cell: allocator -> b_l per compressible layer
//      -> per layer: statistics -> scorer -> scores -> host top-k (protected positions first) -> compacted cache
//
// The prefill is shared by every cell; statistics and scores depend only on the scorer (and its params), so they are
// memoized per prompt and scorer (ScoreMemo), and each cell pays only for selection and compaction.
//
// Thread rules: a PrefilledPrompt and a ScoreMemo belong to one thread at a time; plugin instances are never called
// concurrently (the ABI's rule).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backend/cpu/forward.hpp"
#include "cache/attention_stats.hpp"
#include "cache/kv_cache.hpp"
#include "plugin/allocator_call.hpp"
#include "plugin/scorer_call.hpp"

namespace rkv {

/// A prompt after one full prefill.
struct PrefilledPrompt {
  std::vector<int32_t> tokens;                  ///< the T prompt tokens
  KVCache cache;                                ///< full cache, length T in every layer
  int64_t n_queries = 0;                        ///< queries kept per layer: the last n_queries prompt positions
  std::vector<std::vector<float>> queries;      ///< per layer, float32 [H, n_queries, d] after RoPE
  std::vector<float> last_logits;               ///< float32 [V], the prediction after position T - 1
  double seconds = 0;                           ///< prefill wall time
};

/// Prefills `tokens` (positions 0..T-1) into a fresh cache and keeps the queries of the last `keep_queries`
/// positions of every layer (clamped to T; 0 keeps none). Throws rkv::InputError for an empty prompt.
PrefilledPrompt prefill_prompt(const Model& model, const std::vector<int32_t>& tokens, int64_t keep_queries,
                               cpu::Workspace& ws);

/// A scorer as a cell uses it: the instance, what it declared, and a key naming it with its params.
struct ScorerUse {
  const PluginInstance* instance = nullptr;
  ScorerRequirements requirements;
  std::string key;  ///< id + params; equal keys give equal scores
};

/// Statistics and scores of one prompt, memoized per scorer key and layer.
class ScoreMemo {
 public:
  /// Scores [H_kv, T] of `layer` for `scorer` on `prompt`, computing statistics and calling the scorer once.
  const ScoreResult& scores(const Model& model, const PrefilledPrompt& prompt, const ScorerUse& scorer, int64_t layer);

 private:
  std::map<std::pair<std::string, int64_t>, ScoreResult> scores_;
};

/// The cache of one cell after compression.
struct CompressedPrompt {
  KVCache cache;                      ///< compacted per layer to [H_kv, b_l, d] (layers not in A untouched)
  std::vector<int64_t> budgets;       ///< per model layer: b_l, or T for a layer left whole
  size_t bytes_full = 0;              ///< cache bytes before compression (T positions every layer)
  size_t bytes_kept = 0;              ///< cache bytes after
  std::vector<std::string> warnings;  ///< scorer and selection warnings (e.g. b_l below the protected count)
  double seconds = 0;                 ///< statistics + scoring + selection + compaction wall time
};

/// Copies `prompt`'s full cache and compresses every layer of `layers` (model layer indices, the set A) to
/// `budgets` (one per entry of `layers`; b_l >= T leaves the layer whole) with `scorer`.
CompressedPrompt compress_prompt(const Model& model, const PrefilledPrompt& prompt, const ScorerUse& scorer,
                                 const std::vector<int64_t>& layers, const std::vector<int64_t>& budgets,
                                 ScoreMemo& memo);

/// Teacher-forced continuation on a cache: feeds `tokens` at positions start_pos.. (appending to `cache`) and
/// returns the logits after each of them, float32 [n, V].
std::vector<float> continuation_logits(const Model& model, const std::vector<int32_t>& tokens, int64_t start_pos,
                                       KVCache& cache, cpu::Workspace& ws);

/// Greedy decoding on a cache that holds a prompt of `start_pos` positions: the first token is argmax of
/// `first_logits` (the prompt's last logits); stops after `max_new_tokens` or at an id in `stop_ids`.
/// Returns the generated ids (without the stop id) and the decode speed in tokens per second.
struct GreedyResult {
  std::vector<int32_t> tokens;
  double tokens_per_second = 0;
};
GreedyResult greedy_decode(const Model& model, const std::vector<float>& first_logits, int64_t start_pos,
                           KVCache& cache, int64_t max_new_tokens, const std::vector<int32_t>& stop_ids,
                           cpu::Workspace& ws);

}  // namespace rkv
