// The perturbation profiler on the CPU forward pass: the CPU implementation of rkv::ProfilerSession
// (backend/backend.hpp; the C service table "rkv.profiler/1" is built over it by runner/profile/profiler.hpp).
//
// For the example set up by prepare_example (prefix positions 0..P-1, window positions P..P+n_w-1) it keeps
//   x_{i,l}  the window's hidden states entering layer l, float32 [n_w, D], for l = 0..L (x_{i,L}: the final ones);
//   P_{i,t}  the reference next-token distribution at window row t, as log-softmax of the fp32 logits, in double.
// After every window run the cache of each layer is truncated back to P entries, so the prefix cache is all it holds
// between calls.
//
// perturb_values(l, alpha, seed, draw) adds norm-scaled noise to layer l's prefix values,
//   v'[h, u] = v[h, u] + alpha * ||v[h, u]||_2 * eps,  eps ~ N(0, I_d) = perturbation_noise(seed, draw, i, l, h, u)
// on every KV head h and every prefix position u the base scorer does not protect (core/philox.hpp: Philox4x32-10 +
// Box-Muller), computed in double and rounded to float32 once. alpha = 0 leaves the values bit-identical.
// window_kl(l) reruns only the window and only layers l..L-1, starting from the saved x_{i,l} (layers below l see
// an untouched cache, so their output is x_{i,l} exactly), and returns per window row
//   KL(P_{i,t} || Q_t) = sum_v p_v (log p_v - log q_v)   in nats, in double
// with log q = log-softmax of the rerun's fp32 logits. The reference run and every rerun go through the same code
// (same buffers, same layer calls, same thread count), so an unperturbed cache gives exactly 0.
// window_kl(0) after perturbing layer l is the naive method (the window through all L layers).
//
// Thread rules: one thread at a time. Matrix products and element-wise loops run on the CPU backend's process-wide
// thread count (backend/cpu/threads.hpp); at a fixed thread count every result is bit-reproducible. The model must
// outlive the session.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cpu/forward.hpp"

namespace rkv {

/// Log-softmax of fp32 logits in double: out[v] = z[v] - (m + log sum_w exp(z[w] - m)), m = max z. Deterministic
/// (serial sums). out has n entries.
void log_softmax_f64(const float* z, int64_t n, double* out);

namespace cpu {

class CpuProfilerSession final : public ProfilerSession {
 public:
  /// Throws rkv::InputError for P < 1, n_w < 1, negative sinks/recent, a head dimension that is not a multiple of 4
  /// or more than 65535 layers, KV heads or d/4 (the noise key's limits).
  CpuProfilerSession(const Model& model, int64_t prefix_tokens, int64_t window_tokens, const ProtectedSpec& protect);

  int64_t prefix_tokens() const override { return P_; }
  int64_t window_tokens() const override { return n_w_; }
  void prepare_example(int64_t example, const std::vector<int32_t>& tokens) override;
  void perturb_values(int64_t layer, double alpha, uint64_t seed, int64_t draw) override;
  std::vector<double> window_kl(int64_t from_layer) override;
  std::vector<float> attention_output(int64_t layer, bool perturbed) override;
  void restore(int64_t layer) override;
  std::vector<float> read_values(int64_t layer) override;
  void write_values(int64_t layer, const std::vector<float>& values) override;
  bool is_changed(int64_t layer) const override;

  /// The prefix cache of the current example with the changes made so far (every layer holds P entries between
  /// calls). For tests and tools.
  const KVCache& cache() const { return cache_; }
  /// The reference log-probabilities log P_{i,t}(v), double [n_w, V], of the current example.
  const std::vector<double>& reference_log_probs() const { return ref_logp_; }
  /// The reference hidden states entering layer l (l = 0..L), float32 [n_w, D], of the current example.
  /// Throws rkv::InputError for l outside [0, L].
  const float* reference_hidden(int64_t layer) const;

 private:
  void require_example(const char* what) const;
  void check_layer(int64_t layer, const char* what) const;
  void save_layer(int64_t layer);
  void copy_prefix_values(const LayerKV& kv, float* dst) const;
  void write_prefix_values(const float* src, LayerKV& kv) const;
  /// Runs the window rows x_ through layers [from, to) on the cache, truncating each layer back to P afterwards.
  void run_window_layers(int64_t from, int64_t to, const LayerHooks* hooks);

  const Model& model_;
  int64_t P_ = 0, n_w_ = 0;
  std::vector<char> protected_;  ///< [P]
  std::vector<char> unheld_or_protected_;  ///< [P] protected, or before a sliding-window layer's window
  KVCache cache_;
  Workspace ws_;
  std::vector<int64_t> positions_;  ///< P .. P + n_w - 1
  std::vector<int64_t> rows_;       ///< 0 .. n_w - 1
  std::vector<float> x_;            ///< [n_w, D] the window's residual rows (one buffer for every run)
  std::vector<float> hidden_;       ///< [(L + 1), n_w, D]
  std::vector<double> ref_logp_;    ///< [n_w, V]
  std::vector<double> ref_p_;       ///< [n_w, V] exp(ref_logp_)
  std::vector<std::vector<float>> saved_;  ///< per layer: [H_kv, P, d] original values, empty when unchanged
  int64_t current_ = -1;
};

}  // namespace cpu
}  // namespace rkv
