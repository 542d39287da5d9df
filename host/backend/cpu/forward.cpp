#include "backend/cpu/forward.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend/cpu/attention.hpp"
#include "backend/cpu/ops.hpp"
#include "backend/cpu/threads.hpp"
#include "core/errors.hpp"

namespace rkv::cpu {

namespace {

template <typename T>
T* grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

/// Makes sure `kv` can take `extra` more positions, initialising an empty LayerKV for the model's geometry. `older`:
/// the entries held before kv's (a packed prefix), counted against a model-wide sliding window.
void prepare_cache(const ModelConfig& c, int64_t layer, LayerKV& kv, int64_t extra, int64_t older = 0) {
  if (kv.n_kv_heads == 0 && kv.capacity == 0 && kv.length == 0) {
    kv.n_kv_heads = c.n_kv_heads;
    kv.head_dim = c.head_dim;
  }
  if (kv.n_kv_heads != c.n_kv_heads || kv.head_dim != c.head_dim) {
    throw InputError("layer " + std::to_string(layer) + ": the KV cache has " + std::to_string(kv.n_kv_heads) +
                     " KV heads of dimension " + std::to_string(kv.head_dim) + ", the model needs " +
                     std::to_string(c.n_kv_heads) + " of dimension " + std::to_string(c.head_dim));
  }
  check_layer_layout(kv, layer);
  if (c.sliding_window > 0 && c.layer_sliding.empty() && older + kv.length + extra > c.sliding_window) {
    throw InputError("the model uses sliding-window attention (window " + std::to_string(c.sliding_window) +
                     ") and this context of " + std::to_string(older + kv.length + extra) +
                     " entries exceeds it; this backend computes full attention only (no sliding window)");
  }
  if (kv.length == 0 && !kv.per_head() && kv.length + extra > kv.capacity) {
    // Nothing to keep: allocate directly (a cache the forward starts also tracks positions).
    kv.k.assign(static_cast<size_t>(kv.n_kv_heads * extra * kv.head_dim), 0.0f);
    kv.v.assign(kv.k.size(), 0.0f);
    kv.pos.assign(static_cast<size_t>(kv.n_kv_heads * extra), 0);
    kv.capacity = extra;
    return;
  }
  reserve_extra(kv, extra);
}

}  // namespace

std::vector<float> embed(const Model& model, const std::vector<int32_t>& tokens) {
  const int64_t D = model.config.d_model;
  const float scale = model.config.embed_scale;
  check_token_ids(tokens, model.config.vocab_size);
  std::vector<float> x(tokens.size() * static_cast<size_t>(D));
  const WeightRef E = weight_ref(model.tok_embd, model.tok_embd_q, model.config.vocab_size, D);
  for (size_t t = 0; t < tokens.size(); ++t) weight_row(E, tokens[t], x.data() + t * D);
  if (scale != 1.0f)
    for (float& e : x) e *= scale;  // gemma: x = embedding * sqrt(D)
  return x;
}

namespace {

/// The RoPE cos/sin tables of `layer` for these positions: Workspace slot 0 (global layers) or 1 (sliding-window
/// layers), recomputed only when the positions or the frequencies changed (so consecutive layers share them).
const Workspace::Rope& rope_for(const Model& model, int64_t layer, const int64_t* positions, int64_t n, Workspace& ws) {
  const std::vector<double>& inv_freq = model.layer_inv_freq(layer);
  Workspace::Rope& r = ws.rope[model.config.is_sliding(layer) ? 1 : 0];
  if (r.inv_freq != inv_freq || r.positions.size() != static_cast<size_t>(n) ||
      !std::equal(positions, positions + n, r.positions.begin())) {
    rope_tables(inv_freq, positions, n, r.cos, r.sin);
    r.positions.assign(positions, positions + n);
    r.inv_freq = inv_freq;
  }
  return r;
}

/// q, k, v of the n rows h[n, D] into ws.q [n, H*d], ws.k, ws.v [n, H_kv*d]: projections (+ biases), per-head
/// RMSNorm of q and k (per head: qwen3, gemma3; whole rows: olmo2), RoPE at `positions`, then the queries regrouped per KV head into ws.qg
/// [H_kv, n, G, d] and the keys, values and positions appended to every KV head of kv (which has room for them).
/// With kv null (a shared layer, which reads another layer's cache) only the queries are computed.
void project_qkv(const Model& model, int64_t layer, const float* h, int64_t n, const int64_t* positions, LayerKV* kv,
                 Workspace& ws) {
  const ModelConfig& c = model.config;
  const LayerWeights& w = model.layers[static_cast<size_t>(layer)];
  const int64_t D = c.d_model, H = c.n_heads, Hkv = c.n_kv_heads, d = c.head_dim, G = c.group_size();
  const int64_t half = d / 2;
  float* q = grow(ws.q, static_cast<size_t>(n * H * d));
  float* k = grow(ws.k, static_cast<size_t>(n * Hkv * d));
  float* v = grow(ws.v, static_cast<size_t>(n * Hkv * d));
  if (kv) {
    weight_linear_group(h, n,
                        {{weight_ref(w.wq, w.quant.wq, H * d, D), q},
                         {weight_ref(w.wk, w.quant.wk, Hkv * d, D), k},
                         {weight_ref(w.wv, w.quant.wv, Hkv * d, D), v}},
                        ws.quant);
  } else {
    weight_linear(h, n, weight_ref(w.wq, w.quant.wq, H * d, D), q, ws.quant);
  }
  const Workspace::Rope& rope = rope_for(model, layer, positions, n, ws);
  const float* cs = rope.cos.data();
  const float* sn = rope.sin.data();
  float* qg = grow(ws.qg, static_cast<size_t>(n * H * d));
  parallel_for(n, 16, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) {
      float* qi = q + i * H * d;
      float* ki = k + i * Hkv * d;
      float* vi = v + i * Hkv * d;
      if (!w.bq.empty()) add_bias(qi, w.bq.data(), H * d);
      if (c.qk_norm == QkNorm::per_head)  // qwen3, gemma3: RMSNorm of each head's query (and key, below)
        for (int64_t hh = 0; hh < H; ++hh) rmsnorm_row(qi + hh * d, w.q_norm.data(), c.rms_eps, d, qi + hh * d);
      else if (c.qk_norm == QkNorm::whole)  // olmo2: RMSNorm of the whole query row (and key row, below)
        rmsnorm_row(qi, w.q_norm.data(), c.rms_eps, H * d, qi);
      for (int64_t hh = 0; hh < H; ++hh) rope_rotate_half(qi + hh * d, half, cs + i * half, sn + i * half);
      // Queries regrouped per KV head: qg[g][i][j] = q[i][g*G + j].
      for (int64_t g = 0; g < Hkv; ++g) {
        std::memcpy(qg + ((g * n + i) * G) * d, qi + g * G * d, static_cast<size_t>(G * d) * sizeof(float));
      }
      if (!kv) continue;
      if (!w.bk.empty()) {
        add_bias(ki, w.bk.data(), Hkv * d);
        add_bias(vi, w.bv.data(), Hkv * d);
      }
      if (c.qk_norm == QkNorm::per_head)
        for (int64_t g = 0; g < Hkv; ++g) rmsnorm_row(ki + g * d, w.k_norm.data(), c.rms_eps, d, ki + g * d);
      else if (c.qk_norm == QkNorm::whole)
        rmsnorm_row(ki, w.k_norm.data(), c.rms_eps, Hkv * d, ki);
      for (int64_t g = 0; g < Hkv; ++g) rope_rotate_half(ki + g * d, half, cs + i * half, sn + i * half);
      // Append key, value and position of row i at cache index head_length(g) + i of every KV head g.
      for (int64_t g = 0; g < Hkv; ++g) {
        const int64_t at = kv->head_length(g) + i;
        std::memcpy(kv->k_at(g, at), ki + g * d, static_cast<size_t>(d) * sizeof(float));
        std::memcpy(kv->v_at(g, at), vi + g * d, static_cast<size_t>(d) * sizeof(float));
        if (kv->has_positions()) *kv->pos_at(g, at) = static_cast<int32_t>(positions[i]);
      }
    }
  });
  if (!kv) return;
  kv->length += n;
  for (int64_t& len : kv->head_lengths) len += n;
}

