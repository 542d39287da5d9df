#include "backend/cuda/forward.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "backend/cuda/gemm.hpp"
#include "core/errors.hpp"

namespace rkv::RKV_CUDA_NS {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

/// The layout invariants of rkv::check_layer_layout (cache/kv_cache.hpp) for a device layer: per-head vectors of the
/// right sizes, every head within its rows, storage large enough.
bool layout_consistent(const DeviceLayerKV& kv) {
  if (kv.length < 0) return false;
  int64_t rows = kv.n_kv_heads * kv.capacity;
  if (kv.per_head()) {
    if (static_cast<int64_t>(kv.head_lengths.size()) != kv.n_kv_heads ||
        static_cast<int64_t>(kv.head_begin.size()) != kv.n_kv_heads + 1)
      return false;
    for (int64_t h = 0; h < kv.n_kv_heads; ++h)
      if (kv.head_length(h) < 0 || kv.head_length(h) > kv.head_capacity(h) || kv.head_length(h) > kv.length)
        return false;
    rows = kv.head_begin.back();
  } else if (kv.length > kv.capacity) {
    return false;
  }
  const size_t bytes = static_cast<size_t>(rows * kv.head_dim) * kv.elem_bytes();
  return kv.k.bytes() >= bytes && kv.v.bytes() >= bytes;
}

/// Makes sure `kv` can take `extra` more positions, initialising an empty layer for the model (as the CPU's
/// prepare_cache).
void prepare_cache(const DeviceModel& m, int64_t layer, DeviceLayerKV& kv, int64_t extra) {
  const ModelConfig& c = m.config();
  const bool fresh = kv.n_kv_heads == 0 && kv.capacity == 0 && kv.length == 0;
  if (fresh) {
    kv.n_kv_heads = c.n_kv_heads;
    kv.head_dim = c.head_dim;
    kv.dtype = m.dtype();
  }
  if (kv.n_kv_heads != c.n_kv_heads || kv.head_dim != c.head_dim)
    throw InputError("layer " + str(layer) + ": the KV cache has " + str(kv.n_kv_heads) + " KV heads of dimension " +
                     str(kv.head_dim) + ", the model needs " + str(c.n_kv_heads) + " of dimension " + str(c.head_dim));
  if (kv.dtype != m.dtype())
    throw InputError("layer " + str(layer) + ": the KV cache holds " + (kv.dtype == DType::F32 ? "fp32" : "bf16") +
                     " values but the model runs in " + precision_name(m.precision()));
  if (!layout_consistent(kv))
    throw InputError("layer " + str(layer) + ": inconsistent KV cache (length " + str(kv.length) + ", capacity " +
                     str(kv.capacity) + ")");
  if (c.sliding_window > 0 && c.layer_sliding.empty() && kv.length + extra > c.sliding_window)
    throw InputError("the model uses sliding-window attention (window " + str(c.sliding_window) +
                     ") and this context of " + str(kv.length + extra) +
                     " entries exceeds it; sliding-window attention is not implemented");
  reserve_extra(m.context(), kv, extra);
  if (fresh)  // a cache the forward starts also tracks positions
    kv.pos = DeviceBuffer(m.context(), static_cast<size_t>(kv.n_kv_heads * kv.capacity) * sizeof(int32_t));
}

/// The attention geometry of layer `layer` for n_heads query heads over n_kv_heads KV heads: the model's scale and,
/// on a sliding-window layer, the window with the cache's positions `k_pos` (int32, the keys' layout) and the new
/// rows' `positions`. rkv::InputError for a sliding-window layer whose cache stores no positions.
kernels::AttentionShape layer_shape(const DeviceModel& m, int64_t layer, int64_t n_heads, int64_t n_kv_heads,
                                    const DeviceLayerKV& kv, const int32_t* k_pos, const int64_t* positions) {
  const ModelConfig& c = m.config();
  kernels::AttentionShape s{static_cast<int>(n_heads), static_cast<int>(n_kv_heads), static_cast<int>(c.head_dim),
                            c.attention_scale()};
  s.softcap = c.attn_logit_softcap;  // gemma2's score soft-cap (0: none)
  if (c.is_sliding(layer)) {
    if (!kv.has_positions())
      throw InputError("layer " + str(layer) + ": a sliding-window layer needs a KV cache that stores positions");
    s.window = c.sliding_window;
    s.k_pos = k_pos;
    s.q_pos = positions;
  }
  return s;
}

/// Uploads n int64 positions start, start + 1, ... into ws.positions.
const int64_t* upload_positions(Context& ctx, DeviceWorkspace& ws, int64_t start, int64_t n) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = start + i;
  ws.positions.ensure(ctx, p.size() * sizeof(int64_t));
  copy_to_device(ctx, ws.positions.data(), p.data(), p.size() * sizeof(int64_t));
  return ws.positions.as<int64_t>();
}

