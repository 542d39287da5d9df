#include "runner/profiler.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <string>

#include "backend/cpu/threads.hpp"
#include "core/errors.hpp"
#include "core/philox.hpp"

namespace rkv {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

/// KL(P || Q) of one row: sum_v p_v (log p_v - log q_v), log q = log-softmax of z computed as in log_softmax_f64.
double kl_row(const float* z, const double* logp, const double* p, int64_t V) {
  float m = z[0];
  for (int64_t v = 1; v < V; ++v) m = std::max(m, z[v]);
  double s = 0.0;
  for (int64_t v = 0; v < V; ++v) s += std::exp(static_cast<double>(z[v]) - static_cast<double>(m));
  const double lse = static_cast<double>(m) + std::log(s);
  double kl = 0.0;
  for (int64_t v = 0; v < V; ++v) kl += p[v] * (logp[v] - (static_cast<double>(z[v]) - lse));
  return kl;
}

// ---- the C service table: exceptions become statuses, messages go to the plugin's sink ----

void report(const rkv_diagnostics* diag, const std::string& message) {
  if (diag && RKV_HAS_FIELD(diag, rkv_diagnostics, report) && diag->report)
    diag->report(diag->ctx, RKV_DIAG_ERROR, message.c_str());
}

template <typename Fn>
rkv_status guarded(const rkv_diagnostics* diag, const char* what, Fn&& fn) {
  try {
    fn();
    return RKV_OK;
  } catch (const InputError& e) {
    report(diag, std::string("profiler ") + what + ": " + e.what());
    return RKV_ERROR_INVALID_ARGUMENT;
  } catch (const Cancelled&) {
    report(diag, std::string("profiler ") + what + ": cancelled");
    return RKV_ERROR_CANCELLED;
  } catch (const std::bad_alloc&) {
    report(diag, std::string("profiler ") + what + ": out of memory");
    return RKV_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    report(diag, std::string("profiler ") + what + ": internal error: " + e.what());
    return RKV_ERROR_INTERNAL;
  } catch (...) {
    report(diag, std::string("profiler ") + what + ": internal error");
    return RKV_ERROR_INTERNAL;
  }
}

/// Checks that `t` is a CPU, compact tensor of `dtype` with `shape`; returns its data pointer.
void* checked_data(const DLTensor* t, DLDataType dtype, const std::vector<int64_t>& shape, const char* name) {
  if (!t) throw InputError(std::string(name) + ": NULL tensor");
  if (t->device.device_type != kDLCPU) throw InputError(std::string(name) + ": must be a CPU tensor");
  if (t->dtype.code != dtype.code || t->dtype.bits != dtype.bits || t->dtype.lanes != 1)
    throw InputError(std::string(name) + ": must be float" + std::to_string(dtype.bits));
  if (t->ndim != static_cast<int32_t>(shape.size()) || !t->shape)
    throw InputError(std::string(name) + ": must have " + std::to_string(shape.size()) + " dimensions");
  int64_t stride = 1;
  for (int32_t k = t->ndim - 1; k >= 0; --k) {
    if (t->shape[k] != shape[static_cast<size_t>(k)])
      throw InputError(std::string(name) + ": dimension " + std::to_string(k) + " is " + str(t->shape[k]) +
                       ", expected " + str(shape[static_cast<size_t>(k)]));
    if (t->strides && t->strides[k] != stride) throw InputError(std::string(name) + ": must be compact (row-major)");
    stride *= shape[static_cast<size_t>(k)];
  }
  if (!t->data) throw InputError(std::string(name) + ": NULL data");
  return static_cast<char*>(t->data) + t->byte_offset;
}

Profiler* self(void* ctx) { return static_cast<Profiler*>(ctx); }

rkv_status c_prepare_example(void* ctx, int64_t example, const rkv_diagnostics* diag) {
  return guarded(diag, "prepare_example", [&] { self(ctx)->prepare_example(example); });
}
rkv_status c_perturb_values(void* ctx, int64_t layer, double alpha, uint64_t seed, int64_t draw,
                            const rkv_diagnostics* diag) {
  return guarded(diag, "perturb_values", [&] { self(ctx)->perturb_values(layer, alpha, seed, draw); });
}
rkv_status c_values_view(void* ctx, int64_t layer, DLTensor* out, const rkv_diagnostics* diag) {
  return guarded(diag, "values_view", [&] {
    if (!out) throw InputError("out: NULL tensor");
    self(ctx)->values_view_tensor(layer, out);
  });
}
int32_t c_is_protected(void* ctx, int64_t position) { return self(ctx)->is_protected(position) ? 1 : 0; }
rkv_status c_window_kl(void* ctx, int64_t from_layer, DLTensor* kl_out, const rkv_diagnostics* diag) {
  return guarded(diag, "window_kl", [&] {
    Profiler* p = self(ctx);
    auto* dst = static_cast<double*>(checked_data(kl_out, DLDataType{kDLFloat, 64, 1}, {p->window_tokens()}, "kl_out"));
    const std::vector<double> kl = p->window_kl(from_layer);
    std::copy(kl.begin(), kl.end(), dst);
  });
}
rkv_status c_attention_output(void* ctx, int64_t layer, int32_t perturbed, DLTensor* out,
                              const rkv_diagnostics* diag) {
  return guarded(diag, "attention_output", [&] {
    Profiler* p = self(ctx);
    const int64_t n_w = p->window_tokens();
    const std::vector<float> o = p->attention_output(layer, perturbed != 0);
    const int64_t D = static_cast<int64_t>(o.size()) / n_w;
    auto* dst = static_cast<float*>(checked_data(out, DLDataType{kDLFloat, 32, 1}, {n_w, D}, "out"));
    std::copy(o.begin(), o.end(), dst);
  });
}
rkv_status c_restore(void* ctx, int64_t layer, const rkv_diagnostics* diag) {
  return guarded(diag, "restore", [&] { self(ctx)->restore(layer); });
}

}  // namespace