/// The input of a sublayer in ws.h [n, D]: RMSNorm(x) * w row by row, or x itself when the model has no pre-norms
/// (olmo2: `w` empty).
float* pre_norm_rows(const ModelConfig& c, const std::vector<float>& w, const float* x, int64_t n, Workspace& ws) {
  const int64_t D = c.d_model;
  float* h = grow(ws.h, static_cast<size_t>(n * D));
  if (w.empty()) {
    std::memcpy(h, x, static_cast<size_t>(n * D) * sizeof(float));
    return h;
  }
  parallel_for(n, 16, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) rmsnorm_row(x + i * D, w.data(), c.rms_eps, D, h + i * D);
  });
  return h;
}

/// RMSNorm of every row of y[n, D] in place with weight `w` [D] (gemma3's and olmo2's post-attention / post-MLP norms).
void rmsnorm_rows(const ModelConfig& c, const std::vector<float>& w, float* y, int64_t n) {
  parallel_for(n, 16, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) rmsnorm_row(y + i * c.d_model, w.data(), c.rms_eps, c.d_model, y + i * c.d_model);
  });
}

/// The attention half of block `layer` on the residual rows x[n, D] (in/out): x += [RMSNorm](attn(RMSNorm(x)) Wo^T).
/// The new rows' keys and values are appended to `own` (null for a shared layer), and the attention reads `kv` (the
/// same layer as `own`, or the source layer of a shared one, which already holds the new rows' entries).
void attention_sublayer(const Model& model, int64_t layer, float* x, int64_t n, const int64_t* positions, LayerKV* own,
                        const AttendedKV& kv, Workspace& ws, const LayerHooks* hooks) {
  const ModelConfig& c = model.config;
  const LayerWeights& w = model.layers[static_cast<size_t>(layer)];
  const int64_t D = c.d_model, H = c.n_heads, d = c.head_dim;
  float* h = pre_norm_rows(c, w.attn_norm, x, n, ws);
  project_qkv(model, layer, h, n, positions, own, ws);
  if (hooks && hooks->on_queries) {
    std::vector<float> qh(static_cast<size_t>(H * n * d));
    for (int64_t hh = 0; hh < H; ++hh) {
      for (int64_t i = 0; i < n; ++i) {
        std::memcpy(qh.data() + (hh * n + i) * d, ws.q.data() + i * H * d + hh * d, static_cast<size_t>(d) * sizeof(float));
      }
    }
    hooks->on_queries(qh.data(), H, n, d);
  }
  float* attn = grow(ws.attn, static_cast<size_t>(n * H * d));
  attention(c, ws.qg.data(), n, kv, window_starts(c, layer, kv, positions, n), attn, ws, hooks);
  if ((hooks && hooks->on_attn_output) || !w.post_attn_norm.empty()) {
    float* o = grow(ws.h, static_cast<size_t>(n * D));  // h is free again
    weight_linear(attn, n, weight_ref(w.wo, w.quant.wo, D, H * d), o, ws.quant);
    if (!w.post_attn_norm.empty()) rmsnorm_rows(c, w.post_attn_norm, o, n);
    if (hooks && hooks->on_attn_output) hooks->on_attn_output(o, n, D);
    for (int64_t i = 0; i < n * D; ++i) x[i] += o[i];
  } else {
    weight_linear(attn, n, weight_ref(w.wo, w.quant.wo, D, H * d), x, ws.quant, 1.0f);  // x += attn Wo^T
  }
}