/// Attention mass of the n rows just attended over one head view (kernels::AttentionShape `shape`: n_heads query
/// heads over n_kv_heads KV heads of `len` entries each, first new row at cache index len - n), from the rows'
/// log-sum-exp `lse` [shape.n_heads, n]: the statistics kernel sums the probabilities per (query head, entry) into a
/// zeroed device buffer [n_heads, len], appended to `out` (query heads in order, as ExtendObservation lays them out).
void append_attention_mass(Context& ctx, DType t, const void* q, int64_t q_ld, int64_t n, const float* lse,
                           const void* k, int64_t capacity, const kernels::AttentionShape& shape, int64_t len,
                           DeviceBuffer& scratch, std::vector<float>& out) {
  const size_t count = static_cast<size_t>(shape.n_heads) * static_cast<size_t>(len);
  scratch.ensure(ctx, count * sizeof(float));
  RKV_CUDA_CHECK(cudaMemsetAsync(scratch.data(), 0, count * sizeof(float), ctx.stream()));
  RKV_CUDA_CHECK(kernels::attention_stats(t, q, q_ld, n, len - n, lse, k, capacity, shape, len, len, nullptr,
                                          scratch.as<float>(), ctx.stream()));
  const std::vector<float> mass = download<float>(ctx, scratch.as<float>(), count);
  out.insert(out.end(), mass.begin(), mass.end());
}

void attend_per_head(const DeviceModel& m, int64_t layer, const DeviceLayerKV& kv, int64_t n, const int64_t* positions,
                     DeviceWorkspace& ws, std::vector<float>* mass);

/// Per-head budgets: rotates the n new rows into scratch [H_kv, n, d] (ws.k_new / ws.v_new), appends each head's rows
/// and positions after its own head_length(g) entries, then attends with one launch per KV head g over its own
/// entries for its G query heads (columns [g G d, (g + 1) G d) of q and out): decode_attention for one row,
/// prefill_attention otherwise. The kernels are the uniform ones, each on a one-KV-head view.
void attention_per_head(const DeviceModel& m, int64_t layer, DeviceLayerKV& kv, int64_t n, const int64_t* positions,
                        DeviceWorkspace& ws, std::vector<float>* mass) {
  const ModelConfig& c = m.config();
  Context& ctx = m.context();
  const DeviceLayerWeights& w = m.layer(layer);
  const DType t = m.dtype();
  const int64_t H = c.n_heads, Hkv = c.n_kv_heads, d = c.head_dim;
  const size_t row = static_cast<size_t>(d) * kernels::dtype_size(t);
  ws.k_new.ensure(ctx, static_cast<size_t>(Hkv * n) * row);
  ws.v_new.ensure(ctx, static_cast<size_t>(Hkv * n) * row);
  RKV_CUDA_CHECK(kernels::qkv_rope_append(t, ws.qkv.as<float>(), n, m.qkv_dim(),
                                          w.bqkv.empty() ? nullptr : w.bqkv.as<float>(), positions, m.layer_inv_freq(layer),
                                          static_cast<int>(H), static_cast<int>(Hkv), static_cast<int>(d), ws.q.data(),
                                          ws.k_new.data(), ws.v_new.data(), n, 0, ctx.stream()));
  for (int64_t g = 0; g < Hkv; ++g) {
    const size_t at = static_cast<size_t>(kv.head_row(g) + kv.head_length(g)), from = static_cast<size_t>(g * n) * row;
    copy_on_device(ctx, kv.k.as<char>() + at * row, ws.k_new.as<char>() + from, static_cast<size_t>(n) * row);
    copy_on_device(ctx, kv.v.as<char>() + at * row, ws.v_new.as<char>() + from, static_cast<size_t>(n) * row);
    if (kv.has_positions())
      RKV_CUDA_CHECK(kernels::store_positions(kv.pos.as<int32_t>() + kv.head_row(g), 0, 1, kv.head_length(g),
                                              positions, n, ctx.stream()));
  }
  kv.length += n;
  for (int64_t& len : kv.head_lengths) len += n;
  attend_per_head(m, layer, kv, n, positions, ws, mass);
}

