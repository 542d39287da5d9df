// Causal attention of new rows over one layer's KV cache on the CPU: the part of forward_layer (forward.hpp) whose cost
// grows with the number of cache entries, so it is also what a compressed cache makes cheaper on decode.
//
// For new row i of n, query head h and its KV head g = h / G (grouped-query attention, Ainslie et al. 2023):
//   a[i, h] = sum_j softmax_j( cap(s * q[i, h] . K[g, j]) ) V[g, j]   over cache entries j in [first_i, len_before_g + i],
// cap(x) = c tanh(x / c) with c = config.attn_logit_softcap when it is > 0 (gemma2), x otherwise,
// s = config.attention_scale() (1/sqrt(d) unless the model says otherwise), len_before_g = the entries KV head g held
// before the n new ones, first_i = 0 on a global layer, the first entry inside the window on a sliding-window layer
// (window_starts). Computed in blocks of 64 queries x G heads ([G*64, keys] scores at a time), so memory stays
// O(G * 64 * T), never [H, T, T]. A decode step (n = 1) reads each KV head's head_length entries once: its cost is
// linear in the entries held.
//
// Thread rules: reentrant for different workspaces; spreads its blocks over the process-wide pool (threads.hpp).
#pragma once
#include <cstdint>
#include <vector>

#include "backend/cpu/attended_kv.hpp"
#include "backend/cpu/forward.hpp"
#include "model/model.hpp"

namespace rkv::cpu {

/// First cache entry of KV head g that new row i may see, for every head and row: first[g * n + i], int64
/// [H_kv * n]. A global layer sees from entry 0 (the result is empty); a sliding-window layer of window W only entries
/// with positions[i] - p < W for stored position p (the head's positions ascend, so the visible entries are a
/// contiguous range ending at the row's own entry, found by binary search). kv must already hold the n new entries at
/// the end of every head; positions: [n] absolute positions of the new rows. Throws rkv::InputError when a
/// sliding-window layer's cache stores no positions.
std::vector<int64_t> window_starts(const ModelConfig& c, int64_t layer, const AttendedKV& kv, const int64_t* positions,
                                   int64_t n);

/// Blocked causal attention (formula at the top of this file) for the n new rows. qg: queries after RoPE, float32
/// [H_kv, n, G, d] (queries regrouped per KV head). kv views the cache -- float32, or packed codes followed by a float32
/// tail (attended_kv.hpp: the codes are decoded tile by tile inside the products, never into a copy of the layer) --
/// with the n new entries already appended to every head (head g attends to its own head_length(g) entries, from first[g * n + i] on: window_starts; pass an
/// empty `first` for a global layer). out: float32 [n, H*d], written. Scratch comes from ws.scores and ws.o.
///
/// One new row (a decode step) with no hook reading probabilities, statistics or attention mass: each KV head's
/// entries are cut into pieces of 512, all heads' pieces spread over the pool, and merged per head by the log-sum-exp
/// rule (flash-decoding), so the threads stay equally busy whatever the number of KV heads; the result does not depend
/// on the thread count. Otherwise, without a probability hook and with several threads, the blocks (KV head x query block) are spread over the pool,
/// each thread running its blocks' sgemm calls single-threaded (one synchronisation per layer instead of three per
/// block; blocks are dealt round-robin so early, cheap blocks and late, expensive ones mix). With
/// hooks->on_attention_probs, blocks run in order on the calling thread (the hook's contract), with multi-threaded
/// sgemm and softmax. hooks->stats and hooks->attention_mass are filled as LayerHooks documents (forward.hpp).
void attention(const ModelConfig& c, const float* qg, int64_t n, const AttendedKV& kv, const std::vector<int64_t>& first,
               float* out, Workspace& ws, const LayerHooks* hooks);

}  // namespace rkv::cpu
