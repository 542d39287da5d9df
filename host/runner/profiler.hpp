// The host's profiling service "rkv.profiler/1" (abi/ripplekv/plugin.h) over the CPU forward pass, for signal
// plugins (DESIGN.md "perturbation_kl" and "layer_local").
//
// Calibration example i = a prefix of P tokens (positions 0..P-1) + a window of n_w tokens (positions P..P+n_w-1).
// prepare_example(i) prefills the prefix once into a KV cache, then runs the reference window over every layer on the
// intact cache, keeping
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
// Thread rules: a Profiler is used from one thread at a time (the signal's profile() call). Its matrix products and
// element-wise loops run on the CPU backend's process-wide thread count (backend/cpu/threads.hpp); at a fixed thread
// count every result is bit-reproducible. The model must outlive the Profiler.
#pragma once
#include <ripplekv/plugin.h>

#include <cstdint>
#include <vector>

#include "backend/cpu/forward.hpp"
#include "cache/kv_cache.hpp"
#include "cache/selection.hpp"
#include "model/model.hpp"

namespace rkv {

class Profiler {
 public:
  /// `examples` holds N token sequences of exactly prefix_tokens + window_tokens ids each (copied). `protect` is the
  /// base scorer's protected positions (sinks first, then the most recent), clamped to the prefix.
  /// Throws rkv::InputError for N = 0, P < 1, n_w < 1, an example of another length or with a token id outside the
  /// vocabulary, a head dimension that is not a multiple of 4, more than 65535 layers or KV heads (the noise key
  /// limits), or negative sinks/recent.
  Profiler(const Model& model, std::vector<std::vector<int32_t>> examples, int64_t prefix_tokens,
           int64_t window_tokens, const ProtectedSpec& protect);
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  /// The service table handed to signal plugins (HostServices::set_service(RKV_SERVICE_PROFILER_V1, abi())). Its
  /// functions turn exceptions into statuses (InputError -> RKV_ERROR_INVALID_ARGUMENT, Cancelled ->
  /// RKV_ERROR_CANCELLED, bad_alloc -> RKV_ERROR_OUT_OF_MEMORY, else RKV_ERROR_INTERNAL) with the message sent to the
  /// caller's diagnostics sink. Valid while this Profiler lives.
  const rkv_profiler_v1* abi() const { return &abi_; }

  int64_t n_layers() const { return model_.config.n_layers; }
  int64_t n_examples() const { return static_cast<int64_t>(examples_.size()); }
  int64_t prefix_tokens() const { return P_; }
  int64_t window_tokens() const { return n_w_; }
  /// The example prepare_example() last set up, or -1.
  int64_t current_example() const { return current_; }

  /// Prefills example i's prefix and runs its reference window (see the top of this file). Discards any perturbation
  /// of the previous example. Throws rkv::InputError when i is outside [0, N).
  void prepare_example(int64_t i);

  /// Adds the norm-scaled noise to layer `layer`'s unprotected prefix values (see the top of this file); the first
  /// change to a layer keeps a copy of its values for restore(). Throws rkv::InputError before prepare_example(), for
  /// a layer outside [0, L), negative or non-finite alpha, or a draw outside [0, 65535].
  void perturb_values(int64_t layer, double alpha, uint64_t seed, int64_t draw);

  /// A writable float32 [H_kv, P, d] contiguous copy of layer `layer`'s prefix values, for custom perturbations. Writes
  /// reach the cache before the next window_kl / attention_output / perturb_values call; restore() undoes them and
  /// invalidates the pointer. Throws rkv::InputError before prepare_example() or for a bad layer.
  float* values_view(int64_t layer);

  /// values_view() as a DLTensor (what the service's values_view fills): compact float32 [H_kv, P, d] on the CPU; the
  /// shape array belongs to the Profiler.
  void values_view_tensor(int64_t layer, DLTensor* out);

  /// True when the base scorer protects prefix position `position` (never perturbed); false outside [0, P).
  bool is_protected(int64_t position) const;

  /// KL(P_{i,t} || Q_t) in nats for each window row t (double [n_w]), rerunning the window from layer `from_layer`
  /// upward on the current cache. Throws rkv::InputError before prepare_example(), for a layer outside [0, L), or when
  /// a layer below `from_layer` is perturbed (its effect would be missed: start at or below it).
  std::vector<double> window_kl(int64_t from_layer);

  /// Layer `layer`'s attention output after o_proj for the window rows, float32 [n_w, D], with the reference hidden
  /// states x_{i,layer} as its input, on the reference values of that layer (perturbed = false) or on its current,
  /// possibly perturbed ones (true). Both use the same code path, so an unperturbed layer gives identical outputs.
  /// Throws rkv::InputError before prepare_example() or for a bad layer.
  std::vector<float> attention_output(int64_t layer, bool perturbed);

  /// Puts back layer `layer`'s values as they were before perturb_values()/values_view() (bit-exact); a no-op for an
  /// unchanged layer. Throws rkv::InputError for a bad layer.
  void restore(int64_t layer);

  /// The prefix cache of the current example (every layer holds P entries between calls), with the perturbations
  /// made so far; values_view() writes show here only after the next call that flushes them (window_kl,
  /// attention_output, perturb_values, values_view). For tests and tools.
  const KVCache& cache() const { return cache_; }
  /// The reference log-probabilities log P_{i,t}(v), double [n_w, V], of the current example.
  const std::vector<double>& reference_log_probs() const { return ref_logp_; }
  /// The reference hidden states entering layer l (l = 0..L), float32 [n_w, D], of the current example.
  const float* reference_hidden(int64_t layer) const;

 private:
  void require_example(const char* what) const;
  void check_layer(int64_t layer, const char* what) const;
  /// Keeps a copy of layer l's prefix values (once per perturbation) for restore().
  void save_layer(int64_t layer);
  /// Copies every live values_view() buffer into the cache.
  void flush_views();
  void copy_prefix_values(const LayerKV& kv, float* dst) const;
  void write_prefix_values(const float* src, LayerKV& kv) const;
  /// Runs the window rows x_ through layers [from, to) on the cache, truncating each layer back to P afterwards.
  void run_window_layers(int64_t from, int64_t to, const cpu::LayerHooks* hooks);

  const Model& model_;
  std::vector<std::vector<int32_t>> examples_;
  int64_t P_ = 0, n_w_ = 0;
  std::vector<char> protected_;  ///< [P]
  KVCache cache_;
  cpu::Workspace ws_;
  std::vector<int64_t> positions_;  ///< P .. P + n_w - 1
  std::vector<int64_t> rows_;       ///< 0 .. n_w - 1
  std::vector<float> x_;            ///< [n_w, D] the window's residual rows (one buffer for every run)
  std::vector<float> hidden_;       ///< [(L + 1), n_w, D]
  std::vector<double> ref_logp_;    ///< [n_w, V]
  std::vector<double> ref_p_;       ///< [n_w, V] exp(ref_logp_)
  std::vector<std::vector<float>> saved_;  ///< per layer: [H_kv, P, d] original values, empty when unchanged
  std::vector<std::vector<float>> views_;  ///< per layer: values_view() staging buffer, empty when none is live
  int64_t current_ = -1;
  int64_t view_shape_[3] = {0, 0, 0};
  rkv_profiler_v1 abi_{};
};

/// Log-softmax of fp32 logits in double: out[v] = z[v] - (m + log sum_w exp(z[w] - m)), m = max z. Deterministic
/// (serial sums). out has n entries.
void log_softmax_f64(const float* z, int64_t n, double* out);

}  // namespace rkv