void log_softmax_f64(const float* z, int64_t n, double* out) {
  float m = z[0];
  for (int64_t v = 1; v < n; ++v) m = std::max(m, z[v]);
  double s = 0.0;
  for (int64_t v = 0; v < n; ++v) s += std::exp(static_cast<double>(z[v]) - static_cast<double>(m));
  const double lse = static_cast<double>(m) + std::log(s);
  for (int64_t v = 0; v < n; ++v) out[v] = static_cast<double>(z[v]) - lse;
}

Profiler::Profiler(const Model& model, std::vector<std::vector<int32_t>> examples, int64_t prefix_tokens,
                   int64_t window_tokens, const ProtectedSpec& protect)
    : model_(model), examples_(std::move(examples)), P_(prefix_tokens), n_w_(window_tokens) {
  const ModelConfig& c = model_.config;
  if (examples_.empty()) throw InputError("profiler: no calibration examples");
  if (P_ < 1 || n_w_ < 1)
    throw InputError("profiler: prefix_tokens and window_tokens must be >= 1 (got " + str(P_) + " and " + str(n_w_) +
                     ")");
  for (size_t i = 0; i < examples_.size(); ++i) {
    if (static_cast<int64_t>(examples_[i].size()) != P_ + n_w_)
      throw InputError("profiler: calibration example " + std::to_string(i) + " has " +
                       std::to_string(examples_[i].size()) + " tokens, expected prefix " + str(P_) + " + window " +
                       str(n_w_));
    for (int32_t t : examples_[i])
      if (t < 0 || t >= c.vocab_size)
        throw InputError("profiler: calibration example " + std::to_string(i) + " has token id " + std::to_string(t) +
                         " outside the vocabulary [0, " + str(c.vocab_size) + ")");
  }
  if (c.head_dim % 4 != 0)
    throw InputError("profiler: head dimension " + str(c.head_dim) + " is not a multiple of 4 (noise blocks)");
  if (c.n_layers > 65535 || c.n_kv_heads > 65535 || c.head_dim / 4 > 65535)
    throw InputError("profiler: the model exceeds the noise key limits (65535 layers, KV heads, d/4)");
  protected_.assign(static_cast<size_t>(P_), 0);
  for (int64_t u : protected_positions(P_, protect)) protected_[static_cast<size_t>(u)] = 1;

  const int64_t L = c.n_layers, D = c.d_model;
  cache_ = cpu::make_cache(model_, P_ + n_w_);
  for (int64_t t = 0; t < n_w_; ++t) {
    positions_.push_back(P_ + t);
    rows_.push_back(t);
  }
  x_.resize(static_cast<size_t>(n_w_ * D));
  hidden_.resize(static_cast<size_t>((L + 1) * n_w_ * D));
  saved_.resize(static_cast<size_t>(L));
  views_.resize(static_cast<size_t>(L));
  view_shape_[0] = c.n_kv_heads;
  view_shape_[1] = P_;
  view_shape_[2] = c.head_dim;

  abi_.struct_size = sizeof abi_;
  abi_.ctx = this;
  abi_.n_layers = L;
  abi_.n_heads = c.n_heads;
  abi_.n_kv_heads = c.n_kv_heads;
  abi_.head_dim = c.head_dim;
  abi_.d_model = D;
  abi_.n_examples = n_examples();
  abi_.prefix_tokens = P_;
  abi_.window_tokens = n_w_;
  abi_.prepare_example = c_prepare_example;
  abi_.perturb_values = c_perturb_values;
  abi_.values_view = c_values_view;
  abi_.is_protected = c_is_protected;
  abi_.window_kl = c_window_kl;
  abi_.attention_output = c_attention_output;
  abi_.restore = c_restore;
}