/// Attention of the n new rows' rotated queries (ws.q) over a per-head layer `kv` that already holds their entries:
/// one launch per KV head g over its own entries for its G query heads (columns [g G d, (g + 1) G d) of q and
/// ws.attn), decode_attention for one row without `mass`, prefill_attention otherwise.
void attend_per_head(const DeviceModel& m, int64_t layer, const DeviceLayerKV& kv, int64_t n, const int64_t* positions,
                     DeviceWorkspace& ws, std::vector<float>* mass) {
  const ModelConfig& c = m.config();
  Context& ctx = m.context();
  const DType t = m.dtype();
  const int64_t H = c.n_heads, Hkv = c.n_kv_heads, G = c.group_size(), d = c.head_dim, Hd = H * d;
  const size_t row = static_cast<size_t>(d) * kernels::dtype_size(t);
  for (int64_t g = 0; g < Hkv; ++g) {
    const kernels::AttentionShape one =
        layer_shape(m, layer, G, 1, kv, kv.has_positions() ? kv.pos.as<int32_t>() + kv.head_row(g) : nullptr, positions);
    const char* q = ws.q.as<char>() + static_cast<size_t>(g * G) * row;
    char* out = ws.attn.as<char>() + static_cast<size_t>(g * G) * row;
    const char* k = kv.k.as<char>() + static_cast<size_t>(kv.head_row(g)) * row;
    const char* v = kv.v.as<char>() + static_cast<size_t>(kv.head_row(g)) * row;
    const int64_t len = kv.head_length(g);
    if (n == 1 && !mass) {
      const int splits = kernels::decode_attention_splits(len, 1, ctx.sm_count());
      ws.decode.ensure(ctx, kernels::decode_attention_workspace_floats(splits, one) * sizeof(float));
      RKV_CUDA_CHECK(kernels::decode_attention(t, q, k, v, kv.head_capacity(g), len, one, splits,
                                               ws.decode.as<float>(), out, ctx.stream()));
      continue;
    }
    float* lse = nullptr;
    if (mass) {
      ws.lse.ensure(ctx, static_cast<size_t>(G * n) * sizeof(float));
      lse = ws.lse.as<float>();
    }
    RKV_CUDA_CHECK(kernels::prefill_attention(t, q, Hd, n, k, v, kv.head_capacity(g), len - n, one, out, Hd, lse,
                                              ctx.stream()));
    if (mass) append_attention_mass(ctx, t, q, Hd, n, lse, k, kv.head_capacity(g), one, len, ws.mass, *mass);
  }
}

