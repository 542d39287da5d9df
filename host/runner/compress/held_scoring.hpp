// Scoring and evicting the entries a cache holds at some moment (abi/ripplekv/plugin.h, rkv_scorer_requirements
// "Decode-time scoring"), as opposed to a prompt's full prefill (compress_prompt.hpp): what the decode policy
// "periodic" does every `interval` decoded tokens (kvpress DecodingPress) and what chunked prefill with compression
// between chunks does after every chunk (chunked_prefill.hpp). A scorer declares that it can score held entries with
// `decode_scoring`; it then receives the decode-time statistics of its `decode_stats`:
//
//   window attention over the queries since the last compression (at most w, the scorer's window), each query i at
//   position p_i seeing the held entries at or before it:
//     W[q, j] = sum_i softmax_j( s q_i . k_j ) over {j : pos_j <= p_i},   0 for the others   (s: the model's scale)
//   (between two compressions nothing is evicted, so the entries a query saw are exactly those at or before it);
//   window queries: those queries after RoPE, [H, w, d];
//   cumulative attention: the attention each held entry has accumulated so far (AccumulatedAttention);
//   keys and values: the held entries.
// A KV head holding fewer entries than the layer's longest is padded with zero keys and values, whose scores are
// never used.
//
// Thread rules: the backend's; plugin instances are never called concurrently.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "backend/backend.hpp"
#include "runner/compress/accumulated_attention.hpp"
#include "runner/compress/keep_entries.hpp"
#include "runner/compress/scorers.hpp"

namespace rkv {

/// One query row of a layer seen since the last compression: float32 [H, d] after RoPE, and its position.
struct HeldQuery {
  int64_t position = 0;
  std::vector<float> q;
};

/// `kv` as a uniform [H_kv, n, d] layer, n = its longest head; shorter heads padded with zero rows (position -1).
LayerKV padded_uniform(const LayerKV& kv);

/// W [H, n] of the file comment over the entries of `kv` (its own head lengths; n = the longest), from `window`, with
/// the model's softmax scale `scale` (ModelConfig::attention_scale: 1/sqrt(d) unless the model sets its own) and
/// score soft-cap `softcap` (ModelConfig::attn_logit_softcap: logit <- c tanh(logit / c) for c > 0; 0 for none).
/// Sums in double, rounded once to float.
std::vector<float> held_window_attention(const LayerKV& kv, const std::deque<HeldQuery>& window, int64_t n_heads,
                                         float scale, float softcap);

/// Scores layer `layer` of `cache` as it is held, with `req` (the scorer's decode-time requirements,
/// ScorerRequirements::for_decode), then keeps per KV head h its protected entries and its top scores up to
/// target(h) entries (select_positions: the prefill's rule), in one compaction. Heads already within their target
/// keep everything. `window`: the queries since the last compression (oldest first; the last w are used); `acc`:
/// the accumulated attention (required when req asks for cumulative attention; it follows the compaction).
/// Returns the kept cache indices per KV head. rkv::InputError when the scorer's output is bad (run_scorer) or a
/// required input is missing.
KeepLists evict_held_layer(Backend& backend, BackendCache& cache, int64_t layer, const ScorerUse& scorer,
                           const ScorerRequirements& req, const std::deque<HeldQuery>& window,
                           AccumulatedAttention* acc, const std::function<int64_t(int64_t head)>& target);

}  // namespace rkv