const float* Profiler::reference_hidden(int64_t layer) const {
  if (layer < 0 || layer > n_layers()) throw InputError("profiler: hidden-state index " + str(layer) + " out of range");
  return hidden_.data() + layer * n_w_ * model_.config.d_model;
}

void Profiler::require_example(const char* what) const {
  if (current_ < 0) throw InputError(std::string(what) + " called before prepare_example()");
}

void Profiler::check_layer(int64_t layer, const char* what) const {
  if (layer < 0 || layer >= n_layers())
    throw InputError(std::string(what) + ": layer " + str(layer) + " outside [0, " + str(n_layers()) + ")");
}

void Profiler::copy_prefix_values(const LayerKV& kv, float* dst) const {
  const int64_t d = kv.head_dim;
  for (int64_t h = 0; h < kv.n_kv_heads; ++h)
    std::memcpy(dst + h * P_ * d, kv.v_at(h, 0), static_cast<size_t>(P_ * d) * sizeof(float));
}

void Profiler::write_prefix_values(const float* src, LayerKV& kv) const {
  const int64_t d = kv.head_dim;
  for (int64_t h = 0; h < kv.n_kv_heads; ++h)
    std::memcpy(kv.v_at(h, 0), src + h * P_ * d, static_cast<size_t>(P_ * d) * sizeof(float));
}

void Profiler::save_layer(int64_t layer) {
  auto& s = saved_[static_cast<size_t>(layer)];
  if (!s.empty()) return;
  const LayerKV& kv = cache_.layers[static_cast<size_t>(layer)];
  s.resize(static_cast<size_t>(kv.n_kv_heads * P_ * kv.head_dim));
  copy_prefix_values(kv, s.data());
}

void Profiler::flush_views() {
  for (size_t l = 0; l < views_.size(); ++l)
    if (!views_[l].empty()) write_prefix_values(views_[l].data(), cache_.layers[l]);
}

void Profiler::run_window_layers(int64_t from, int64_t to, const cpu::LayerHooks* hooks) {
  for (int64_t m = from; m < to; ++m) {
    LayerKV& kv = cache_.layers[static_cast<size_t>(m)];
    try {
      cpu::forward_layer(model_, m, x_.data(), n_w_, positions_.data(), kv, ws_, hooks);
    } catch (...) {
      kv.length = P_;
      throw;
    }
    kv.length = P_;  // drop the window's own keys and values: the cache holds the prefix only
  }
}