/// Rotates and appends the n new rows to a uniform layer and runs the attention (decode_attention for one row
/// without statistics, prefill_attention otherwise), then every requested statistic from its log-sum-exp.
void attention_uniform(const DeviceModel& model, int64_t layer, DeviceLayerKV& kv, int64_t n, const int64_t* positions,
                       DeviceWorkspace& ws, const std::vector<StatsCapture*>& captures, std::vector<float>* mass) {
  const ModelConfig& c = model.config();
  Context& ctx = model.context();
  cudaStream_t s = ctx.stream();
  const DType t = model.dtype();
  const DeviceLayerWeights& w = model.layer(layer);
  const int64_t H = c.n_heads, Hkv = c.n_kv_heads, d = c.head_dim, QKV = model.qkv_dim(), Hd = H * d;
  const kernels::AttentionShape shape =
      layer_shape(model, layer, H, Hkv, kv, kv.has_positions() ? kv.pos.as<int32_t>() : nullptr, positions);
  const bool stats = !captures.empty() || mass;
  const int64_t first = kv.length;
  RKV_CUDA_CHECK(kernels::qkv_rope_append(t, ws.qkv.as<float>(), n, QKV,
                                          w.bqkv.empty() ? nullptr : w.bqkv.as<float>(), positions,
                                          model.layer_inv_freq(layer), static_cast<int>(H), static_cast<int>(Hkv),
                                          static_cast<int>(d), ws.q.data(), kv.k.data(), kv.v.data(), kv.capacity,
                                          first, s));
  if (kv.has_positions())
    RKV_CUDA_CHECK(kernels::store_positions(kv.pos.as<int32_t>(), kv.capacity, static_cast<int>(Hkv), first, positions,
                                            n, s));
  kv.length = first + n;
  if (n == 1 && !stats) {
    const int splits = kernels::decode_attention_splits(kv.length, static_cast<int>(Hkv), ctx.sm_count());
    ws.decode.ensure(ctx, kernels::decode_attention_workspace_floats(splits, shape) * sizeof(float));
    RKV_CUDA_CHECK(kernels::decode_attention(t, ws.q.data(), kv.k.data(), kv.v.data(), kv.capacity, kv.length, shape,
                                             splits, ws.decode.as<float>(), ws.attn.data(), s));
  } else {
    float* lse = nullptr;
    if (stats) {
      ws.lse.ensure(ctx, static_cast<size_t>(H * n) * sizeof(float));
      lse = ws.lse.as<float>();
    }
    RKV_CUDA_CHECK(kernels::prefill_attention(t, ws.q.data(), Hd, n, kv.k.data(), kv.v.data(), kv.capacity, first,
                                              shape, ws.attn.data(), Hd, lse, s));
    for (StatsCapture* cap : captures) {  // every requested statistic reuses this pass's log-sum-exp
      if (!cap->options.window_attention && !cap->options.cumulative_attention) continue;  // query moments: the host's
      const int64_t T = cap->prefix_tokens;
      if (first + n > T)
        throw InputError("attention statistics: rows up to cache index " + str(first + n) + " exceed the prompt of " +
                         str(T) + " positions");
      const int64_t w_eff = cap->options.window_attention ? std::min(cap->options.window, T) : 0;
      float* win = cap->options.window_attention ? cap->window_sums[static_cast<size_t>(layer)].as<float>() : nullptr;
      float* cum =
          cap->options.cumulative_attention ? cap->cumulative_sums[static_cast<size_t>(layer)].as<float>() : nullptr;
      RKV_CUDA_CHECK(kernels::attention_stats(t, ws.q.data(), Hd, n, first, lse, kv.k.data(), kv.capacity, shape, T,
                                              T - w_eff, win, cum, s));
    }
    if (mass)
      append_attention_mass(ctx, t, ws.q.data(), Hd, n, lse, kv.k.data(), kv.capacity, shape, kv.length, ws.mass,
                            *mass);
  }
}

}  // namespace

AttentionStats StatsCapture::download(Context& ctx, int64_t layer) const {
  AttentionStats s;
  s.n_heads = n_heads;
  s.prefix_tokens = prefix_tokens;
  s.window = options.window_attention ? std::min(options.window, prefix_tokens) : 0;
  const size_t ht = static_cast<size_t>(n_heads * prefix_tokens);
  if (options.window_attention)
    s.window_attention = rkv::RKV_CUDA_NS::download<float>(ctx, window_sums[static_cast<size_t>(layer)].data(), ht);
  if (options.cumulative_attention)
    s.cumulative_attention =
        rkv::RKV_CUDA_NS::download<float>(ctx, cumulative_sums[static_cast<size_t>(layer)].data(), ht);
  if (options.query_counts) {
    s.query_counts.resize(static_cast<size_t>(prefix_tokens));
    for (int64_t j = 0; j < prefix_tokens; ++j) s.query_counts[static_cast<size_t>(j)] = static_cast<float>(prefix_tokens - j);
  }
  return s;
}

namespace {

/// A float32 scratch of `count` values for a sub-layer's output before its post norm (gemma3): ws.post.
float* post_norm_rows(Context& ctx, DeviceWorkspace& ws, int64_t count) {
  ws.post.ensure(ctx, static_cast<size_t>(count) * sizeof(float));
  return ws.post.as<float>();
}

}  // namespace

float* embed(const DeviceModel& model, const std::vector<int32_t>& tokens, DeviceWorkspace& ws) {
  Context& ctx = model.context();
  const int64_t D = model.config().d_model, V = model.config().vocab_size;
  for (size_t t = 0; t < tokens.size(); ++t)
    if (tokens[t] < 0 || tokens[t] >= V)
      throw InputError("token id " + std::to_string(tokens[t]) + " at index " + std::to_string(t) +
                       " is outside the vocabulary [0, " + str(V) + ")");
  const int64_t n = static_cast<int64_t>(tokens.size());
  ws.tokens.ensure(ctx, tokens.size() * sizeof(int32_t));
  copy_to_device(ctx, ws.tokens.data(), tokens.data(), tokens.size() * sizeof(int32_t));
  ws.x.ensure(ctx, static_cast<size_t>(n * D) * sizeof(float));
  RKV_CUDA_CHECK(kernels::embed(model.dtype(), model.tok_embd(), ws.tokens.as<int32_t>(), n, D, ws.x.as<float>(),
                                ctx.stream()));
  if (model.config().embed_scale != 1.0f)  // gemma: x = embedding * sqrt(D)
    RKV_CUDA_CHECK(kernels::scale_inplace(ws.x.as<float>(), model.config().embed_scale, n * D, ctx.stream()));
  return ws.x.as<float>();
}

