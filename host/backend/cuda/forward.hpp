// The decoder forward pass on the GPU, mirroring the CPU backend's forward.hpp function for function (embed ->
// forward_layer x L -> final_logits; prefill and decode_step loop over them), so code written against the CPU
// backend maps one to one. Per layer (T = the model's storage type, fp32 or bf16; x the float32 residual stream):
//   h = RMSNorm(x) * attn_norm                           kernels::rmsnorm            -> T [n, D]
//   qkv = h Wqkv^T                                       cuBLAS                      -> fp32 [n, (H + 2 H_kv) d]
//   (+ bias), RoPE on q and k, k and v appended          kernels::qkv_rope_append    -> q: T [n, H d]; cache: T
//   attention over the cache                             kernels::prefill_attention (n > 1) / decode_attention (n = 1)
//   x += attn Wo^T                                       cuBLAS (beta = 1, float32 output)
//   h = RMSNorm(x) * ffn_norm; gu = h Wgu^T (fp32); act = silu(gate) * up (T); x += act Wd^T
// GEMM outputs that feed element-wise kernels stay float32, so each activation is rounded to T once.
// then logits = RMSNorm(x) * output_norm  W_lm^T in float32.
// Gemma 3 (as the CPU's forward.hpp): x *= sqrt(D) after the embedding (kernels::scale_inplace), per-head RMSNorm of
// q and k in the fp32 qkv (kernels::head_rmsnorm), RoPE with the layer's own base (DeviceModel::layer_inv_freq), the
// model's attention scale, on sliding-window layers the window by cache position inside the attention kernels
// (AttentionShape::window), o_proj and down outputs RMSNorm'ed before their residual adds, GeGLU
// (kernels::gelu_tanh_mul), and the final logit soft-cap (kernels::softcap).
// Everything runs on the Context's one stream; functions return after queuing work unless they return host data.
//
// Thread rules: a DeviceWorkspace and a cache belong to one caller at a time; the model is shared read-only.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/types.hpp"
#include "backend/cuda/device_cache.hpp"
#include "backend/cuda/device_model.hpp"
#include "cache/attention_stats.hpp"

namespace rkv::RKV_CUDA_NS {

using rkv::LogitsFor;  // backend/types.hpp

/// Device scratch buffers reused across calls (grown on demand, never shrunk). One per concurrent caller.
struct DeviceWorkspace {
  explicit DeviceWorkspace(Context& c) : ctx(&c) {}
  Context* ctx;
  DeviceBuffer x;          ///< float32 [n, D]: the residual stream of prefill / decode_step
  DeviceBuffer h, q, attn, act;  ///< T activations of one layer: normed rows, rotated queries, attention, SwiGLU
  DeviceBuffer qkv, gate_up;     ///< float32 GEMM outputs of one layer
  DeviceBuffer lse;        ///< float32 [H, n] (statistics)
  DeviceBuffer mass;       ///< float32 [H, length] per-query-head attention mass (ExtendCapture::attention_mass)
  DeviceBuffer k_new, v_new;  ///< T [H_kv, n, d]: the new rotated keys and values before a per-head layer takes them
  DeviceBuffer decode;     ///< float32 split-K partials of decode attention
  DeviceBuffer tokens;     ///< int32 [n]
  DeviceBuffer positions;  ///< int64 [n]
  DeviceBuffer rows, xn;   ///< float32 [r, D] selected rows; T [r, D] normalised
  DeviceBuffer logits;     ///< float32 [r, V]
  DeviceBuffer post;       ///< float32 [n, D]: a sub-layer's output before its post norm (gemma3)
};

/// Scorer statistics computed on the device during a prefill that starts from an empty cache (so cache index =
/// prompt position), for every layer: window attention sums and cumulative attention sums [H, T] as
/// cache/attention_stats.hpp defines them, over all T prompt queries (the prompt may be processed in chunks).
struct StatsCapture {
  AttentionStatsOptions options;  ///< which statistics; `window` is clamped to T
  int64_t prefix_tokens = 0;      ///< T (set by prefill)
  int64_t n_heads = 0;            ///< H (set by prefill)
  std::vector<DeviceBuffer> window_sums;      ///< per layer float32 [H, T] (when options.window_attention)
  std::vector<DeviceBuffer> cumulative_sums;  ///< per layer float32 [H, T] (when options.cumulative_attention)