void Profiler::prepare_example(int64_t i) {
  if (i < 0 || i >= n_examples())
    throw InputError("prepare_example: example " + str(i) + " outside [0, " + str(n_examples()) + ")");
  const ModelConfig& c = model_.config;
  const int64_t L = c.n_layers, D = c.d_model, V = c.vocab_size;
  current_ = -1;
  for (auto& s : saved_) s.clear();
  for (auto& v : views_) v.clear();
  for (auto& kv : cache_.layers) kv.length = 0;

  const std::vector<int32_t>& toks = examples_[static_cast<size_t>(i)];
  const std::vector<int32_t> prefix(toks.begin(), toks.begin() + P_), window(toks.begin() + P_, toks.end());
  cpu::prefill(model_, prefix, 0, cache_, ws_, cpu::LogitsFor::None);

  // The reference window: the same layer calls window_kl makes, on the intact cache.
  const std::vector<float> e = cpu::embed(model_, window);
  std::copy(e.begin(), e.end(), x_.begin());
  for (int64_t m = 0; m < L; ++m) {
    std::copy(x_.begin(), x_.end(), hidden_.begin() + m * n_w_ * D);
    run_window_layers(m, m + 1, nullptr);
  }
  std::copy(x_.begin(), x_.end(), hidden_.begin() + L * n_w_ * D);
  const std::vector<float> logits = cpu::final_logits(model_, x_.data(), n_w_, rows_, ws_);
  ref_logp_.resize(static_cast<size_t>(n_w_ * V));
  ref_p_.resize(ref_logp_.size());
  cpu::parallel_for(n_w_, 1, [&](int64_t a, int64_t b) {
    for (int64_t t = a; t < b; ++t) {
      double* lp = ref_logp_.data() + t * V;
      log_softmax_f64(logits.data() + t * V, V, lp);
      for (int64_t v = 0; v < V; ++v) ref_p_[static_cast<size_t>(t * V + v)] = std::exp(lp[v]);
    }
  });
  current_ = i;
}

void Profiler::perturb_values(int64_t layer, double alpha, uint64_t seed, int64_t draw) {
  require_example("perturb_values");
  check_layer(layer, "perturb_values");
  if (!(alpha >= 0.0) || !std::isfinite(alpha))
    throw InputError("perturb_values: alpha must be finite and >= 0 (got " + std::to_string(alpha) + ")");
  if (draw < 0 || draw > 65535) throw InputError("perturb_values: draw " + str(draw) + " outside [0, 65535]");
  flush_views();
  save_layer(layer);
  LayerKV& kv = cache_.layers[static_cast<size_t>(layer)];
  const int64_t Hkv = kv.n_kv_heads, d = kv.head_dim;
  const uint32_t ex = static_cast<uint32_t>(current_);
  cpu::parallel_for(Hkv * P_, 64, [&](int64_t a, int64_t b) {
    std::vector<float> eps(static_cast<size_t>(d));
    for (int64_t r = a; r < b; ++r) {
      const int64_t h = r / P_, u = r % P_;
      if (protected_[static_cast<size_t>(u)]) continue;
      float* v = kv.v_at(h, u);
      double norm2 = 0.0;
      for (int64_t k = 0; k < d; ++k) norm2 += static_cast<double>(v[k]) * v[k];
      const double scale = alpha * std::sqrt(norm2);
      perturbation_noise(seed, static_cast<uint32_t>(draw), ex, static_cast<uint32_t>(layer), static_cast<uint32_t>(h),
                         static_cast<uint32_t>(u), static_cast<int>(d), eps.data());
      for (int64_t k = 0; k < d; ++k) v[k] = static_cast<float>(static_cast<double>(v[k]) + scale * eps[static_cast<size_t>(k)]);
    }
  });
  auto& view = views_[static_cast<size_t>(layer)];
  if (!view.empty()) copy_prefix_values(kv, view.data());  // a live view shows the perturbed values
}