namespace {

/// A sublayer's input h [n, D] of type t: RMSNorm(x) * w, or x converted to t where the model has no pre-norms
/// (olmo2: `w` empty).
void pre_norm_rows(const ModelConfig& c, const DeviceBuffer& w, const float* x, int64_t n, DType t, void* h,
                   cudaStream_t stream) {
  if (w.empty()) {
    RKV_CUDA_CHECK(kernels::to_dtype(x, n * c.d_model, t, h, stream));
  } else {
    RKV_CUDA_CHECK(kernels::rmsnorm(x, w.as<float>(), c.rms_eps, n, c.d_model, t, h, stream));
  }
}

/// The first steps of block `layer` on x[n, D]: h = RMSNorm(x) * attn_norm into ws.h, qkv = h Wqkv^T (float32) into
/// ws.qkv, and the RMSNorm of q and k (per head: qwen3, gemma3; whole rows: olmo2); sizes ws.q and ws.attn for the
/// attention. Without pre-norms (olmo2) h = x.
void project_qkv(const DeviceModel& model, int64_t layer, const float* x, int64_t n, DeviceWorkspace& ws) {
  const ModelConfig& c = model.config();
  Context& ctx = model.context();
  const DeviceLayerWeights& w = model.layer(layer);
  const DType t = model.dtype();
  const size_t es = kernels::dtype_size(t);
  const int64_t D = c.d_model, H = c.n_heads, Hkv = c.n_kv_heads, d = c.head_dim, QKV = model.qkv_dim();
  ws.h.ensure(ctx, static_cast<size_t>(n * D) * es);
  ws.qkv.ensure(ctx, static_cast<size_t>(n * QKV) * sizeof(float));
  ws.q.ensure(ctx, static_cast<size_t>(n * H * d) * es);
  ws.attn.ensure(ctx, static_cast<size_t>(n * H * d) * es);
  pre_norm_rows(c, w.attn_norm, x, n, t, ws.h.data(), ctx.stream());
  linear(ctx, n, D, QKV, w.wqkv.data(), t, ws.h.data(), t, ws.qkv.data(), DType::F32);
  float* qkv = ws.qkv.as<float>();
  if (c.qk_norm == QkNorm::per_head) {  // qwen3, gemma3: RMSNorm of each query and key head, before RoPE
    RKV_CUDA_CHECK(kernels::head_rmsnorm(qkv, n, QKV, static_cast<int>(H), static_cast<int>(Hkv), static_cast<int>(d),
                                         w.q_norm.as<float>(), w.k_norm.as<float>(), c.rms_eps, ctx.stream()));
  } else if (c.qk_norm == QkNorm::whole) {  // olmo2: RMSNorm of the whole query row and the whole key row
    RKV_CUDA_CHECK(kernels::head_rmsnorm(qkv, n, QKV, 1, 0, static_cast<int>(H * d), w.q_norm.as<float>(),
                                         w.q_norm.as<float>(), c.rms_eps, ctx.stream()));
    RKV_CUDA_CHECK(kernels::head_rmsnorm(qkv + H * d, n, QKV, 1, 0, static_cast<int>(Hkv * d), w.k_norm.as<float>(),
                                         w.k_norm.as<float>(), c.rms_eps, ctx.stream()));
  }
}

/// The rest of block `layer` once ws.attn holds its attention [n, H d]: x += [RMSNorm](attn Wo^T), then the gated
/// MLP (SwiGLU, or GeGLU for gemma): x += [RMSNorm]((act(h Wg^T) * (h Wu^T)) Wd^T), h = RMSNorm(x) * ffn_norm.
void finish_layer(const DeviceModel& model, int64_t layer, float* x, int64_t n, DeviceWorkspace& ws,
                  const DeviceLayerHooks* hooks) {
  const ModelConfig& c = model.config();
  Context& ctx = model.context();
  cudaStream_t s = ctx.stream();
  const DeviceLayerWeights& w = model.layer(layer);
  const DType t = model.dtype();
  const size_t es = kernels::dtype_size(t);
  const int64_t D = c.d_model, Hd = c.n_heads * c.head_dim, F = c.d_ff;
  if ((hooks && hooks->attn_output) || !w.post_attn_norm.empty()) {
    float* o = hooks && hooks->attn_output ? hooks->attn_output : post_norm_rows(ctx, ws, n * D);
    linear(ctx, n, Hd, D, w.wo.data(), t, ws.attn.data(), t, o, DType::F32);
    if (!w.post_attn_norm.empty())  // gemma3: RMSNorm of the attention output before the residual add (in place)
      RKV_CUDA_CHECK(kernels::rmsnorm(o, w.post_attn_norm.as<float>(), c.rms_eps, n, D, DType::F32, o, s));
    RKV_CUDA_CHECK(kernels::add_inplace(x, o, n * D, s));
  } else {
    linear(ctx, n, Hd, D, w.wo.data(), t, ws.attn.data(), t, x, DType::F32, 1.0f);  // x += attn Wo^T
  }

  // ---- gated MLP: SwiGLU, or GeGLU (gemma) ----
  ws.gate_up.ensure(ctx, static_cast<size_t>(n * 2 * F) * sizeof(float));
  ws.act.ensure(ctx, static_cast<size_t>(n * F) * es);
  pre_norm_rows(c, w.ffn_norm, x, n, t, ws.h.data(), s);
  linear(ctx, n, D, 2 * F, w.w_gate_up.data(), t, ws.h.data(), t, ws.gate_up.data(), DType::F32);
  if (c.ffn_act == FfnActivation::gelu_tanh) {
    RKV_CUDA_CHECK(kernels::gelu_tanh_mul(t, ws.gate_up.as<float>(), n, F, ws.act.data(), s));
  } else {
    RKV_CUDA_CHECK(kernels::silu_mul(t, ws.gate_up.as<float>(), n, F, ws.act.data(), s));
  }
  if (w.post_ffn_norm.empty()) {
    linear(ctx, n, F, D, w.w_down.data(), t, ws.act.data(), t, x, DType::F32, 1.0f);  // x += act Wd^T
    return;
  }
  float* o = post_norm_rows(ctx, ws, n * D);
  linear(ctx, n, F, D, w.w_down.data(), t, ws.act.data(), t, o, DType::F32);
  RKV_CUDA_CHECK(kernels::rmsnorm(o, w.post_ffn_norm.as<float>(), c.rms_eps, n, D, DType::F32, o, s));
  RKV_CUDA_CHECK(kernels::add_inplace(x, o, n * D, s));
}

}  // namespace

