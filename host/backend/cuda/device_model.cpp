#include "backend/cuda/device_model.hpp"

#include <cmath>

#include "core/errors.hpp"
#include "model/half.hpp"
#include "model/rope.hpp"

namespace rkv::RKV_CUDA_NS {

namespace {

/// Host float32 values -> a device buffer of `t` (bfloat16 rounded to nearest even).
DeviceBuffer upload_as(Context& ctx, const std::vector<const std::vector<float>*>& parts, DType t) {
  size_t n = 0;
  for (const auto* p : parts) n += p->size();
  DeviceBuffer b(ctx, n * kernels::dtype_size(t));
  size_t off = 0;
  for (const auto* p : parts) {
    if (t == DType::F32) {
      copy_to_device(ctx, b.as<char>() + off * 4, p->data(), p->size() * 4);
    } else {
      std::vector<uint16_t> h(p->size());
      for (size_t i = 0; i < p->size(); ++i) h[i] = fp32_to_bf16((*p)[i]);
      copy_to_device(ctx, b.as<char>() + off * 2, h.data(), h.size() * 2);
    }
    off += p->size();
  }
  return b;
}

DeviceBuffer upload_f32(Context& ctx, const std::vector<float>& v) { return upload(ctx, v); }

/// A device buffer of `t` [count] filled by kernels::fill_uniform, region by region: (count, scale, offset).
struct Region {
  int64_t count;
  float scale, offset;
};
DeviceBuffer random_buffer(Context& ctx, DType t, const std::vector<Region>& regions, uint64_t& seed) {
  int64_t n = 0;
  for (const Region& r : regions) n += r.count;
  DeviceBuffer b(ctx, static_cast<size_t>(n) * kernels::dtype_size(t));
  int64_t off = 0;
  for (const Region& r : regions) {
    RKV_CUDA_CHECK(kernels::fill_uniform(t, b.as<char>() + static_cast<size_t>(off) * kernels::dtype_size(t), r.count,
                                         r.scale, r.offset, seed++, ctx.stream()));
    off += r.count;
  }
  return b;
}

}  // namespace

const char* precision_name(Precision p) { return p == Precision::FP32 ? "fp32" : "bf16"; }

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::FP32;
  if (name == "bf16") return Precision::BF16;
  throw InputError("unknown CUDA precision '" + name + "' (expected \"bf16\" or \"fp32\")");
}

void DeviceModel::check_geometry(const ModelConfig& c) {
  if (!kernels::attention_supported_head_dim(static_cast<int>(c.head_dim)))
    throw InputError("the CUDA backend supports head_dim 64, 128 or 256; this model has " + std::to_string(c.head_dim));
  if (c.n_kv_heads < 1 || c.n_heads % c.n_kv_heads != 0 || c.n_heads / c.n_kv_heads > 8)
    throw InputError("the CUDA backend supports grouped-query attention with H / H_kv <= 8; this model has H = " +
                     std::to_string(c.n_heads) + ", H_kv = " + std::to_string(c.n_kv_heads));
  if (c.n_layers < 1 || c.d_model < 1 || c.d_ff < 1 || c.vocab_size < 1)
    throw InputError("model configuration has a zero dimension (layers, d_model, d_ff or vocab)");
}

