#include "runner/profile/profiler.hpp"

#include <algorithm>
#include <cmath>
#include <new>
#include <string>

#include "core/errors.hpp"

namespace rkv {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

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

namespace {
BackendOptions keep_threads() {
  BackendOptions o;
  o.threads = -1;  // leave the process-wide CPU thread count as the caller set it
  return o;
}
}  // namespace

Profiler::Profiler(const Model& model, std::vector<std::vector<int32_t>> examples, int64_t prefix_tokens,
                   int64_t window_tokens, const ProtectedSpec& protect)
    : owned_backend_(make_backend("cpu", model, keep_threads())), backend_(*owned_backend_), model_(model),
      examples_(std::move(examples)), P_(prefix_tokens), n_w_(window_tokens) {
  init(protect);
}

Profiler::Profiler(Backend& backend, std::vector<std::vector<int32_t>> examples, int64_t prefix_tokens,
                   int64_t window_tokens, const ProtectedSpec& protect)
    : backend_(backend), model_(backend.model()), examples_(std::move(examples)), P_(prefix_tokens),
      n_w_(window_tokens) {
  init(protect);
}

Profiler::~Profiler() = default;

void Profiler::init(const ProtectedSpec& protect) {
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
  session_ = backend_.new_profiler(P_, n_w_, protect);
  protected_.assign(static_cast<size_t>(P_), 0);
  for (int64_t u : protected_positions(P_, protect)) protected_[static_cast<size_t>(u)] = 1;
  views_.resize(static_cast<size_t>(c.n_layers));
  view_shape_[0] = c.n_kv_heads;
  view_shape_[1] = P_;
  view_shape_[2] = c.head_dim;

  abi_.struct_size = sizeof abi_;
  abi_.ctx = this;
  abi_.n_layers = c.n_layers;
  abi_.n_heads = c.n_heads;
  abi_.n_kv_heads = c.n_kv_heads;
  abi_.head_dim = c.head_dim;
  abi_.d_model = c.d_model;
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

void Profiler::require_example(const char* what) const {
  if (current_ < 0) throw InputError(std::string(what) + " called before prepare_example()");
}

void Profiler::check_layer(int64_t layer, const char* what) const {
  if (layer < 0 || layer >= n_layers())
    throw InputError(std::string(what) + ": layer " + str(layer) + " outside [0, " + str(n_layers()) + ")");
}

void Profiler::flush_views() {
  for (size_t l = 0; l < views_.size(); ++l)
    if (!views_[l].empty()) session_->write_values(static_cast<int64_t>(l), views_[l]);
}

void Profiler::prepare_example(int64_t i) {
  if (i < 0 || i >= n_examples())
    throw InputError("prepare_example: example " + str(i) + " outside [0, " + str(n_examples()) + ")");
  if (on_prepare_example) on_prepare_example(i);
  current_ = -1;
  for (auto& v : views_) v.clear();
  session_->prepare_example(i, examples_[static_cast<size_t>(i)]);
  current_ = i;
}

void Profiler::perturb_values(int64_t layer, double alpha, uint64_t seed, int64_t draw) {
  require_example("perturb_values");
  check_layer(layer, "perturb_values");
  if (!(alpha >= 0.0) || !std::isfinite(alpha))
    throw InputError("perturb_values: alpha must be finite and >= 0 (got " + std::to_string(alpha) + ")");
  if (draw < 0 || draw > 65535) throw InputError("perturb_values: draw " + str(draw) + " outside [0, 65535]");
  flush_views();
  session_->perturb_values(layer, alpha, seed, draw);
  auto& view = views_[static_cast<size_t>(layer)];
  if (!view.empty()) view = session_->read_values(layer);  // a live view shows the perturbed values
}

float* Profiler::values_view(int64_t layer) {
  require_example("values_view");
  check_layer(layer, "values_view");
  flush_views();
  auto& view = views_[static_cast<size_t>(layer)];
  if (view.empty()) view = session_->read_values(layer);
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
    if (session_->is_changed(k) || !views_[static_cast<size_t>(k)].empty())
      throw InputError("window_kl: layer " + str(k) + " is perturbed but the window is rerun from layer " +
                       str(from_layer) + " (its effect would be missed); rerun from layer " + str(k) +
                       " or lower, or restore it");
  flush_views();
  return session_->window_kl(from_layer);
}

std::vector<float> Profiler::attention_output(int64_t layer, bool perturbed) {
  require_example("attention_output");
  check_layer(layer, "attention_output");
  flush_views();
  return session_->attention_output(layer, perturbed);
}

void Profiler::restore(int64_t layer) {
  check_layer(layer, "restore");
  views_[static_cast<size_t>(layer)].clear();
  session_->restore(layer);
}

}  // namespace rkv