void forward_layer(const DeviceModel& model, int64_t layer, float* x, int64_t n, const int64_t* positions,
                   DeviceLayerKV& kv, DeviceWorkspace& ws, const DeviceLayerHooks* hooks) {
  const ModelConfig& c = model.config();
  if (layer < 0 || layer >= c.n_layers) throw InputError("layer index " + str(layer) + " out of range");
  if (n <= 0) return;
  prepare_cache(model, layer, kv, n);
  static const std::vector<StatsCapture*> kNoStats;
  const std::vector<StatsCapture*>& captures = hooks ? hooks->stats : kNoStats;
  project_qkv(model, layer, x, n, ws);
  if (hooks && hooks->attention_mass) hooks->attention_mass->clear();
  if (kv.per_head()) {
    if (!captures.empty())
      throw InputError("layer " + str(layer) + ": attention statistics need a uniform cache (a prefill)");
    attention_per_head(model, layer, kv, n, positions, ws, hooks ? hooks->attention_mass : nullptr);
  } else {
    attention_uniform(model, layer, kv, n, positions, ws, captures, hooks ? hooks->attention_mass : nullptr);
  }
  finish_layer(model, layer, x, n, ws, hooks);
}

void forward_shared_layer(const DeviceModel& model, int64_t layer, float* x, int64_t n, const int64_t* positions,
                          const DeviceLayerKV& source, DeviceWorkspace& ws, const DeviceLayerHooks* hooks) {
  const ModelConfig& c = model.config();
  if (layer < 0 || layer >= c.n_layers) throw InputError("layer index " + str(layer) + " out of range");
  if (n <= 0) return;
  if (source.n_kv_heads != c.n_kv_heads || source.head_dim != c.head_dim)
    throw InputError("layer " + str(layer) + ": the shared source cache has " + str(source.n_kv_heads) +
                     " KV heads of dimension " + str(source.head_dim));
  for (int64_t g = 0; g < source.n_kv_heads; ++g)
    if (source.head_length(g) < n)
      throw InputError("layer " + str(layer) + ": the shared source cache does not hold the " + str(n) +
                       " new rows (run the source layer first)");
  Context& ctx = model.context();
  const DeviceLayerWeights& w = model.layer(layer);
  const DType t = model.dtype();
  const int64_t Hkv = c.n_kv_heads, d = c.head_dim;
  const size_t row = static_cast<size_t>(d) * kernels::dtype_size(t);
  project_qkv(model, layer, x, n, ws);
  // The kernel rotates q and k together; the layer's own k and v go to scratch and are never stored.
  ws.k_new.ensure(ctx, static_cast<size_t>(Hkv * n) * row);
  ws.v_new.ensure(ctx, static_cast<size_t>(Hkv * n) * row);
  RKV_CUDA_CHECK(kernels::qkv_rope_append(t, ws.qkv.as<float>(), n, model.qkv_dim(),
                                          w.bqkv.empty() ? nullptr : w.bqkv.as<float>(), positions,
                                          model.layer_inv_freq(layer), static_cast<int>(c.n_heads),
                                          static_cast<int>(Hkv), static_cast<int>(d), ws.q.data(), ws.k_new.data(),
                                          ws.v_new.data(), n, 0, ctx.stream()));
  attend_per_head(model, layer, source, n, positions, ws, nullptr);
  finish_layer(model, layer, x, n, ws, hooks);
}

