// The decoder forward pass on the CPU, in float32, built in layers so that compression and profiling code can
// compose it: embed -> forward_layer (x L) -> final_logits. prefill and decode_step are thin loops over these.
//
// Model (Llama / Qwen2, as Hugging Face transformers' LlamaDecoderLayer), for the rows x[n, D] of n new tokens:
//   h = RMSNorm(x) * attn_norm
//   q = h Wq^T (+bq) [n, H*d],  k = h Wk^T (+bk) [n, H_kv*d],  v = h Wv^T (+bv) [n, H_kv*d]
//   q, k <- RoPE(q, k) at each token's position (rotate_half layout, model/rope.hpp)
//   append k, v to the layer's cache (per KV head; never repeated to query heads)
//   a[i, h] = softmax_j( q[i, h] . K[g(h), j] / sqrt(d) ) V[g(h), j]  over cache entries j <= len_before + i,
//             g(h) = h / G (grouped-query attention, Ainslie et al. 2023)
//   x += a Wo^T
//   h = RMSNorm(x) * ffn_norm;  x += (silu(h Wg^T) * (h Wu^T)) Wd^T   (SwiGLU)
// then logits = RMSNorm(x) * output_norm  W_lm^T (tied: W_lm = token embeddings).
//
// Gemma 3 (config.architecture "gemma3"; transformers Gemma3DecoderLayer, llama.cpp src/models/gemma3.cpp) differs in:
//   x = embedding * sqrt(D) (config.embed_scale)
//   q, k <- RMSNorm(q[h]) * q_norm, RMSNorm(k[g]) * k_norm per head, before RoPE
//   RoPE base rope_theta_swa on sliding-window layers, rope_theta on global ones (Model::layer_inv_freq)
//   scores scaled by config.attention_scale() (query_pre_attn_scalar^-1/2; 1/sqrt(d) for the 270M model)
//   sliding-window layers: key j visible to query i iff pos_i - pos_j < W (config.sliding_window), by the positions
//   the cache stores, in prefill and decode alike
//   x += RMSNorm(a Wo^T) * post_attn_norm;  x += RMSNorm(MLP(h)) * post_ffn_norm
//   MLP(h) = (gelu_tanh(h Wg^T) * (h Wu^T)) Wd^T;  logits <- c tanh(logits / c) when final_logit_softcap c > 0
// The GGUF's norm weights already include Gemma's "1 +" (llama.cpp's converter adds it), so RMSNorm is the same.
// Qwen 3 (transformers Qwen3DecoderLayer): the llama block with q, k <- RMSNorm per head (q_norm, k_norm [d]) before
// RoPE. OLMo 2 (transformers Olmo2DecoderLayer, llama.cpp src/models/olmo2.cpp): no norm before attention or the MLP
// (h = x), q <- RMSNorm(q[i]) * q_norm over the whole row of H*d values and k over its H_kv*d, before RoPE, and
//   x += RMSNorm(a Wo^T) * post_attn_norm;  x += RMSNorm(MLP(x)) * post_ffn_norm.
//
// Products with float32 weights are OpenBLAS sgemm (sgemv for one row); with weights kept in ggml blocks
// (Model::weights == quantized) they go through backend/cpu/qlinear.hpp (SIMD block dots with int8 activations for
// decode, sgemm on dequantized tiles for prefill). Attention is blocked: for each KV head and block
// of queries it forms scores [G*block, keys] only, so memory stays O(G * block * T), never [H, T, T].
//
// Thread rules: functions take the model by const reference and may run concurrently on different caches and
// workspaces. The thread count is process-wide (backend/cpu/threads.hpp). Hooks run on the calling thread.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "backend/cpu/attended_kv.hpp"
#include "backend/cpu/qlinear.hpp"
#include "backend/types.hpp"
#include "cache/attention_stats.hpp"
#include "cache/kv_cache.hpp"
#include "model/model.hpp"

