// The one full prefill of a prompt that every cell of a run shares (docs/ARCHITECTURE.md "Data flow"): the full
// cache, and in the same pass the statistics the cells' scorers asked for (window and cumulative attention, query
// counts and moments; cache/attention_stats.hpp) and the window queries, so each cell pays only for its own selection.
//
// Thread rules: a PrefilledPrompt belongs to one thread at a time; the backend's rules apply to prefill_prompt.
#pragma once
#include <cstdint>
#include <exception>
#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "cache/attention_stats.hpp"
#include "runner/compress/scorers.hpp"
#include "runner/compress/sliding_window.hpp"

namespace rkv {

/// What the prefill of an evaluation prompt must produce for a set of scorers.
struct PrefillNeeds {
  int64_t keep_queries = 0;                   ///< window queries (RKV_STAT_WINDOW_QUERIES): the largest window
  std::vector<AttentionStatsOptions> stats;   ///< distinct statistics requests
};

/// The union of what `scorers` need (each distinct statistics request once), plus the cumulative attention of the
/// whole prompt when `cumulative_for_decode` (a decode policy that seeds accumulated attention from it).
PrefillNeeds prefill_needs(const std::vector<const ScorerUse*>& scorers, bool cumulative_for_decode = false);

/// True when `a` and `b` ask for the same statistics (the same sums over the same window, the same moments).
bool same_stats_request(const AttentionStatsOptions& a, const AttentionStatsOptions& b);

/// True when `o` asks for any statistic at all.
bool needs_stats(const AttentionStatsOptions& o);

/// A prompt after one full prefill.
struct PrefilledPrompt {
  std::vector<int32_t> tokens;                      ///< the T prompt tokens
  std::unique_ptr<BackendCache> cache;              ///< full cache: T entries per layer (chunked: a sliding layer its span)
  int64_t n_queries = 0;                            ///< queries kept per layer: the last n_queries prompt positions
  std::vector<std::vector<float>> queries;          ///< per layer, float32 [H, n_queries, d] after RoPE
  std::vector<AttentionStatsOptions> stats_options; ///< the statistics computed during the prefill ...
  std::vector<std::vector<AttentionStats>> stats;   ///< ... [request][layer]
  std::vector<float> last_logits;                   ///< float32 [V], the prediction after position T - 1
  double seconds = 0;                               ///< prefill wall time

  /// The statistics of `layer` that a request equal to `options` computed (same_stats_request), or null.
  const AttentionStats* find_stats(const AttentionStatsOptions& options, int64_t layer) const;
};

/// Prefills `tokens` (positions 0..T-1) on `backend` into a fresh cache, with what `needs` asks for. Throws
/// rkv::InputError for an empty prompt.
PrefilledPrompt prefill_prompt(Backend& backend, const std::vector<int32_t>& tokens, const PrefillNeeds& needs);

/// The prefill's cumulative attention of every layer ([L] of [H, T]) when one of its statistics requests computed it,
/// else null: what DecodePolicy::begin() seeds accumulated attention with.
const std::vector<AttentionStats>* prompt_cumulative_attention(const PrefilledPrompt& prompt);

/// True when the prompt's full cache can be scored in place (with_prompt_cache): a model without sliding-window
/// layers. A sliding layer drops its oldest entries as a continuation moves the window on (drop_out_of_window), which
/// a cut from the back cannot restore, so such a model scores a copy.
inline bool scores_prompt_cache_in_place(const ModelConfig& config) { return !has_sliding_window(config); }

/// Runs `use(cache)` on the full cache of `prompt`, which `use` may extend (a continuation, an answer), and returns
/// what `use` returns. When scores_prompt_cache_in_place() this is the prompt's own cache, cut back to its T entries
/// afterwards, on return or on an exception (Backend::truncate), so scoring costs no second copy of the cache; room
/// for `extra` appended tokens is reserved first (Backend::reserve) so the first append does not grow every layer by
/// half (`use` may append more). Otherwise `cache` is a copy (Backend::clone) freed on return. Either way the
/// prompt's cache holds after the call what it held before. Thread rules: the prompt's.
template <class Use>
decltype(auto) with_prompt_cache(Backend& backend, const PrefilledPrompt& prompt, int64_t extra, Use&& use) {
  if (!scores_prompt_cache_in_place(backend.model().config)) {
    const std::unique_ptr<BackendCache> copy = backend.clone(*prompt.cache);
    return use(*copy);
  }
  BackendCache& cache = *prompt.cache;
  const int64_t T = static_cast<int64_t>(prompt.tokens.size());
  struct CutBack {
    Backend& backend;
    BackendCache& cache;
    int64_t T;
    ~CutBack() noexcept(false) {
      if (std::uncaught_exceptions() == 0) {
        backend.truncate(cache, T);
        return;
      }
      try {
        backend.truncate(cache, T);
      } catch (...) {  // the exception already in flight is the one to report
      }
    }
  } cut{backend, cache, T};
  backend.reserve(cache, extra);
  return use(cache);
}

/// A fresh copy of the prompt's cache as it was before scoring, while `scored` (the cache with_prompt_cache passed
/// to its `use`) may have been extended: the prompt's own cache copied and cut back to T when `scored` is that cache,
/// else a copy of the prompt's untouched cache. The caller owns the copy.
inline std::unique_ptr<BackendCache> copy_prompt_cache(Backend& backend, const PrefilledPrompt& prompt,
                                                       const BackendCache& scored) {
  if (&scored != prompt.cache.get()) return backend.clone(*prompt.cache);
  std::unique_ptr<BackendCache> copy = backend.clone(scored);
  backend.truncate(*copy, static_cast<int64_t>(prompt.tokens.size()));
  return copy;
}

}  // namespace rkv