float* final_logits_device(const DeviceModel& model, const float* x, int64_t n, const std::vector<int64_t>& rows,
                           DeviceWorkspace& ws) {
  Context& ctx = model.context();
  const ModelConfig& c = model.config();
  const int64_t D = c.d_model, V = c.vocab_size, r = static_cast<int64_t>(rows.size());
  const DType t = model.dtype();
  ws.rows.ensure(ctx, static_cast<size_t>(r * D) * sizeof(float));
  ws.xn.ensure(ctx, static_cast<size_t>(r * D) * kernels::dtype_size(t));
  ws.logits.ensure(ctx, static_cast<size_t>(r * V) * sizeof(float));
  for (int64_t k = 0; k < r;) {
    const int64_t row = rows[static_cast<size_t>(k)];
    if (row < 0 || row >= n) throw InputError("final_logits: row " + str(row) + " outside [0, " + str(n) + ")");
    int64_t run = 1;  // copy runs of consecutive rows at once
    while (k + run < r && rows[static_cast<size_t>(k + run)] == row + run) ++run;
    if (row + run > n) throw InputError("final_logits: row " + str(row + run - 1) + " outside [0, " + str(n) + ")");
    copy_on_device(ctx, ws.rows.as<float>() + k * D, x + row * D, static_cast<size_t>(run * D) * sizeof(float));
    k += run;
  }
  if (r == 0) return ws.logits.as<float>();
  RKV_CUDA_CHECK(kernels::rmsnorm(ws.rows.as<float>(), model.output_norm(), c.rms_eps, r, D, t, ws.xn.data(),
                                  ctx.stream()));
  linear(ctx, r, D, V, model.lm_head(), t, ws.xn.data(), t, ws.logits.data(), DType::F32);
  if (c.final_logit_softcap > 0.0f)
    RKV_CUDA_CHECK(kernels::softcap(ws.logits.as<float>(), c.final_logit_softcap, r * V, ctx.stream()));
  return ws.logits.as<float>();
}

std::vector<float> final_logits(const DeviceModel& model, const float* x, int64_t n, const std::vector<int64_t>& rows,
                                DeviceWorkspace& ws) {
  const float* d = final_logits_device(model, x, n, rows, ws);
  return download<float>(model.context(), d, rows.size() * static_cast<size_t>(model.config().vocab_size));
}

DeviceKVCache make_cache(const DeviceModel& model, int64_t capacity) {
  const ModelConfig& c = model.config();
  return build_device_cache(model.context(), c.n_layers, c.n_kv_heads, c.head_dim, capacity, model.dtype());
}

