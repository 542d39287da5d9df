#include "backend/cpu/profiler_session.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
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

}  // namespace

void log_softmax_f64(const float* z, int64_t n, double* out) {
  float m = z[0];
  for (int64_t v = 1; v < n; ++v) m = std::max(m, z[v]);
  double s = 0.0;
  for (int64_t v = 0; v < n; ++v) s += std::exp(static_cast<double>(z[v]) - static_cast<double>(m));
  const double lse = static_cast<double>(m) + std::log(s);
  for (int64_t v = 0; v < n; ++v) out[v] = static_cast<double>(z[v]) - lse;
}

namespace cpu {

CpuProfilerSession::CpuProfilerSession(const Model& model, int64_t prefix_tokens, int64_t window_tokens,
                                       const ProtectedSpec& protect)
    : model_(model), P_(prefix_tokens), n_w_(window_tokens) {
  const ModelConfig& c = model_.config;
  if (P_ < 1 || n_w_ < 1)
    throw InputError("profiler: prefix_tokens and window_tokens must be >= 1 (got " + str(P_) + " and " + str(n_w_) +
                     ")");
  if (c.head_dim % 4 != 0)
    throw InputError("profiler: head dimension " + str(c.head_dim) + " is not a multiple of 4 (noise blocks)");
  if (c.n_layers > 65535 || c.n_kv_heads > 65535 || c.head_dim / 4 > 65535)
    throw InputError("profiler: the model exceeds the noise key limits (65535 layers, KV heads, d/4)");
  protected_.assign(static_cast<size_t>(P_), 0);
  for (int64_t u : protected_positions(P_, protect)) protected_[static_cast<size_t>(u)] = 1;
  // A sliding-window layer holds only prefix positions u > P - 1 - W after the prefix (runner/compress/sliding_window.hpp):
  // the others are never perturbed there.
  unheld_or_protected_ = protected_;
  for (int64_t u = 0; c.sliding_window > 0 && u < P_ - std::min(P_, c.sliding_window); ++u) unheld_or_protected_[static_cast<size_t>(u)] = 1;

  const int64_t L = c.n_layers, D = c.d_model;
  cache_ = make_cache(model_, P_ + n_w_);
  for (int64_t t = 0; t < n_w_; ++t) {
    positions_.push_back(P_ + t);
    rows_.push_back(t);
  }
  x_.resize(static_cast<size_t>(n_w_ * D));
  hidden_.resize(static_cast<size_t>((L + 1) * n_w_ * D));
  saved_.resize(static_cast<size_t>(L));
}

const float* CpuProfilerSession::reference_hidden(int64_t layer) const {
  if (layer < 0 || layer > model_.config.n_layers)
    throw InputError("profiler: hidden-state index " + str(layer) + " out of range");
  return hidden_.data() + layer * n_w_ * model_.config.d_model;
}

void CpuProfilerSession::require_example(const char* what) const {
  if (current_ < 0) throw InputError(std::string(what) + " called before prepare_example()");
}

void CpuProfilerSession::check_layer(int64_t layer, const char* what) const {
  if (layer < 0 || layer >= model_.config.n_layers)
    throw InputError(std::string(what) + ": layer " + str(layer) + " outside [0, " + str(model_.config.n_layers) +
                     ")");
}

void CpuProfilerSession::copy_prefix_values(const LayerKV& kv, float* dst) const {
  const int64_t d = kv.head_dim;
  for (int64_t h = 0; h < kv.n_kv_heads; ++h)
    std::memcpy(dst + h * P_ * d, kv.v_at(h, 0), static_cast<size_t>(P_ * d) * sizeof(float));
}

void CpuProfilerSession::write_prefix_values(const float* src, LayerKV& kv) const {
  const int64_t d = kv.head_dim;
  for (int64_t h = 0; h < kv.n_kv_heads; ++h)
    std::memcpy(kv.v_at(h, 0), src + h * P_ * d, static_cast<size_t>(P_ * d) * sizeof(float));
}

void CpuProfilerSession::save_layer(int64_t layer) {
  auto& s = saved_[static_cast<size_t>(layer)];
  if (!s.empty()) return;
  const LayerKV& kv = cache_.layers[static_cast<size_t>(layer)];
  s.resize(static_cast<size_t>(kv.n_kv_heads * P_ * kv.head_dim));
  copy_prefix_values(kv, s.data());
}

void CpuProfilerSession::run_window_layers(int64_t from, int64_t to, const LayerHooks* hooks) {
  for (int64_t m = from; m < to; ++m) {
    LayerKV& kv = cache_.layers[static_cast<size_t>(m)];
    try {
      forward_layer(model_, m, x_.data(), n_w_, positions_.data(), kv, ws_, hooks);
    } catch (...) {
      kv.length = P_;
      throw;
    }
    kv.length = P_;  // drop the window's own keys and values: the cache holds the prefix only
  }
}

void CpuProfilerSession::prepare_example(int64_t example, const std::vector<int32_t>& toks) {
  const ModelConfig& c = model_.config;
  if (static_cast<int64_t>(toks.size()) != P_ + n_w_)
    throw InputError("profiler: calibration example " + str(example) + " has " + str(static_cast<int64_t>(toks.size())) +
                     " tokens, expected prefix " + str(P_) + " + window " + str(n_w_));
  check_token_ids(toks, c.vocab_size);
  const int64_t L = c.n_layers, D = c.d_model, V = c.vocab_size;
  current_ = -1;
  for (auto& s : saved_) s.clear();
  for (auto& kv : cache_.layers) kv.length = 0;

  const std::vector<int32_t> prefix(toks.begin(), toks.begin() + P_), window(toks.begin() + P_, toks.end());
  prefill(model_, prefix, 0, cache_, ws_, LogitsFor::None);

  // The reference window: the same layer calls window_kl makes, on the intact cache.
  const std::vector<float> e = embed(model_, window);
  std::copy(e.begin(), e.end(), x_.begin());
  for (int64_t m = 0; m < L; ++m) {
    std::copy(x_.begin(), x_.end(), hidden_.begin() + m * n_w_ * D);
    run_window_layers(m, m + 1, nullptr);
  }
  std::copy(x_.begin(), x_.end(), hidden_.begin() + L * n_w_ * D);
  const std::vector<float> logits = final_logits(model_, x_.data(), n_w_, rows_, ws_);
  ref_logp_.resize(static_cast<size_t>(n_w_ * V));
  ref_p_.resize(ref_logp_.size());
  parallel_for(n_w_, 1, [&](int64_t a, int64_t b) {
    for (int64_t t = a; t < b; ++t) {
      double* lp = ref_logp_.data() + t * V;
      log_softmax_f64(logits.data() + t * V, V, lp);
      for (int64_t v = 0; v < V; ++v) ref_p_[static_cast<size_t>(t * V + v)] = std::exp(lp[v]);
    }
  });
  current_ = example;
}

void CpuProfilerSession::perturb_values(int64_t layer, double alpha, uint64_t seed, int64_t draw) {
  require_example("perturb_values");
  check_layer(layer, "perturb_values");
  if (!(alpha >= 0.0) || !std::isfinite(alpha))
    throw InputError("perturb_values: alpha must be finite and >= 0 (got " + std::to_string(alpha) + ")");
  if (draw < 0 || draw > 65535) throw InputError("perturb_values: draw " + str(draw) + " outside [0, 65535]");
  save_layer(layer);
  LayerKV& kv = cache_.layers[static_cast<size_t>(layer)];
  const int64_t Hkv = kv.n_kv_heads, d = kv.head_dim;
  const uint32_t ex = static_cast<uint32_t>(current_);
  const std::vector<char>& skip = model_.config.is_sliding(layer) ? unheld_or_protected_ : protected_;
  parallel_for(Hkv * P_, 64, [&](int64_t a, int64_t b) {
    std::vector<float> eps(static_cast<size_t>(d));
    for (int64_t r = a; r < b; ++r) {
      const int64_t h = r / P_, u = r % P_;
      if (skip[static_cast<size_t>(u)]) continue;
      float* v = kv.v_at(h, u);
      double norm2 = 0.0;
      for (int64_t k = 0; k < d; ++k) norm2 += static_cast<double>(v[k]) * v[k];
      const double scale = alpha * std::sqrt(norm2);
      perturbation_noise(seed, static_cast<uint32_t>(draw), ex, static_cast<uint32_t>(layer), static_cast<uint32_t>(h),
                         static_cast<uint32_t>(u), static_cast<int>(d), eps.data());
      for (int64_t k = 0; k < d; ++k) v[k] = static_cast<float>(static_cast<double>(v[k]) + scale * eps[static_cast<size_t>(k)]);
    }
  });
}

std::vector<float> CpuProfilerSession::read_values(int64_t layer) {
  require_example("values_view");
  check_layer(layer, "values_view");
  const LayerKV& kv = cache_.layers[static_cast<size_t>(layer)];
  std::vector<float> out(static_cast<size_t>(kv.n_kv_heads * P_ * kv.head_dim));
  copy_prefix_values(kv, out.data());
  return out;
}

void CpuProfilerSession::write_values(int64_t layer, const std::vector<float>& values) {
  require_example("values_view");
  check_layer(layer, "values_view");
  LayerKV& kv = cache_.layers[static_cast<size_t>(layer)];
  if (values.size() != static_cast<size_t>(kv.n_kv_heads * P_ * kv.head_dim))
    throw InputError("values_view: " + std::to_string(values.size()) + " values for a [H_kv, P, d] layer of " +
                     str(kv.n_kv_heads * P_ * kv.head_dim));
  save_layer(layer);
  write_prefix_values(values.data(), kv);
}

bool CpuProfilerSession::is_changed(int64_t layer) const {
  return layer >= 0 && layer < static_cast<int64_t>(saved_.size()) && !saved_[static_cast<size_t>(layer)].empty();
}

std::vector<double> CpuProfilerSession::window_kl(int64_t from_layer) {
  require_example("window_kl");
  check_layer(from_layer, "window_kl");
  const int64_t L = model_.config.n_layers, D = model_.config.d_model, V = model_.config.vocab_size;
  std::copy(hidden_.begin() + from_layer * n_w_ * D, hidden_.begin() + (from_layer + 1) * n_w_ * D, x_.begin());
  run_window_layers(from_layer, L, nullptr);
  const std::vector<float> logits = final_logits(model_, x_.data(), n_w_, rows_, ws_);
  std::vector<double> kl(static_cast<size_t>(n_w_));
  parallel_for(n_w_, 1, [&](int64_t a, int64_t b) {
    for (int64_t t = a; t < b; ++t)
      kl[static_cast<size_t>(t)] = kl_row(logits.data() + t * V, ref_logp_.data() + t * V, ref_p_.data() + t * V, V);
  });
  return kl;
}

std::vector<float> CpuProfilerSession::attention_output(int64_t layer, bool perturbed) {
  require_example("attention_output");
  check_layer(layer, "attention_output");
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
  LayerHooks hooks;
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

void CpuProfilerSession::restore(int64_t layer) {
  check_layer(layer, "restore");
  auto& saved = saved_[static_cast<size_t>(layer)];
  if (saved.empty()) return;
  write_prefix_values(saved.data(), cache_.layers[static_cast<size_t>(layer)]);
  saved.clear();
}

}  // namespace cpu
}  // namespace rkv
