// The perturbation_kl profiling operations on the device: the CUDA counterpart of the host's "rkv.profiler/1"
// service (abi/ripplekv/plugin.h; docs/ARCHITECTURE.md "perturbation_kl"), for a host that wires it into the service table.
//
// For calibration example i = a prefix of P tokens + a window of n_w tokens:
//  prepare_example: prefill the prefix once into a device cache (capacity P + n_w); run the reference window through
//    every layer, keeping the hidden states entering each layer [L, n_w, D], the attention outputs after o_proj and
//    the reference logits [n_w, V] (all on the device); cut every layer back to the P prefix positions.
//  perturb_values(l, alpha, seed, draw): v' = v + alpha ||v|| eps on every KV head and unprotected prefix position of
//    layer l (kernels/perturb_row.hpp), keeping a device copy of the values for restore().
//  window_kl(from): rerun the window from layer `from` upward, from the reference hidden state entering that layer,
//    on the current caches; KL(P_t || Q_t) per window position (kernels::kl_rows), float64 on the host.
//  attention_output(l, perturbed): layer l's window attention output after o_proj, float32 [n_w, D].
//  restore(l): undo perturb_values() and writes through values().
// The window code path is the same for the reference and every rerun, so alpha = 0 gives exactly zero.
//
// Thread rules: one caller at a time; the model is shared read-only.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/cuda/forward.hpp"
#include "cache/selection.hpp"

namespace rkv::RKV_CUDA_NS {

class DeviceProfiler {
 public:
  /// `protect` are the base scorer's protected positions (sinks, recent) over the P prefix positions; they are never
  /// perturbed. Throws rkv::InputError for P < 1 or n_w < 1.
  DeviceProfiler(const DeviceModel& model, int64_t prefix_tokens, int64_t window_tokens, const ProtectedSpec& protect);

  int64_t prefix_tokens() const { return P_; }
  int64_t window_tokens() const { return n_w_; }

  /// Example `example`'s tokens: P prefix tokens followed by n_w window tokens (rkv::InputError for another length
  /// or a token outside the vocabulary). Restores any perturbed layer first.
  void prepare_example(int64_t example, const std::vector<int32_t>& tokens);
  /// Perturbs layer `layer`'s values (see the top of this file); draws accumulate until restore().
  void perturb_values(int64_t layer, double alpha, uint64_t seed, int64_t draw);
  /// Nonzero when the base scorer protects prefix position `position`.
  bool is_protected(int64_t position) const;
  /// KL(P_{i,t} || Q_t) in nats for every window position t, running the window from `from_layer` upward.
  std::vector<double> window_kl(int64_t from_layer);
  /// The window's attention output after o_proj at `layer`, float32 [n_w, D], on the reference cache
  /// (perturbed = false) or the current one.
  std::vector<float> attention_output(int64_t layer, bool perturbed);
  /// Undoes perturb_values() and writes through values() on `layer` (no-op when untouched).
  void restore(int64_t layer);
  /// The device values of `layer`, [H_kv, capacity, d] in the model's storage type, for custom perturbations of
  /// positions [0, P): the current contents are saved for restore() first.
  DeviceLayerKV& values(int64_t layer);

 private:
  void check_layer(int64_t layer) const;
  void save_values(int64_t layer);
  /// Runs the window through layers [from, to) from the reference hidden state entering `from`, leaving the result
  /// in x_; every touched layer is cut back to P afterwards.
  void run_window(int64_t from, int64_t to, float* attn_output_of_from);

  const DeviceModel* model_;
  int64_t P_, n_w_;
  int64_t example_ = -1;
  bool recording_ = false;  ///< prepare_example's reference run is in progress
  std::vector<uint8_t> protected_;
  DeviceBuffer protected_mask_;  ///< uint8 [P]
  DeviceBuffer window_mask_;     ///< uint8 [P]: protected, or before a sliding-window layer's window (not held)
  DeviceKVCache cache_;
  DeviceWorkspace ws_;
  DeviceBuffer x_, positions_, ref_hidden_, ref_attn_, ref_logits_, kl_, o_;
  std::vector<DeviceBuffer> saved_values_;  ///< per layer; empty when the layer is untouched
};

}  // namespace rkv::RKV_CUDA_NS