void start_stats_capture(const DeviceModel& model, StatsCapture& stats, int64_t prefix_tokens) {
  const ModelConfig& c = model.config();
  Context& ctx = model.context();
  if (stats.options.window_attention && stats.options.window < 1)
    throw InputError("attention statistics: window attention needs a window >= 1, got " + str(stats.options.window));
  stats.prefix_tokens = prefix_tokens;
  stats.n_heads = c.n_heads;
  const size_t bytes = static_cast<size_t>(c.n_heads * prefix_tokens) * sizeof(float);
  stats.window_sums.clear();
  stats.cumulative_sums.clear();
  for (int64_t l = 0; l < c.n_layers; ++l) {
    if (stats.options.window_attention) {
      stats.window_sums.emplace_back(ctx, bytes);
      RKV_CUDA_CHECK(cudaMemsetAsync(stats.window_sums.back().data(), 0, bytes, ctx.stream()));
    }
    if (stats.options.cumulative_attention) {
      stats.cumulative_sums.emplace_back(ctx, bytes);
      RKV_CUDA_CHECK(cudaMemsetAsync(stats.cumulative_sums.back().data(), 0, bytes, ctx.stream()));
    }
  }
}

std::vector<float> prefill(const DeviceModel& model, const std::vector<int32_t>& tokens, int64_t start_pos,
                           DeviceKVCache& cache, DeviceWorkspace& ws, LogitsFor which, int64_t chunk,
                           StatsCapture* stats) {
  std::vector<StatsCapture*> captures;
  if (stats) captures.push_back(stats);
  return prefill(model, tokens, start_pos, cache, ws, which, chunk, captures);
}

std::vector<float> prefill(const DeviceModel& model, const std::vector<int32_t>& tokens, int64_t start_pos,
                           DeviceKVCache& cache, DeviceWorkspace& ws, LogitsFor which, int64_t chunk,
                           const std::vector<StatsCapture*>& stats) {
  const ModelConfig& c = model.config();
  Context& ctx = model.context();
  if (static_cast<int64_t>(cache.layers.size()) != c.n_layers) {
    if (!cache.layers.empty())
      throw InputError("prefill: the cache has " + std::to_string(cache.layers.size()) + " layers, the model " +
                       str(c.n_layers));
    cache.layers.resize(static_cast<size_t>(c.n_layers));
  }
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return {};
  if (start_pos < 0 || start_pos > INT32_MAX - n)
    throw InputError("prefill: positions " + str(start_pos) + " .. " + str(start_pos + n - 1) +
                     " are outside [0, 2^31) (the cache stores positions as int32)");
  if (chunk <= 0) chunk = n;
  DeviceLayerHooks hooks;
  if (!stats.empty()) {
    for (const auto& l : cache.layers)
      if (l.length != 0)
        throw InputError("prefill: attention statistics need an empty cache (the prompt starts at cache index 0)");
    for (StatsCapture* cap : stats) start_stats_capture(model, *cap, n);
    hooks.stats = stats;
  }
  std::vector<float> logits;
  if (which == LogitsFor::All) logits.reserve(static_cast<size_t>(n * c.vocab_size));
  for (int64_t s0 = 0; s0 < n; s0 += chunk) {
    const int64_t e = std::min(n, s0 + chunk), m = e - s0;
    float* x = embed(model, std::vector<int32_t>(tokens.begin() + s0, tokens.begin() + e), ws);
    const int64_t* pos = upload_positions(ctx, ws, start_pos + s0, m);
    for (int64_t l = 0; l < c.n_layers; ++l)
      forward_layer(model, l, x, m, pos, cache.layers[static_cast<size_t>(l)], ws, stats.empty() ? nullptr : &hooks);
    if (which == LogitsFor::All) {
      std::vector<int64_t> rows(static_cast<size_t>(m));
      for (int64_t i = 0; i < m; ++i) rows[static_cast<size_t>(i)] = i;
      const std::vector<float> part = final_logits(model, x, m, rows, ws);
      logits.insert(logits.end(), part.begin(), part.end());
    } else if (which == LogitsFor::Last && e == n) {
      logits = final_logits(model, x, m, {m - 1}, ws);
    }
  }
  if (which == LogitsFor::None) ctx.synchronize();  // report asynchronous failures here
  return logits;
}

std::vector<float> decode_step(const DeviceModel& model, int32_t token, int64_t pos, DeviceKVCache& cache,
                               DeviceWorkspace& ws) {
  return prefill(model, {token}, pos, cache, ws, LogitsFor::Last);
}

}  // namespace rkv::RKV_CUDA_NS