/// The gated MLP half of block `layer` on x[n, D] (in/out): x += [RMSNorm]((act(h Wg^T) * (h Wu^T)) Wd^T),
/// h = RMSNorm(x) * ffn_norm; act = silu (SwiGLU) or gelu_tanh (gemma).
void mlp_sublayer(const Model& model, int64_t layer, float* x, int64_t n, Workspace& ws) {
  const ModelConfig& c = model.config;
  const LayerWeights& w = model.layers[static_cast<size_t>(layer)];
  const int64_t D = c.d_model, F = c.d_ff;
  float* h = pre_norm_rows(c, w.ffn_norm, x, n, ws);
  float* gate = grow(ws.gate, static_cast<size_t>(n * F));
  float* up = grow(ws.up, static_cast<size_t>(n * F));
  weight_linear_group(h, n,
                      {{weight_ref(w.w_gate, w.quant.w_gate, F, D), gate},
                       {weight_ref(w.w_up, w.quant.w_up, F, D), up}},
                      ws.quant);
  if (c.ffn_act == FfnActivation::gelu_tanh) {
    parallel_for(n, 4, [&](int64_t a, int64_t b) { gelu_tanh_mul(gate + a * F, up + a * F, (b - a) * F); });
  } else {
    parallel_for(n, 4, [&](int64_t a, int64_t b) { silu_mul(gate + a * F, up + a * F, (b - a) * F); });
  }
  if (w.post_ffn_norm.empty()) {
    weight_linear(gate, n, weight_ref(w.w_down, w.quant.w_down, D, F), x, ws.quant, 1.0f);  // x += act Wd^T
    return;
  }
  weight_linear(gate, n, weight_ref(w.w_down, w.quant.w_down, D, F), h, ws.quant);  // h is free again
  rmsnorm_rows(c, w.post_ffn_norm, h, n);
  for (int64_t i = 0; i < n * D; ++i) x[i] += h[i];
}

}  // namespace