DeviceModel::DeviceModel(Context& ctx, const Model& model, Precision precision)
    : ctx_(&ctx), config_(model.config), precision_(precision) {
  check_geometry(config_);
  if (model.weights != WeightStorage::f32)
    throw InputError("the CUDA backend uploads float32 weights; load the model with model.weights = \"f32\"");
  const DType t = dtype();
  tok_embd_ = upload_as(ctx, {&model.tok_embd}, t);
  if (!model.lm_head.empty()) lm_head_ = upload_as(ctx, {&model.lm_head}, t);
  output_norm_ = upload_f32(ctx, model.output_norm);
  rope_inv_freq_ = upload(ctx, model.rope_inv_freq);
  if (!model.rope_inv_freq_swa.empty()) rope_inv_freq_swa_ = upload(ctx, model.rope_inv_freq_swa);
  layers_.resize(static_cast<size_t>(config_.n_layers));
  for (int64_t l = 0; l < config_.n_layers; ++l) {
    const LayerWeights& w = model.layers[static_cast<size_t>(l)];
    DeviceLayerWeights& d = layers_[static_cast<size_t>(l)];
    if (!w.attn_norm.empty()) d.attn_norm = upload_f32(ctx, w.attn_norm);  // olmo2 has none
    d.wqkv = upload_as(ctx, {&w.wq, &w.wk, &w.wv}, t);
    if (!w.bq.empty()) {
      std::vector<float> b(w.bq);
      b.insert(b.end(), w.bk.begin(), w.bk.end());
      b.insert(b.end(), w.bv.begin(), w.bv.end());
      d.bqkv = upload_f32(ctx, b);
    }
    d.wo = upload_as(ctx, {&w.wo}, t);
    if (!w.ffn_norm.empty()) d.ffn_norm = upload_f32(ctx, w.ffn_norm);
    d.w_gate_up = upload_as(ctx, {&w.w_gate, &w.w_up}, t);
    d.w_down = upload_as(ctx, {&w.w_down}, t);
    if (!w.q_norm.empty()) {
      d.q_norm = upload_f32(ctx, w.q_norm);
      d.k_norm = upload_f32(ctx, w.k_norm);
    }
    if (!w.post_attn_norm.empty()) {
      d.post_attn_norm = upload_f32(ctx, w.post_attn_norm);
      d.post_ffn_norm = upload_f32(ctx, w.post_ffn_norm);
    }
  }
  weight_bytes_ = tok_embd_.bytes() + lm_head_.bytes() + output_norm_.bytes();
  for (const auto& d : layers_)
    weight_bytes_ += d.attn_norm.bytes() + d.wqkv.bytes() + d.bqkv.bytes() + d.wo.bytes() + d.ffn_norm.bytes() +
                     d.w_gate_up.bytes() + d.w_down.bytes() + d.q_norm.bytes() + d.k_norm.bytes() +
                     d.post_attn_norm.bytes() + d.post_ffn_norm.bytes();
}

DeviceModel DeviceModel::random(Context& ctx, const ModelConfig& config, Precision precision, uint64_t seed) {
  check_geometry(config);
  if (!config.layer_sliding.empty() || config.qk_norm != QkNorm::none || config.post_norms || !config.pre_norms || config.ffn_act != FfnActivation::silu)
    throw InputError("DeviceModel::random builds llama-style layers only; upload a synthetic gemma3 model instead");
  DeviceModel m;
  m.ctx_ = &ctx;
  m.config_ = config;
  m.precision_ = precision;
  const DType t = m.dtype();
  const ModelConfig& c = config;
  const int64_t D = c.d_model, Hd = c.n_heads * c.head_dim, Kd = c.n_kv_heads * c.head_dim, F = c.d_ff,
                V = c.vocab_size;
  const float sD = 1.0f / std::sqrt(static_cast<float>(D)), sHd = 1.0f / std::sqrt(static_cast<float>(Hd)),
              sF = 1.0f / std::sqrt(static_cast<float>(F));
  uint64_t s = seed * 1000003ull;
  m.tok_embd_ = random_buffer(ctx, t, {{V * D, 1.0f, 0.0f}}, s);
  if (!c.tied_embeddings) m.lm_head_ = random_buffer(ctx, t, {{V * D, sD, 0.0f}}, s);
  m.output_norm_ = random_buffer(ctx, DType::F32, {{D, 0.2f, 1.0f}}, s);
  m.rope_inv_freq_ = upload(ctx, rkv::rope_inv_freq(c.head_dim, c.rope_theta, c.rope_scaling));
  m.layers_.resize(static_cast<size_t>(c.n_layers));
  for (auto& d : m.layers_) {
    d.attn_norm = random_buffer(ctx, DType::F32, {{D, 0.2f, 1.0f}}, s);
    d.wqkv = random_buffer(ctx, t, {{Hd * D, 2 * sD, 0.0f}, {Kd * D, 2 * sD, 0.0f}, {Kd * D, sD, 0.0f}}, s);
    if (c.qkv_bias) d.bqkv = random_buffer(ctx, DType::F32, {{Hd + 2 * Kd, 0.5f, 0.0f}}, s);
    d.wo = random_buffer(ctx, t, {{D * Hd, sHd, 0.0f}}, s);
    d.ffn_norm = random_buffer(ctx, DType::F32, {{D, 0.2f, 1.0f}}, s);
    d.w_gate_up = random_buffer(ctx, t, {{2 * F * D, 2 * sD, 0.0f}}, s);
    d.w_down = random_buffer(ctx, t, {{D * F, sF, 0.0f}}, s);
  }
  ctx.synchronize();
  m.weight_bytes_ = m.tok_embd_.bytes() + m.lm_head_.bytes() + m.output_norm_.bytes();
  for (const auto& d : m.layers_)
    m.weight_bytes_ += d.attn_norm.bytes() + d.wqkv.bytes() + d.bqkv.bytes() + d.wo.bytes() + d.ffn_norm.bytes() +
                       d.w_gate_up.bytes() + d.w_down.bytes();
  return m;
}

}  // namespace rkv::RKV_CUDA_NS