  /// Host copy of layer `layer`'s statistics in the CPU form (AttentionStats, query_counts = T - j when asked).
  AttentionStats download(Context& ctx, int64_t layer) const;
};

/// Optional per-layer outputs of forward_layer(). Any member may be null.
struct DeviceLayerHooks {
  std::vector<StatsCapture*> stats;  ///< each adds this chunk's rows to the layer's statistics (see prefill)
  float* attn_output = nullptr;   ///< device float32 [n, D]: receives the attention output after o_proj (gemma3: after post_attention_norm)
  /// Host float32 [G x sum_g head_length(g)] after the append: the attention each entry got from the n new rows, per
  /// query head (layout: rkv::ExtendObservation::attention_mass). Computed from the attention's log-sum-exp by the
  /// statistics kernel (kernels::attention_stats), so the attention then runs the prefill kernel even for one row.
  std::vector<float>* attention_mass = nullptr;
};

/// Uploads `tokens` (checked to lie in [0, V): rkv::InputError naming the index otherwise) and writes their
/// embeddings into ws.x as float32 [n, D]; returns ws.x.
float* embed(const DeviceModel& model, const std::vector<int32_t>& tokens, DeviceWorkspace& ws);

/// Runs block `layer` on the device residual rows x[n, D] (float32, in/out) for tokens at the absolute positions
/// `positions` (a DEVICE int64 array [n]). Appends the n new keys (after RoPE) and values at kv.length (growing the
/// layer when needed; an empty DeviceLayerKV is initialised for the model), then row i attends causally to cache
/// entries [0, kv.length_before + i]. x must not be one of ws's buffers other than ws.x.
/// Throws rkv::InputError for a cache of the wrong geometry or type, or a sliding-window model beyond its window;
/// CudaError when a device call fails.
void forward_layer(const DeviceModel& model, int64_t layer, float* x, int64_t n, const int64_t* positions,
                   DeviceLayerKV& kv, DeviceWorkspace& ws, const DeviceLayerHooks* hooks = nullptr);

/// Block `layer` as a shared layer (Backend::share_layer), as rkv::cpu::forward_shared_layer: its own norms, query
/// projection and RoPE, attention over `source` (another layer's cache that already holds the n new rows' entries at
/// the end of every KV head; one launch per KV head, uniform or per-head layout), its own o_proj and MLP. Its own
/// keys and values are rotated into scratch (ws.k_new, ws.v_new) and never stored. hooks->attn_output is honoured;
/// statistics and attention mass are not computed. rkv::InputError for a layer out of range, a source of the wrong
/// geometry or one without the n new rows.
void forward_shared_layer(const DeviceModel& model, int64_t layer, float* x, int64_t n, const int64_t* positions,
                          const DeviceLayerKV& source, DeviceWorkspace& ws, const DeviceLayerHooks* hooks = nullptr);

/// Logits of the rows `rows` of the device residual stream x[n, D] into ws.logits (device float32 [rows, V]);
/// returns that pointer. Throws rkv::InputError for a row outside [0, n).
float* final_logits_device(const DeviceModel& model, const float* x, int64_t n, const std::vector<int64_t>& rows,
                           DeviceWorkspace& ws);

/// As final_logits_device, copied to the host: float32 [rows.size(), V].
std::vector<float> final_logits(const DeviceModel& model, const float* x, int64_t n, const std::vector<int64_t>& rows,
                                DeviceWorkspace& ws);

/// An empty device cache for `model` with room for `capacity` positions per layer.
DeviceKVCache make_cache(const DeviceModel& model, int64_t capacity);

/// Runs `tokens` at positions start_pos, start_pos + 1, ... through every layer, appending to `cache`, in chunks of
/// `chunk` rows (0: all at once); returns logits float32 [1, V] (Last), [n, V] (All) or nothing (None), as
/// rkv::cpu::prefill. With `stats`, the cache must be empty (start of a prompt): every layer's statistics over the n
/// prompt positions are computed on the way (rkv::InputError otherwise).
std::vector<float> prefill(const DeviceModel& model, const std::vector<int32_t>& tokens, int64_t start_pos,
                           DeviceKVCache& cache, DeviceWorkspace& ws, LogitsFor which = LogitsFor::Last,
                           int64_t chunk = 0, StatsCapture* stats = nullptr);

/// As above with any number of statistics requests computed in the same pass (each from the one log-sum-exp of the
/// attention); an empty list computes none.
std::vector<float> prefill(const DeviceModel& model, const std::vector<int32_t>& tokens, int64_t start_pos,
                           DeviceKVCache& cache, DeviceWorkspace& ws, LogitsFor which, int64_t chunk,
                           const std::vector<StatsCapture*>& stats);

/// Allocates zeroed statistics of `stats.options` for every layer over a prompt of `prefix_tokens` positions (what
/// prefill does before the first chunk; for callers that run forward_layer themselves). rkv::InputError for a window
/// statistic with a window < 1.
void start_stats_capture(const DeviceModel& model, StatsCapture& stats, int64_t prefix_tokens);

/// One decode step: `token` at absolute position `pos` through every layer, appended to the cache; returns its
/// logits float32 [V].
std::vector<float> decode_step(const DeviceModel& model, int32_t token, int64_t pos, DeviceKVCache& cache,
                               DeviceWorkspace& ws);

}  // namespace rkv::RKV_CUDA_NS