namespace rkv::cpu {

using rkv::LogitsFor;  // backend/types.hpp

/// Scratch buffers reused across calls (grown on demand, never shrunk). One per concurrent caller.
struct Workspace {
  std::vector<float> h, q, k, v, qg, attn, o, gate, up, scores, norm_rows;
  /// RoPE cos/sin tables, one slot per RoPE base (0: global layers, 1: sliding-window layers), reused across layers.
  struct Rope {
    std::vector<float> cos, sin;
    std::vector<int64_t> positions;  ///< positions cos/sin were computed for
    std::vector<double> inv_freq;    ///< frequencies they were computed with
  } rope[2];
  QuantScratch quant;  ///< quantized activations and dequantized weight tiles (backend/cpu/qlinear.hpp)
};

/// Optional observers of one layer's attention, for profiling and compression statistics. Any member may be empty.
/// All are called on the thread that called forward_layer, serially, while the layer runs; pointers are valid only
/// during the call.
struct LayerHooks {
  /// Probability row of query head `head` (0..H-1) for new-token row `query` (0..n-1) over the cache entries
  /// [0, len), len = (cache length before this call) + query + 1, after softmax (sums to 1). Called exactly once per
  /// (head, query); the order of calls is unspecified.
  std::function<void(int64_t head, int64_t query, const float* probs, int64_t len)> on_attention_probs;
  /// The queries after RoPE, float32 [H, n, d] (unscaled: the scores are q . k / sqrt(d)).
  std::function<void(const float* q, int64_t n_heads, int64_t n, int64_t head_dim)> on_queries;
  /// The attention output after o_proj, float32 [n, D], before it is added to the residual stream.
  std::function<void(const float* o, int64_t n, int64_t d_model)> on_attn_output;
  /// Scorer statistics fused into the attention (no second pass over the keys): every attention probability row of
  /// query head h at cache index t (the absolute prompt position when the prefill started from an empty cache) is
  /// added to each accumulator with add_row(h, t, ...). Unlike on_attention_probs this keeps the attention
  /// multi-threaded: with several threads each thread sums into its own partial accumulators, which are added in
  /// thread order afterwards (bit-reproducible at a fixed thread count). The accumulators must be sized for H heads
  /// and the whole prompt; they belong to the caller.
  std::vector<AttentionStatsAccumulator*> stats;
  /// When set: receives float32 [G x sum_g head_length(g)] after the append, the attention probability each entry got
  /// from the n new rows, summed over the rows, per query head (layout: rkv::ExtendObservation::attention_mass).
  std::vector<float>* attention_mass = nullptr;
};

/// Token embeddings: x[t] = tok_embd[tokens[t]] (dequantized when kept in blocks) * config.embed_scale, float32 [n, D]. Throws rkv::InputError when a token id is outside
/// [0, V).
std::vector<float> embed(const Model& model, const std::vector<int32_t>& tokens);

/// Runs transformer block `layer` on the residual rows x[n, D] (float32, in/out), for tokens at absolute `positions`
/// [n] (used only for RoPE of the new queries and keys). Appends the n new keys (after RoPE) and values at
/// kv.length (growing kv's capacity when needed; kv must have n_kv_heads and head_dim of the model, or be empty with
/// capacity 0 and n_kv_heads = 0, in which case it is initialised), then each new row i attends causally to cache
/// entries [0, kv.length_before + i]. Cache entries may be any subset of earlier positions (a compacted cache): keys
/// are stored already rotated; each entry's position is kept beside it (LayerKV::pos, when the cache tracks them).
/// Positions must lie in [0, 2^31).
/// On a sliding-window layer (config.is_sliding(layer)) row i sees only the entries whose stored position p has
/// positions[i] - p < config.sliding_window (the cache must store positions); entries are not dropped.
/// Throws rkv::InputError for a cache of the wrong geometry, or when a model with a window but no sliding-window
/// layers listed (llama/qwen2 with sliding_window) would attend beyond its window.
void forward_layer(const Model& model, int64_t layer, float* x, int64_t n, const int64_t* positions, LayerKV& kv,
                   Workspace& ws, const LayerHooks* hooks = nullptr);

/// forward_layer on a layer a codec stores (cache/packed_kv.hpp): its older entries are `packed` codes, its newest the
/// float32 `tail`. The n new keys and values are appended to the tail, and each new row attends over the packed
/// entries then the tail's (AttendedKV, attended_kv.hpp: the codes are decoded a tile at a time inside the attention
/// products, so no float32 copy of the layer is made). Entry numbering, visibility and results are those of
/// forward_layer on unpack_layer's float32 copy (equal up to float summation order). The caller packs what left the
/// tail's residual afterwards (pack_oldest). A model-wide sliding window counts the packed entries too. Throws as
/// forward_layer does, and rkv::InputError when `packed` and `tail` disagree on geometry.
void forward_packed_layer(const Model& model, int64_t layer, float* x, int64_t n, const int64_t* positions,
                          const PackedLayer& packed, LayerKV& tail, Workspace& ws, const LayerHooks* hooks = nullptr);

/// Block `layer` as a shared layer (Backend::share_layer; Cross-Layer Attention at inference): its own norms, query
/// projection and RoPE, attention over `source` -- another layer's cache (float32, or packed codes with a float32 tail),
/// which must already hold the n new rows' entries at the end of every KV head (the source layer ran first in this
/// pass) -- then its own o_proj and MLP.
/// The layer's own keys and values are neither computed nor stored. Row i attends to source entries
/// [first_i, len_before + i] as forward_layer does (on a sliding-window layer, by the source's stored positions).
/// Throws rkv::InputError for a layer out of range, a source of the wrong geometry or one without the n new rows.
void forward_shared_layer(const Model& model, int64_t layer, float* x, int64_t n, const int64_t* positions,
                          const AttendedKV& source, Workspace& ws, const LayerHooks* hooks = nullptr);

/// Logits for selected rows of the final residual stream: out[r] = RMSNorm(x[rows[r]]) * output_norm  W_lm^T
/// (then c tanh(out / c) when config.final_logit_softcap c > 0).
/// x is float32 [n, D]; rows are indices into it (each in [0, n)); returns float32 [rows.size(), V].
std::vector<float> final_logits(const Model& model, const float* x, int64_t n, const std::vector<int64_t>& rows,
                                Workspace& ws);

/// An empty cache for `model` with room for `capacity` positions per layer.
KVCache make_cache(const Model& model, int64_t capacity);

/// Runs `tokens` (at positions start_pos, start_pos+1, ...) through every layer, appending to `cache` (one LayerKV
/// per layer; pass make_cache(model, n) or a cache that already holds earlier tokens). Processes the tokens in chunks
/// of `chunk` rows (0: all at once) to bound memory. Returns logits float32 [1, V] (Last), [n, V] (All) or nothing.
std::vector<float> prefill(const Model& model, const std::vector<int32_t>& tokens, int64_t start_pos, KVCache& cache,
                           Workspace& ws, LogitsFor which = LogitsFor::Last, int64_t chunk = 0);

/// One decode step: the token at absolute position `pos` through every layer, appended to the cache; returns its
/// logits float32 [V].
std::vector<float> decode_step(const Model& model, int32_t token, int64_t pos, KVCache& cache, Workspace& ws);

}  // namespace rkv::cpu
