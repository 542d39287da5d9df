// Test helpers for the profiler: a second, independent implementation of the perturbation and of the naive method
// (docs/ARCHITECTURE.md "perturbation_kl": prefix cache built once, layer l perturbed, the window run through all L layers with
// the plain prefill), and plugin choices from the real .so plugins. Not part of the library.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cpu/forward.hpp"
#include "backend/cpu/profiler_session.hpp"
#include "core/philox.hpp"
#include "model/model.hpp"
#include "plugin/params.hpp"
#include "plugin/registry.hpp"
#include "runner/plan/config.hpp"
#include "runner/profile/profiler.hpp"

namespace rkv_test {

/// The CPU session behind a Profiler made on a CPU backend (its prefix cache and reference hidden states).
inline const rkv::cpu::CpuProfilerSession& cpu_session(const rkv::Profiler& p) {
  return dynamic_cast<const rkv::cpu::CpuProfilerSession&>(p.session());
}

/// The registry of the build's plugins (loaded once per process).
inline const rkv::PluginRegistry& plugins() {
  static const rkv::PluginRegistry reg = rkv::PluginRegistry::discover();
  return reg;
}

/// A validated plugin choice, e.g. choice("perturbation_kl", RKV_KIND_SIGNAL, {{"alpha", 0.05}}).
inline rkv::PluginChoice choice(const std::string& id, rkv_plugin_kind kind,
                                const std::vector<std::pair<std::string, rkv::ParamValue>>& params = {}) {
  const rkv::PluginInfo& info = plugins().resolve(id, kind);
  std::vector<rkv::UserParam> user;
  for (const auto& [k, v] : params) user.push_back(rkv::UserParam{k, v, false, "test"});
  return rkv::PluginChoice{info.id(), &info, rkv::ParamSet::validate(*info.descriptor, user)};
}

/// log-softmax of float logits in double, written out plainly: z - max - log(sum exp(z - max)).
inline std::vector<double> plain_log_softmax(const float* z, int64_t n) {
  double m = z[0];
  for (int64_t v = 1; v < n; ++v) m = std::max(m, static_cast<double>(z[v]));
  double s = 0;
  for (int64_t v = 0; v < n; ++v) s += std::exp(z[v] - m);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t v = 0; v < n; ++v) out[static_cast<size_t>(v)] = z[v] - m - std::log(s);
  return out;
}

/// Adds v' = v + alpha * ||v||_2 * eps (in double, rounded once) to every KV head and every prefix position u with
/// sinks <= u < P - recent of one layer's cache; eps from perturbation_noise(seed, draw, example, layer, h, u).
inline void perturb_layer_plainly(rkv::LayerKV& kv, int64_t P, int64_t sinks, int64_t recent, double alpha,
                                  uint64_t seed, uint32_t draw, uint32_t example, uint32_t layer) {
  std::vector<float> eps(static_cast<size_t>(kv.head_dim));
  for (int64_t h = 0; h < kv.n_kv_heads; ++h)
    for (int64_t u = 0; u < P; ++u) {
      if (u < sinks || u >= P - recent) continue;
      float* v = kv.v_at(h, u);
      double n2 = 0;
      for (int64_t k = 0; k < kv.head_dim; ++k) n2 += double(v[k]) * double(v[k]);
      rkv::perturbation_noise(seed, draw, example, layer, static_cast<uint32_t>(h), static_cast<uint32_t>(u),
                              static_cast<int>(kv.head_dim), eps.data());
      for (int64_t k = 0; k < kv.head_dim; ++k) v[k] = static_cast<float>(double(v[k]) + alpha * std::sqrt(n2) * eps[k]);
    }
}

/// The naive method's logits: prefill(prefix) on a fresh cache, then (when layer >= 0) layer `layer` perturbed with
/// perturb_layer_plainly, then prefill(window) through all L layers at positions P.. with logits for every window row,
/// float32 [n_w, V].
inline std::vector<float> naive_window_logits(const rkv::Model& m, const std::vector<int32_t>& tokens, int64_t P,
                                              int64_t layer, double alpha, uint64_t seed, uint32_t example,
                                              int64_t sinks, int64_t recent) {
  const int64_t n_w = static_cast<int64_t>(tokens.size()) - P;
  const std::vector<int32_t> prefix(tokens.begin(), tokens.begin() + P), window(tokens.begin() + P, tokens.end());
  rkv::cpu::Workspace ws;
  rkv::KVCache cache = rkv::cpu::make_cache(m, P + n_w);
  rkv::cpu::prefill(m, prefix, 0, cache, ws, rkv::cpu::LogitsFor::None);
  if (layer >= 0)
    perturb_layer_plainly(cache.layers[static_cast<size_t>(layer)], P, sinks, recent, alpha, seed, 0, example,
                          static_cast<uint32_t>(layer));
  return rkv::cpu::prefill(m, window, P, cache, ws, rkv::cpu::LogitsFor::All);
}

/// KL(P_t || Q_t) per row between two [rows, V] logit arrays, through plain_log_softmax.
inline std::vector<double> plain_kl_rows(const std::vector<float>& ref, const std::vector<float>& q, int64_t V) {
  const int64_t rows = static_cast<int64_t>(ref.size()) / V;
  std::vector<double> kl(static_cast<size_t>(rows));
  for (int64_t t = 0; t < rows; ++t) {
    const auto lp = plain_log_softmax(ref.data() + t * V, V), lq = plain_log_softmax(q.data() + t * V, V);
    double s = 0;
    for (size_t v = 0; v < lp.size(); ++v) s += std::exp(lp[v]) * (lp[v] - lq[v]);
    kl[static_cast<size_t>(t)] = s;
  }
  return kl;
}

/// The naive method end to end: KL between the intact and the layer-perturbed naive runs, per window row.
inline std::vector<double> naive_window_kl(const rkv::Model& m, const std::vector<int32_t>& tokens, int64_t P,
                                           int64_t layer, double alpha, uint64_t seed, uint32_t example,
                                           int64_t sinks, int64_t recent) {
  return plain_kl_rows(naive_window_logits(m, tokens, P, -1, 0, 0, 0, 0, 0),
                       naive_window_logits(m, tokens, P, layer, alpha, seed, example, sinks, recent),
                       m.config.vocab_size);
}

/// Relative difference |a - b| / max(|a|, |b|) (0 when both are 0).
inline double rel_diff(double a, double b) {
  const double m = std::max(std::fabs(a), std::fabs(b));
  return m == 0 ? 0 : std::fabs(a - b) / m;
}

}  // namespace rkv_test