namespace {

/// Throws rkv::InputError for a layer index out of range or a position outside [0, 2^31).
void check_layer_rows(const ModelConfig& c, int64_t layer, int64_t n, const int64_t* positions) {
  if (layer < 0 || layer >= c.n_layers) throw InputError("layer index " + std::to_string(layer) + " out of range");
  for (int64_t i = 0; i < n; ++i)
    if (positions[i] < 0 || positions[i] > INT32_MAX)
      throw InputError("layer " + std::to_string(layer) + ": token position " + std::to_string(positions[i]) +
                       " is outside [0, 2^31) (the cache stores positions as int32)");
}

}  // namespace

void forward_layer(const Model& model, int64_t layer, float* x, int64_t n, const int64_t* positions, LayerKV& kv,
                   Workspace& ws, const LayerHooks* hooks) {
  const ModelConfig& c = model.config;
  check_layer_rows(c, layer, n, positions);
  if (n <= 0) return;
  prepare_cache(c, layer, kv, n);
  attention_sublayer(model, layer, x, n, positions, &kv, AttendedKV(kv), ws, hooks);
  mlp_sublayer(model, layer, x, n, ws);
}

void forward_packed_layer(const Model& model, int64_t layer, float* x, int64_t n, const int64_t* positions,
                          const PackedLayer& packed, LayerKV& tail, Workspace& ws, const LayerHooks* hooks) {
  const ModelConfig& c = model.config;
  check_layer_rows(c, layer, n, positions);
  if (n <= 0) return;
  int64_t older = 0;  // the most packed entries of any head
  for (int64_t g = 0; g < static_cast<int64_t>(packed.heads.size()); ++g) older = std::max(older, packed.entries(g));
  prepare_cache(c, layer, tail, n, older);
  attention_sublayer(model, layer, x, n, positions, &tail, AttendedKV(tail, &packed), ws, hooks);
  mlp_sublayer(model, layer, x, n, ws);
}

void forward_shared_layer(const Model& model, int64_t layer, float* x, int64_t n, const int64_t* positions,
                          const AttendedKV& source, Workspace& ws, const LayerHooks* hooks) {
  const ModelConfig& c = model.config;
  check_layer_rows(c, layer, n, positions);
  if (n <= 0) return;
  if (source.n_kv_heads() != c.n_kv_heads || source.head_dim() != c.head_dim)
    throw InputError("layer " + std::to_string(layer) + ": the shared source cache has " +
                     std::to_string(source.n_kv_heads()) + " KV heads of dimension " + std::to_string(source.head_dim()));
  for (int64_t g = 0; g < source.n_kv_heads(); ++g)
    if (source.head_length(g) < n)
      throw InputError("layer " + std::to_string(layer) + ": the shared source cache does not hold the " +
                       std::to_string(n) + " new rows (run the source layer first)");
  attention_sublayer(model, layer, x, n, positions, nullptr, source, ws, hooks);
  mlp_sublayer(model, layer, x, n, ws);
}

