// The host's profiling service "rkv.profiler/1" (abi/ripplekv/plugin.h) for signal plugins (docs/ARCHITECTURE.md
// "perturbation_kl" and "layer_local"), over any backend's ProfilerSession (backend/backend.hpp, which states the
// formulas: norm-scaled value noise keyed (seed, draw, i, l, h, u), the window rerun from layer l, KL in nats).
//
// This class holds what the service adds to a session: the calibration examples (example i = prefix of P tokens +
// window of n_w tokens), the checks of every argument, the values_view() staging buffers (a CPU float32 copy the
// plugin may write; the writes reach the backend's cache before the next call that reads it), and the C function
// table whose functions turn exceptions into statuses.
//
// Thread rules: a Profiler is used from one thread at a time (the signal's profile() call). The backend and its model
// must outlive it.
#pragma once
#include <ripplekv/plugin.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "cache/selection.hpp"

namespace rkv {

class Profiler {
 public:
  /// `examples` holds N token sequences of exactly prefix_tokens + window_tokens ids each (copied). `protect` is the
  /// base scorer's protected positions (sinks first, then the most recent), clamped to the prefix; they are never
  /// perturbed. Throws rkv::InputError for N = 0, P < 1, n_w < 1, an example of another length or with a token id
  /// outside the vocabulary, a head dimension that is not a multiple of 4, more than 65535 layers or KV heads (the
  /// noise key limits), or negative sinks/recent.
  Profiler(Backend& backend, std::vector<std::vector<int32_t>> examples, int64_t prefix_tokens, int64_t window_tokens,
           const ProtectedSpec& protect);
  /// The same on a CPU backend of `model` that the Profiler owns (tests and tools).
  Profiler(const Model& model, std::vector<std::vector<int32_t>> examples, int64_t prefix_tokens,
           int64_t window_tokens, const ProtectedSpec& protect);
  ~Profiler();
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
  /// The backend's session (for tests and tools that look inside a particular backend).
  const ProfilerSession& session() const { return *session_; }

  /// Prefills example i's prefix and runs its reference window. Discards any change of the previous example.
  /// Throws rkv::InputError when i is outside [0, N).
  void prepare_example(int64_t i);

  /// Called at the start of prepare_example(i) with i (after its argument check), for progress; may be empty.
  std::function<void(int64_t)> on_prepare_example;

  /// Adds the norm-scaled noise to layer `layer`'s unprotected prefix values; a live values_view() of the layer
  /// shows the result. Throws rkv::InputError before prepare_example(), for a layer outside [0, L), negative or
  /// non-finite alpha, or a draw outside [0, 65535].
  void perturb_values(int64_t layer, double alpha, uint64_t seed, int64_t draw);

  /// A writable float32 [H_kv, P, d] contiguous copy of layer `layer`'s prefix values, for custom perturbations. Writes
  /// reach the cache before the next window_kl / attention_output / perturb_values / values_view call; restore()
  /// undoes them and invalidates the pointer. Throws rkv::InputError before prepare_example() or for a bad layer.
  float* values_view(int64_t layer);

  /// values_view() as a DLTensor (what the service's values_view fills): compact float32 [H_kv, P, d] on the CPU; the
  /// shape array belongs to the Profiler.
  void values_view_tensor(int64_t layer, DLTensor* out);

  /// True when the base scorer protects prefix position `position` (never perturbed); false outside [0, P).
  bool is_protected(int64_t position) const;

  /// KL(P_{i,t} || Q_t) in nats for each window row t (double [n_w]), rerunning the window from layer `from_layer`
  /// upward on the current cache. Throws rkv::InputError before prepare_example(), for a layer outside [0, L), or when
  /// a layer below `from_layer` is changed (its effect would be missed: start at or below it).
  std::vector<double> window_kl(int64_t from_layer);

  /// Layer `layer`'s attention output after o_proj for the window rows, float32 [n_w, D], with the reference hidden
  /// states entering the layer as input, on its reference values (perturbed = false) or its current ones (true).
  /// Throws rkv::InputError before prepare_example() or for a bad layer.
  std::vector<float> attention_output(int64_t layer, bool perturbed);

  /// Puts back layer `layer`'s values as they were before perturb_values()/values_view() (bit-exact); a no-op for an
  /// unchanged layer. Throws rkv::InputError for a bad layer.
  void restore(int64_t layer);

 private:
  void init(const ProtectedSpec& protect);
  void require_example(const char* what) const;
  void check_layer(int64_t layer, const char* what) const;
  /// Writes every live values_view() buffer into the backend's cache.
  void flush_views();

  std::unique_ptr<Backend> owned_backend_;  ///< set by the Model constructor only
  Backend& backend_;
  const Model& model_;
  std::vector<std::vector<int32_t>> examples_;
  int64_t P_ = 0, n_w_ = 0;
  std::vector<char> protected_;  ///< [P]
  std::unique_ptr<ProfilerSession> session_;
  std::vector<std::vector<float>> views_;  ///< per layer: values_view() staging buffer, empty when none is live
  int64_t current_ = -1;
  int64_t view_shape_[3] = {0, 0, 0};
  rkv_profiler_v1 abi_{};
};

}  // namespace rkv
