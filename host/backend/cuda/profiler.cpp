#include "backend/cuda/profiler.hpp"

#include <algorithm>

#include <string>

#include "core/errors.hpp"

namespace rkv::RKV_CUDA_NS {

namespace {
std::string str(int64_t v) { return std::to_string(v); }
}  // namespace

DeviceProfiler::DeviceProfiler(const DeviceModel& model, int64_t prefix_tokens, int64_t window_tokens,
                               const ProtectedSpec& protect)
    : model_(&model), P_(prefix_tokens), n_w_(window_tokens), ws_(model.context()) {
  if (P_ < 1 || n_w_ < 1)
    throw InputError("profiler: prefix (" + str(P_) + ") and window (" + str(n_w_) + ") must both be >= 1");
  Context& ctx = model.context();
  const ModelConfig& c = model.config();
  protected_.assign(static_cast<size_t>(P_), 0);
  for (int64_t p : protected_positions(P_, protect)) protected_[static_cast<size_t>(p)] = 1;
  protected_mask_ = upload(ctx, protected_);
  // A sliding-window layer holds only prefix positions u > P - 1 - W (runner/compress/sliding_window.hpp): never perturbed.
  std::vector<uint8_t> skip = protected_;
  for (int64_t u = 0; c.sliding_window > 0 && u < P_ - std::min(P_, c.sliding_window); ++u) skip[static_cast<size_t>(u)] = 1;
  window_mask_ = upload(ctx, skip);
  cache_ = make_cache(model, P_ + n_w_);
  const int64_t D = c.d_model;
  x_ = DeviceBuffer(ctx, static_cast<size_t>(n_w_ * D) * sizeof(float));
  ref_hidden_ = DeviceBuffer(ctx, static_cast<size_t>(c.n_layers * n_w_ * D) * sizeof(float));
  ref_attn_ = DeviceBuffer(ctx, static_cast<size_t>(c.n_layers * n_w_ * D) * sizeof(float));
  ref_logits_ = DeviceBuffer(ctx, static_cast<size_t>(n_w_ * c.vocab_size) * sizeof(float));
  kl_ = DeviceBuffer(ctx, static_cast<size_t>(n_w_) * sizeof(double));
  o_ = DeviceBuffer(ctx, static_cast<size_t>(n_w_ * D) * sizeof(float));
  std::vector<int64_t> pos(static_cast<size_t>(n_w_));
  for (int64_t i = 0; i < n_w_; ++i) pos[static_cast<size_t>(i)] = P_ + i;
  positions_ = upload(ctx, pos);
  saved_values_.resize(static_cast<size_t>(c.n_layers));
}

void DeviceProfiler::check_layer(int64_t layer) const {
  if (layer < 0 || layer >= model_->config().n_layers)
    throw InputError("profiler: layer " + str(layer) + " outside [0, " + str(model_->config().n_layers) + ")");
  if (example_ < 0) throw InputError("profiler: prepare_example() has not been called");
}

void DeviceProfiler::prepare_example(int64_t example, const std::vector<int32_t>& tokens) {
  if (static_cast<int64_t>(tokens.size()) != P_ + n_w_)
    throw InputError("profiler: example " + str(example) + " has " + str(static_cast<int64_t>(tokens.size())) +
                     " tokens, expected prefix " + str(P_) + " + window " + str(n_w_));
  const DeviceModel& m = *model_;
  Context& ctx = m.context();
  const ModelConfig& c = m.config();
  for (auto& s : saved_values_) s.reset();  // a fresh prefill replaces every value
  for (auto& l : cache_.layers) l.length = 0;
  prefill(m, std::vector<int32_t>(tokens.begin(), tokens.begin() + P_), 0, cache_, ws_, LogitsFor::None);
  // Reference window: the same path window_kl() takes, from layer 0.
  const float* e = embed(m, std::vector<int32_t>(tokens.begin() + P_, tokens.end()), ws_);
  const size_t row_bytes = static_cast<size_t>(n_w_ * c.d_model) * sizeof(float);
  copy_on_device(ctx, ref_hidden_.data(), e, row_bytes);  // hidden state entering layer 0
  example_ = example;
  recording_ = true;
  try {
    run_window(0, c.n_layers, nullptr);
  } catch (...) {
    recording_ = false;
    example_ = -1;
    throw;
  }
  recording_ = false;
  const float* logits = final_logits_device(m, x_.as<float>(), n_w_, [&] {
    std::vector<int64_t> rows(static_cast<size_t>(n_w_));
    for (int64_t i = 0; i < n_w_; ++i) rows[static_cast<size_t>(i)] = i;
    return rows;
  }(), ws_);
  copy_on_device(ctx, ref_logits_.data(), logits, static_cast<size_t>(n_w_ * c.vocab_size) * sizeof(float));
  ctx.synchronize();
}

void DeviceProfiler::run_window(int64_t from, int64_t to, float* attn_output_of_from) {
  const DeviceModel& m = *model_;
  Context& ctx = m.context();
  const int64_t D = m.config().d_model;
  const size_t row_bytes = static_cast<size_t>(n_w_ * D) * sizeof(float);
  copy_on_device(ctx, x_.data(), ref_hidden_.as<char>() + static_cast<size_t>(from) * row_bytes, row_bytes);
  for (int64_t l = from; l < to; ++l) {
    DeviceLayerKV& kv = cache_.layers[static_cast<size_t>(l)];
    kv.length = P_;
    DeviceLayerHooks hooks;
    if (recording_) {  // the reference run keeps the hidden state entering each layer and its attention output
      if (l > 0) copy_on_device(ctx, ref_hidden_.as<char>() + static_cast<size_t>(l) * row_bytes, x_.data(), row_bytes);
      hooks.attn_output = ref_attn_.as<float>() + l * n_w_ * D;
    } else if (l == from && attn_output_of_from) {
      hooks.attn_output = attn_output_of_from;
    } else {  // the same code path as the reference run (o_proj output, then the residual add), so alpha = 0 gives 0
      hooks.attn_output = o_.as<float>();
    }
    forward_layer(m, l, x_.as<float>(), n_w_, positions_.as<int64_t>(), kv, ws_, &hooks);
    kv.length = P_;
  }
}

void DeviceProfiler::save_values(int64_t layer) {
  DeviceBuffer& saved = saved_values_[static_cast<size_t>(layer)];
  if (!saved.empty()) return;
  const DeviceLayerKV& kv = cache_.layers[static_cast<size_t>(layer)];
  saved = DeviceBuffer(model_->context(), kv.v.bytes());
  copy_on_device(model_->context(), saved.data(), kv.v.data(), kv.v.bytes());
}

void DeviceProfiler::perturb_values(int64_t layer, double alpha, uint64_t seed, int64_t draw) {
  check_layer(layer);
  if (draw < 0 || draw > 65535) throw InputError("profiler: draw " + str(draw) + " outside [0, 65535]");
  save_values(layer);
  DeviceLayerKV& kv = cache_.layers[static_cast<size_t>(layer)];
  RKV_CUDA_CHECK(kernels::perturb_values(kv.dtype, kv.v.data(), kv.capacity, kv.n_kv_heads, P_,
                                         static_cast<int>(kv.head_dim),
                                         (model_->config().is_sliding(layer) ? window_mask_ : protected_mask_).as<uint8_t>(),
                                         alpha, seed,
                                         static_cast<uint32_t>(draw), static_cast<uint32_t>(example_),
                                         static_cast<uint32_t>(layer), model_->context().stream()));
}

bool DeviceProfiler::is_protected(int64_t position) const {
  return position >= 0 && position < P_ && protected_[static_cast<size_t>(position)] != 0;
}

std::vector<double> DeviceProfiler::window_kl(int64_t from_layer) {
  check_layer(from_layer);
  const DeviceModel& m = *model_;
  run_window(from_layer, m.config().n_layers, nullptr);
  std::vector<int64_t> rows(static_cast<size_t>(n_w_));
  for (int64_t i = 0; i < n_w_; ++i) rows[static_cast<size_t>(i)] = i;
  const float* logits = final_logits_device(m, x_.as<float>(), n_w_, rows, ws_);
  RKV_CUDA_CHECK(kernels::kl_rows(ref_logits_.as<float>(), logits, n_w_, m.config().vocab_size, kl_.as<double>(),
                                  m.context().stream()));
  return download<double>(m.context(), kl_.data(), static_cast<size_t>(n_w_));
}

std::vector<float> DeviceProfiler::attention_output(int64_t layer, bool perturbed) {
  check_layer(layer);
  const DeviceModel& m = *model_;
  const size_t count = static_cast<size_t>(n_w_ * m.config().d_model);
  if (!perturbed) return download<float>(m.context(), ref_attn_.as<float>() + count * static_cast<size_t>(layer), count);
  run_window(layer, layer + 1, o_.as<float>());
  return download<float>(m.context(), o_.data(), count);
}

void DeviceProfiler::restore(int64_t layer) {
  check_layer(layer);
  DeviceBuffer& saved = saved_values_[static_cast<size_t>(layer)];
  if (saved.empty()) return;
  DeviceLayerKV& kv = cache_.layers[static_cast<size_t>(layer)];
  copy_on_device(model_->context(), kv.v.data(), saved.data(), saved.bytes());
  saved.reset();
}

DeviceLayerKV& DeviceProfiler::values(int64_t layer) {
  check_layer(layer);
  save_values(layer);
  return cache_.layers[static_cast<size_t>(layer)];
}

}  // namespace rkv::RKV_CUDA_NS