float* Profiler::values_view(int64_t layer) {
  require_example("values_view");
  check_layer(layer, "values_view");
  flush_views();
  save_layer(layer);
  auto& view = views_[static_cast<size_t>(layer)];
  const LayerKV& kv = cache_.layers[static_cast<size_t>(layer)];
  if (view.empty()) {
    view.resize(static_cast<size_t>(kv.n_kv_heads * P_ * kv.head_dim));
    copy_prefix_values(kv, view.data());
  }
  return view.data();
}

void Profiler::values_view_tensor(int64_t layer, DLTensor* out) {
  float* data = values_view(layer);
  *out = DLTensor{};
  out->data = data;
  out->device = DLDevice{kDLCPU, 0};
  out->ndim = 3;
  out->dtype = DLDataType{kDLFloat, 32, 1};
  out->shape = view_shape_;
  out->strides = nullptr;
  out->byte_offset = 0;
}

bool Profiler::is_protected(int64_t position) const {
  return position >= 0 && position < P_ && protected_[static_cast<size_t>(position)] != 0;
}

std::vector<double> Profiler::window_kl(int64_t from_layer) {
  require_example("window_kl");
  check_layer(from_layer, "window_kl");
  for (int64_t k = 0; k < from_layer; ++k)
    if (!saved_[static_cast<size_t>(k)].empty())
      throw InputError("window_kl: layer " + str(k) + " is perturbed but the window is rerun from layer " +
                       str(from_layer) + " (its effect would be missed); rerun from layer " + str(k) +
                       " or lower, or restore it");
  flush_views();
  const int64_t L = n_layers(), D = model_.config.d_model, V = model_.config.vocab_size;
  std::copy(hidden_.begin() + from_layer * n_w_ * D, hidden_.begin() + (from_layer + 1) * n_w_ * D, x_.begin());
  run_window_layers(from_layer, L, nullptr);
  const std::vector<float> logits = cpu::final_logits(model_, x_.data(), n_w_, rows_, ws_);
  std::vector<double> kl(static_cast<size_t>(n_w_));
  cpu::parallel_for(n_w_, 1, [&](int64_t a, int64_t b) {
    for (int64_t t = a; t < b; ++t)
      kl[static_cast<size_t>(t)] = kl_row(logits.data() + t * V, ref_logp_.data() + t * V, ref_p_.data() + t * V, V);
  });
  return kl;
}

std::vector<float> Profiler::attention_output(int64_t layer, bool perturbed) {
  require_example("attention_output");
  check_layer(layer, "attention_output");
  flush_views();
  const int64_t D = model_.config.d_model;
  LayerKV& kv = cache_.layers[static_cast<size_t>(layer)];
  const auto& saved = saved_[static_cast<size_t>(layer)];
  std::vector<float> current;
  if (!perturbed && !saved.empty()) {  // run on the reference values, then put the current ones back
    current.resize(saved.size());
    copy_prefix_values(kv, current.data());
    write_prefix_values(saved.data(), kv);
  }
  std::vector<float> out(static_cast<size_t>(n_w_ * D));
  cpu::LayerHooks hooks;
  hooks.on_attn_output = [&](const float* o, int64_t n, int64_t d_model) {
    std::copy(o, o + n * d_model, out.begin());
  };
  std::copy(hidden_.begin() + layer * n_w_ * D, hidden_.begin() + (layer + 1) * n_w_ * D, x_.begin());
  try {
    run_window_layers(layer, layer + 1, &hooks);
  } catch (...) {
    if (!current.empty()) write_prefix_values(current.data(), kv);
    throw;
  }
  if (!current.empty()) write_prefix_values(current.data(), kv);
  return out;
}

void Profiler::restore(int64_t layer) {
  check_layer(layer, "restore");
  auto& saved = saved_[static_cast<size_t>(layer)];
  views_[static_cast<size_t>(layer)].clear();
  if (saved.empty()) return;
  write_prefix_values(saved.data(), cache_.layers[static_cast<size_t>(layer)]);
  saved.clear();
}

}  // namespace rkv