namespace {

/// The LM head [V, D]: the untied output matrix, else the token embeddings (float32 or blocks).
WeightRef lm_head_ref(const Model& m) {
  const int64_t V = m.config.vocab_size, D = m.config.d_model;
  if (!m.lm_head_q.empty() || !m.lm_head.empty()) return weight_ref(m.lm_head, m.lm_head_q, V, D);
  return weight_ref(m.tok_embd, m.tok_embd_q, V, D);
}

}  // namespace

std::vector<float> final_logits(const Model& model, const float* x, int64_t n, const std::vector<int64_t>& rows,
                                Workspace& ws) {
  const int64_t D = model.config.d_model, V = model.config.vocab_size;
  const int64_t r = static_cast<int64_t>(rows.size());
  float* xn = grow(ws.norm_rows, static_cast<size_t>(r * D));
  for (int64_t k = 0; k < r; ++k) {
    if (rows[static_cast<size_t>(k)] < 0 || rows[static_cast<size_t>(k)] >= n) {
      throw InputError("final_logits: row " + std::to_string(rows[static_cast<size_t>(k)]) + " outside [0, " +
                       std::to_string(n) + ")");
    }
    rmsnorm_row(x + rows[static_cast<size_t>(k)] * D, model.output_norm.data(), model.config.rms_eps, D, xn + k * D);
  }
  std::vector<float> logits(static_cast<size_t>(r * V));
  weight_linear(xn, r, lm_head_ref(model), logits.data(), ws.quant, 0.0f, ActivationPrecision::int16);
  if (model.config.final_logit_softcap > 0.0f) softcap(logits.data(), model.config.final_logit_softcap, r * V);
  return logits;
}

KVCache make_cache(const Model& model, int64_t capacity) {
  const ModelConfig& c = model.config;
  return build_kv_cache(c.n_layers, c.n_kv_heads, c.head_dim, capacity);
}

std::vector<float> prefill(const Model& model, const std::vector<int32_t>& tokens, int64_t start_pos, KVCache& cache,
                           Workspace& ws, LogitsFor which, int64_t chunk) {
  const ModelConfig& c = model.config;
  if (static_cast<int64_t>(cache.layers.size()) != c.n_layers) {
    if (!cache.layers.empty()) {
      throw InputError("prefill: the cache has " + std::to_string(cache.layers.size()) + " layers, the model " +
                       std::to_string(c.n_layers));
    }
    cache.layers.resize(static_cast<size_t>(c.n_layers));
  }
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return {};
  if (chunk <= 0) chunk = n;
  std::vector<float> logits;
  if (which == LogitsFor::All) logits.reserve(static_cast<size_t>(n * c.vocab_size));
  std::vector<int64_t> positions;
  for (int64_t s = 0; s < n; s += chunk) {
    const int64_t e = std::min(n, s + chunk);
    std::vector<float> x = embed(model, std::vector<int32_t>(tokens.begin() + s, tokens.begin() + e));
    positions.resize(static_cast<size_t>(e - s));
    for (int64_t i = s; i < e; ++i) positions[static_cast<size_t>(i - s)] = start_pos + i;
    for (int64_t l = 0; l < c.n_layers; ++l) {
      forward_layer(model, l, x.data(), e - s, positions.data(), cache.layers[static_cast<size_t>(l)], ws);
    }
    if (which == LogitsFor::All) {
      std::vector<int64_t> rows(static_cast<size_t>(e - s));
      for (int64_t i = 0; i < e - s; ++i) rows[static_cast<size_t>(i)] = i;
      const std::vector<float> part = final_logits(model, x.data(), e - s, rows, ws);
      logits.insert(logits.end(), part.begin(), part.end());
    } else if (which == LogitsFor::Last && e == n) {
      logits = final_logits(model, x.data(), e - s, {e - s - 1}, ws);
    }
  }
  return logits;
}

std::vector<float> decode_step(const Model& model, int32_t token, int64_t pos, KVCache& cache, Workspace& ws) {
  return prefill(model, {token}, pos, cache, ws, LogitsFor::Last);
}

}  // namespace rkv::cpu
