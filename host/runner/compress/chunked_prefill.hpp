// Chunked prefill ([prefill] chunk_tokens = C; README "Chunked prefill"): the prompt's T tokens go through the model in
// n = ceil(T / C) chunks of near-equal length (at most C each, lengths differing by at most one: chunk_bounds), the
// first with Backend::prefill and the others with Backend::extend on the same cache, as vLLM and SGLang prefill long
// prompts under a token budget per step. Near-equal rather than C, C, ..., remainder: a remainder of a few tokens
// would run the CPU backend's quantized matmuls on their few-row path (int8 activations for at most 4 rows,
// backend/cpu/qlinear.hpp), which rounds differently from the many-row one; with chunks of at least 5 tokens (C >= 10
// whenever T > C) every chunk takes the many-row path and the cache equals the one-shot prefill's. Two modes:
//
//  - without compression between chunks (chunked_prefill_prompt): the cache grows to T entries and every chunk's
//    queries see the whole of the earlier chunks, so the result equals the one-shot prefill (logits, cache and
//    statistics within float rounding). The scorers' statistics are streamed, never a T x T matrix: cumulative
//    attention sums each chunk's attention mass (ExtendCapture::attention_mass), query moments merge per chunk
//    (QueryMomentsAccumulator), and window attention and window queries come from the last w queries, kept as the
//    chunks pass, against the final keys.
//
//  - with compression between chunks (prefill_compressing_chunks): after every chunk each compressible layer whose KV
//    heads hold more than their budget b_l is scored as it is held (held_scoring.hpp: the scorer's decode-time
//    statistics over that chunk's queries) and cut to b_l, so the next chunk's queries see only what the earlier
//    chunks kept: the real setting of an engine that prefills in chunks under a memory cap, not the oracle of
//    kvpress' BlockPress (NVIDIA/kvpress#186: it scores block k with hidden states computed from the full, uncompressed
//    earlier blocks). A layer never holds more than b_l + C entries (b_l after a chunk's compression), the budget is
//    b_l of the whole prompt at every chunk (it does not grow per chunk), and sinks stay at absolute positions
//    0 .. s - 1 (they are the first held entries, and protected). Sliding-window layers first drop what lies before
//    their window (exact: no later query sees it). A scorer can score a chunk when it declares decode_scoring
//    (abi/ripplekv/plugin.h); the plan refuses the others (runner/plan/config.cpp).
//
// Memory: the cache (at most T entries, or b_l + C per layer), the chunk's captured queries ([L][H, C, d] float32)
// and, with cumulative attention, [L][H, T] sums. Thread rules: the backend's; plugins are never called concurrently.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "runner/compress/compress_prompt.hpp"
#include "runner/compress/prefill.hpp"
#include "runner/compress/scorers.hpp"

namespace rkv {

/// The chunks of a prompt of T tokens under a chunk budget of C >= 1: n = ceil(T / C) consecutive (first position,
/// length) pairs covering 0 .. T - 1, the first T mod n of length ceil(T / n) and the others floor(T / n), so each
/// is at most C. E.g. T = 45, C = 16: (0, 15), (15, 15), (30, 15); T = 50, C = 16: 13, 13, 12, 12.
std::vector<std::pair<int64_t, int64_t>> chunk_bounds(int64_t T, int64_t C);

/// prefill_prompt() in chunks of `chunk_tokens` (>= 1; one shot when it is 0 or at least T): the same
/// PrefilledPrompt (full cache, statistics of `needs`, window queries, last logits) within float rounding.
/// rkv::InputError for an empty prompt or chunk_tokens < 0.
PrefilledPrompt chunked_prefill_prompt(Backend& backend, const std::vector<int32_t>& tokens, const PrefillNeeds& needs,
                                       int64_t chunk_tokens);

/// What one chunk did to the cache (for tests and logs).
struct ChunkTrace {
  int64_t first_position = 0;                    ///< the chunk's first position
  int64_t tokens = 0;                            ///< its length
  std::vector<int64_t> held_after_append;        ///< [L] longest KV head after the chunk was appended
  std::vector<int64_t> held_after_compression;   ///< [L] after the window cut and the eviction
  std::vector<std::vector<int32_t>> positions;   ///< [L] positions held after compression (KV head 0); with trace only
};

/// A prompt prefilled in chunks with compression between them.
struct ChunkedCompression {
  CompressedPrompt comp;           ///< budgets, cache, bytes_kept; bytes_full is left 0 (the caller knows the full cache)
  std::vector<float> last_logits;  ///< float32 [V] after position T - 1, on the compressed earlier chunks
  std::vector<ChunkTrace> chunks;  ///< one per chunk, in order
};

/// Prefills `tokens` in chunks of `chunk_tokens` (>= 1), compressing after every chunk each layer of `layers` (the
/// set A, ascending) whose heads hold more than min(budgets[a], span_l) entries, scored by `scorers.at(l)` with its
/// decode-time requirements (see the top of this file). Layers outside A keep every entry (sliding ones their window).
/// `trace_positions` also records the positions each layer holds after every chunk (a host copy per layer and chunk).
/// rkv::InputError for an empty prompt, chunk_tokens < 1, layers and budgets of different lengths, and a scorer that
/// does not declare decode_scoring (naming it).
ChunkedCompression prefill_compressing_chunks(Backend& backend, const std::vector<int32_t>& tokens,
                                              int64_t chunk_tokens, const LayerScorers& scorers,
                                              const std::vector<int64_t>& layers, const std::vector<int64_t>& budgets,
                                              bool trace_positions = false);

}  // namespace rkv
