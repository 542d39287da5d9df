// The CUDA kernels of the decoder core, as plain launch functions (FlashInfer style): raw device pointers, sizes and
// the stream to run on; no framework types, no allocation, no synchronization. Each returns the launch status
// (cudaGetLastError() after the launch); the binding layer (backend/cuda/forward.cpp and friends) checks it.
//
// Conventions:
//  - every matrix is row-major; `ld` arguments are row strides in elements;
//  - `DType` names the storage type of activations, weights and the KV cache: F32, or BF16 (bfloat16, converted with
//    round-to-nearest-even); arithmetic is float32 throughout (double where stated);
//  - a KV cache layer is two buffers [n_kv_heads, capacity, head_dim] (keys after RoPE, values), as rkv::LayerKV;
//    query head h reads KV head h / G, G = n_heads / n_kv_heads;
//  - head_dim must be 64, 128 or 256 for the attention kernels (attention_supported_head_dim()).
// Thread rules: launches are asynchronous on `stream`; the caller keeps every buffer alive until the stream has
// passed the kernel.
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/cuda/runtime.hpp"

namespace rkv::RKV_CUDA_NS::kernels {

enum class DType : int { F32 = 0, BF16 = 1 };

/// Bytes per element of `t` (4 or 2).
inline size_t dtype_size(DType t) { return t == DType::F32 ? 4 : 2; }

/// Head dimensions the attention kernels are built for.
inline bool attention_supported_head_dim(int d) { return d == 64 || d == 128 || d == 256; }

/// x[i, :] = table[tokens[i], :] as float32. table: `t` [vocab, d_model]; tokens: int32 [n] (already range-checked by
/// the caller); x: float32 [n, d_model].
cudaError_t embed(DType t, const void* table, const int32_t* tokens, int64_t n, int64_t d_model, float* x,
                  cudaStream_t stream);

/// RMSNorm of each row (Zhang & Sennrich 2019; HF LlamaRMSNorm), as rkv::cpu::rmsnorm_row:
///   y[r, i] = x[r, i] * s_r * w[i],  s_r = float(1 / sqrt(mean_i(double(x[r, i])^2) + eps)),
/// the mean of squares accumulated in double. x: float32 [rows, n]; w: float32 [n]; y: `out` [rows, n].
cudaError_t rmsnorm(const float* x, const float* w, float eps, int64_t rows, int64_t n, DType out, void* y,
                    cudaStream_t stream);

/// After the fused Q/K/V projection qkv[n, ld] (float32, the GEMM's output; columns [0, H d) queries,
/// [H d, (H + H_kv) d) keys, then values): adds the float32 bias [(H + 2 H_kv) d] when not null, rotates queries and
/// keys with RoPE (rotate_half layout, model/rope.hpp; angle = positions[i] * inv_freq[p] in double, cos/sin rounded
/// to float, as rkv::rope_tables), writes the rotated queries to q_out (`t` [n, H d]) and appends key and value rows
/// i at cache index first_index + i of k_cache / v_cache ([H_kv, capacity, d] each, `t`). positions: int64 [n];
/// inv_freq: double [d / 2]. Values are rounded to `t` once, after the float32 arithmetic.
cudaError_t qkv_rope_append(DType t, const float* qkv, int64_t n, int64_t ld, const float* bias,
                            const int64_t* positions, const double* inv_freq, int n_heads, int n_kv_heads, int head_dim,
                            void* q_out, void* k_cache, void* v_cache, int64_t capacity, int64_t first_index,
                            cudaStream_t stream);

/// SwiGLU (Shazeer 2020): act[i, f] = silu(g) * u, g = gate_up[i, f], u = gate_up[i, d_ff + f],
/// silu(g) = g / (1 + exp(-g)). gate_up: float32 [n, 2 d_ff] (the GEMM's output); act: `t` [n, d_ff].
cudaError_t silu_mul(DType t, const float* gate_up, int64_t n, int64_t d_ff, void* act, cudaStream_t stream);

/// GeGLU with the tanh GELU (Gemma): act[i, f] = gelu_tanh(g) * u, g = gate_up[i, f], u = gate_up[i, d_ff + f],
/// gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))), as rkv::cpu::gelu_tanh_mul. Layouts as silu_mul.
cudaError_t gelu_tanh_mul(DType t, const float* gate_up, int64_t n, int64_t d_ff, void* act, cudaStream_t stream);

/// Per-head RMSNorm of the queries and keys in the fused Q/K/V projection qkv[n, ld] (float32, in place; qwen3's and
/// gemma3's q_norm / k_norm, before RoPE): each of the H query heads and H_kv key heads of a row, head_dim values,
/// becomes x * s * w with s as rmsnorm's (mean of squares in double), w = q_w [head_dim] for queries, k_w for keys.
/// olmo2's norm of a whole projection is one call per projection with one "head" of H*d (or H_kv*d) values.
cudaError_t head_rmsnorm(float* qkv, int64_t n, int64_t ld, int n_heads, int n_kv_heads, int head_dim,
                         const float* q_w, const float* k_w, float eps, cudaStream_t stream);

/// y[i] = x[i] converted to `out` (float32 copied, bfloat16 rounded to nearest even) for `count` values: a sublayer's
/// input where the model has no pre-norm (olmo2). x: float32 [count]; y: `out` [count], not overlapping x.
cudaError_t to_dtype(const float* x, int64_t count, DType out, void* y, cudaStream_t stream);

/// x[i] *= s for `count` float32 values (gemma3's embedding scale sqrt(D)).
cudaError_t scale_inplace(float* x, float s, int64_t count, cudaStream_t stream);

/// x[i] = cap * tanh(x[i] / cap) for `count` float32 values, cap > 0 (final logit soft-capping).
cudaError_t softcap(float* x, float cap, int64_t count, cudaStream_t stream);

/// out[r] = float(sum_c |double(x[r, c])|), the L1 norm of each row of x (float32 [rows, n]), summed in double;
/// out: float32 [rows]. Backend::value_output_norms' reduction.
cudaError_t row_l1(const float* x, int64_t rows, int64_t n, float* out, cudaStream_t stream);

/// x[i] += y[i] for `count` float32 values.
cudaError_t add_inplace(float* x, const float* y, int64_t count, cudaStream_t stream);

/// pos[h * capacity + first + i] = positions[i] (int64 -> int32) for every KV head h < n_kv_heads and i < n: the
/// original positions of n entries appended at cache index `first` (pos: int32 [n_kv_heads, capacity]).
cudaError_t store_positions(int32_t* pos, int64_t capacity, int n_kv_heads, int64_t first, const int64_t* positions,
                            int64_t n, cudaStream_t stream);

/// Attention geometry shared by the attention kernels.
struct AttentionShape {
  int n_heads = 0;     ///< H
  int n_kv_heads = 0;  ///< H_kv (divides H)
  int head_dim = 0;    ///< d: 64, 128 or 256
  float scale = 0.0f;  ///< softmax scale (ModelConfig::attention_scale(): 1 / sqrt(d) unless the model says otherwise)
  /// W > 0: a sliding-window layer (gemma3): key j is visible to a new row only if also q_pos - k_pos[j] < W, with
  /// q_pos the row's position (q_pos[i], int64 [n] on the device) and k_pos the cache's int32 positions
  /// [H_kv, capacity] (the layout of the keys). 0: causal only, and k_pos / q_pos are not read.
  int64_t window = 0;
  const int32_t* k_pos = nullptr;
  const int64_t* q_pos = nullptr;
  /// c > 0: every scaled score x becomes c tanh(x / c) before the softmax (gemma2 attn_logit_softcapping), in the
  /// attention and in the statistics alike (softcap_score in common.cuh); 0: none.
  float softcap = 0.0f;
};

/// Causal grouped-query attention for n new rows (prefill; FlashAttention-style tiling with an online softmax, no
/// [n, keys] matrix in memory). Row i (cache index first_index + i) attends to cache entries [0, first_index + i]
/// (within shape.window of its position, when set):
///   out[i, h] = sum_j softmax_j(cap(scale * q[i, h] . k[h / G, j])) v[h / G, j],  cap: shape.softcap's (or none).
/// q: `t` [n, q_ld] with head h at columns [h d, (h + 1) d) (qkv_rope_append's q_out); caches as above;
/// out: `t` [n, out_ld] with the same head layout; lse: when not null, float32 [H, n] receives the log-sum-exp of each
/// row's scaled scores (natural log), which attention_stats() needs. Math in float32 from the stored values.
cudaError_t prefill_attention(DType t, const void* q, int64_t q_ld, int64_t n, const void* k_cache,
                              const void* v_cache, int64_t capacity, int64_t first_index, AttentionShape shape,
                              void* out, int64_t out_ld, float* lse, cudaStream_t stream);

/// Floats of workspace decode_attention() needs for `splits` splits: splits * H * (d + 2).
inline size_t decode_attention_workspace_floats(int splits, const AttentionShape& s) {
  return static_cast<size_t>(splits) * static_cast<size_t>(s.n_heads) * static_cast<size_t>(s.head_dim + 2);
}

/// Splits along the cache for one decode row over `length` entries on a GPU with `sm_count` multiprocessors:
/// enough blocks (splits * H_kv) to fill the GPU about twice, each split at least 256 entries, at most 256 splits.
int decode_attention_splits(int64_t length, int n_kv_heads, int sm_count);

/// Attention of one new row over cache entries [0, length) (within shape.window of q_pos[0], when set; decode;
/// split-K / flash-decoding: each of `splits`
/// blocks per KV head reduces a contiguous range of the cache for all G query heads of that KV head, then a second
/// kernel merges the splits). q: `t` [H d]; out: `t` [H d]; workspace: float32, decode_attention_workspace_floats().
/// Same result as prefill_attention() for one row up to float rounding.
cudaError_t decode_attention(DType t, const void* q, const void* k_cache, const void* v_cache, int64_t capacity,
                             int64_t length, AttentionShape shape, int splits, float* workspace, void* out,
                             cudaStream_t stream);

/// Adds one chunk of queries to the attention statistics of a prompt of `stats_len` positions (cache index = prompt
/// position; rkv::AttentionStatsAccumulator's definitions, cache/attention_stats.hpp):
///   cumulative_sums[h, j] += sum_{rows i} A[h, t_i, j]                     (when not null)
///   window_sums[h, j]     += sum_{rows i with t_i >= window_start} A[h, t_i, j]   (when not null)
/// with t_i = first_index + i and A[h, t, j] = exp(cap(scale * q[i, h] . k[h / G, j]) - lse[h, i]) for j <= t (and, with
/// shape.window, q_pos[i] - k_pos[j] < window; 0 otherwise).
/// q, q_ld, n, caches: as prefill_attention(), after it ran on this chunk; lse: its float32 [H, n] output.
/// Sums are float32 [H, stats_len]; columns [0, first_index + n) are touched, each by one thread in a fixed order
/// (deterministic, no atomics).
cudaError_t attention_stats(DType t, const void* q, int64_t q_ld, int64_t n, int64_t first_index, const float* lse,
                            const void* k_cache, int64_t capacity, AttentionShape shape, int64_t stats_len,
                            int64_t window_start, float* window_sums, float* cumulative_sums, cudaStream_t stream);

/// Top-k selection per KV head with protected positions (rkv::select_positions semantics, cache/selection.hpp):
/// head h keeps every position p with keep_protected[p] != 0 (n_protected_kept of them) plus the
/// budget - n_protected_kept best other positions by (score descending, position ascending), written ascending to
/// positions[h, 0 .. budget). Candidates are the positions with protected_mask[p] == 0 (keep_protected is a subset
/// of protected_mask). scores: float32 [n_kv_heads, T]; positions: int64 [n_kv_heads, budget].
/// When a candidate score is not finite (and candidates are needed), *bad (int64, initialised by the caller to
/// INT64_MAX) receives the smallest h * T + p among them; the output is then meaningless. One block per KV head;
/// radix select on 64-bit keys (order-preserving score bits, then the complemented position), so ties go to the
/// earlier position exactly.
cudaError_t select_topk(const float* scores, int64_t n_kv_heads, int64_t T, const uint8_t* protected_mask,
                        const uint8_t* keep_protected, int64_t n_protected_kept, int64_t budget, int64_t* positions,
                        int64_t* bad, cudaStream_t stream);

/// dst[h, i, :] = src[h, positions[h, i], :] for h < n_kv_heads, i < kept (cache compaction).
/// src: `t` [n_kv_heads, src_capacity, d]; positions: int64 [n_kv_heads, kept]; dst: `t` [n_kv_heads, kept, d].
cudaError_t gather_rows(DType t, const void* src, int64_t src_capacity, const int64_t* positions, int64_t n_kv_heads,
                        int64_t kept, int head_dim, void* dst, cudaStream_t stream);

/// Key re-rotation to contiguous positions (compression.rerotate; rkv::rerotate_layer in cache/rerotation.hpp): for
/// every KV head h < n_kv_heads and entry i < length, with p = pos[h * capacity + i] the position its key was rotated
/// at:  k[h, i] <- R((i - p) inv_freq) k[h, i],  pos[h * capacity + i] <- i.  R is RoPE's rotate_half rotation
/// (model/rope.hpp): angle (i - p) * inv_freq[q] in double, cos/sin rounded to float, float32 arithmetic, the key
/// rounded to `t` once. k_cache: `t` [n_kv_heads, capacity, d], rotated in place; pos: int32 [n_kv_heads, capacity];
/// inv_freq: double [d / 2]. cudaErrorInvalidValue for an odd head_dim, one above 256 or length > capacity.
cudaError_t rerotate_keys(DType t, void* k_cache, int32_t* pos, int64_t capacity, int64_t n_kv_heads, int64_t length,
                          int head_dim, const double* inv_freq, cudaStream_t stream);

/// The packed layout of one KV head's entries (cache/codec.hpp), as plain numbers for the kernels.
constexpr int kCodecInteger = 1, kCodecKivi = 2, kCodecQ8_0 = 3, kCodecQ4_0 = 4, kCodecF16 = 5;
struct CodecLayout {
  int format = kCodecInteger;  ///< kCodecInteger, kCodecKivi, kCodecQ8_0, kCodecQ4_0 or kCodecF16
  int bits = 4;                ///< integer, kivi: 2, 4 or 8
  int64_t group = 32;          ///< integer: channels per group; kivi: entries per key group, channels per value group
  bool symmetric = false;      ///< integer only
  int64_t head_dim = 0;
};

/// Dequantizes `n` packed entries of one KV head into dst rows [n, head_dim] of `t` (row stride head_dim), element
/// for element as rkv::decode_key_unit (keys = true: key units of `group` entries for kivi, of one entry otherwise;
/// n a multiple of the unit) or rkv::decode_value_row (keys = false): fp16 scales read exactly, float32 arithmetic
/// without contraction (x' = m + q s, q s, (q - 8) d), rounded to `t` once. src: the head's packed bytes.
/// cudaErrorInvalidValue for head_dim or group < 1.
cudaError_t dequantize_kv(DType t, const CodecLayout& layout, bool keys, const uint8_t* src, int64_t n, void* dst,
                          cudaStream_t stream);

/// The perturbation_kl noise (docs/ARCHITECTURE.md "perturbation_kl"): for every KV head h and prefix position u < prefix with
/// protected_mask[u] == 0, v[h, u] <- perturb_value_row(v[h, u], alpha, seed, draw, example, layer, h, u)
/// (kernels/perturb_row.hpp: v' = v + alpha ||v||_2 eps, eps from Philox4x32-10 + Box-Muller, core/philox.hpp).
/// v_cache: `t` [n_kv_heads, capacity, d], d a multiple of 4 and at most 256.
cudaError_t perturb_values(DType t, void* v_cache, int64_t capacity, int64_t n_kv_heads, int64_t prefix,
                           int head_dim, const uint8_t* protected_mask, double alpha, uint64_t seed, uint32_t draw,
                           uint32_t example, uint32_t layer, cudaStream_t stream);

/// KL(P_r || Q_r) in nats for each row r of two logit matrices (float32 [rows, vocab]), P = softmax(p_logits[r]),
/// Q = softmax(q_logits[r]), in double: sum_v P_v ((lp_v - lse_p) - (lq_v - lse_q)). Identical rows give exactly 0.
/// out: double [rows].
cudaError_t kl_rows(const float* p_logits, const float* q_logits, int64_t rows, int64_t vocab, double* out,
                    cudaStream_t stream);

/// out[i] = offset + scale * u_i, u_i uniform in [-1, 1) from Philox4x32-10 keyed by (seed, i): random weights for
/// benchmarks. out: `t` [count].
cudaError_t fill_uniform(DType t, void* out, int64_t count, float scale, float offset, uint64_t seed,
                         cudaStream_t stream);

}  // namespace rkv::RKV_CUDA_NS::kernels
