// The decode loop on any cache (docs/ARCHITECTURE.md "Data flow"): feeding tokens after a prompt, one at a time under
// a decode policy's session (runner/decode/policy.hpp) or all at once without one; teacher-forced continuations;
// greedy answers. Every path cuts sliding-window layers to their windows after each extend, so a layer never holds
// entries older than its window (runner/compress/sliding_window.hpp).
//
// Thread rules: the backend's (one call at a time per backend); a DecodeSession belongs to one sequence.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.hpp"
#include "runner/decode/policy.hpp"

namespace rkv {

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

/// Greedy answer on a cache that holds a prompt of `start_pos` positions whose last logits are `prompt_logits`:
/// feeds `question` first when it is not empty (token by token under `decode`, else at once), then decodes greedily
/// (greedy_decode) for at most `max_new_tokens`, stopping at an id of `stop_ids`. The first fed token sits at position
/// `start_pos` (T, or the cache length after key re-rotation).
GreedyResult answer_greedily(Backend& backend, const std::vector<float>& prompt_logits, BackendCache& cache,
                             int64_t start_pos, const std::vector<int32_t>& question, int64_t max_new_tokens,
                             const std::vector<int32_t>& stop_ids, DecodeSession* decode);

}  // namespace rkv
