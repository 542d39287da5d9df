// The CPU implementation of rkv::Backend (backend/backend.hpp): float32, OpenBLAS, the reference every other backend
// is checked against. A thin layer over forward.hpp (the layer-by-layer forward pass), cache/compaction.hpp,
// cache/rerotation.hpp and profiler_session.hpp.
//
// Scorer statistics are fused into the prefill: forward_layer adds each attention probability row to the requested
// AttentionStatsAccumulators while the attention runs (LayerHooks::stats), so H2O's cumulative sums cost column sums
// only, not a second Q K^T over the prompt.
//
// Thread rules: as Backend. The thread count is process-wide (threads.hpp), set by make_backend().
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cpu/forward.hpp"
#include "cache/packed_kv.hpp"

namespace rkv::cpu {

/// A cache in host memory: one LayerKV per layer (cache/kv_cache.hpp); a layer a codec stores (encode_layer) keeps
/// its packed entries in `packed[l]` and only its float32 tail in `kv.layers[l]` (cache/packed_kv.hpp).
class CpuCache final : public BackendCache {
 public:
  explicit CpuCache(KVCache c) : kv(std::move(c)) {}
  int64_t n_layers() const override { return static_cast<int64_t>(kv.layers.size()); }
  int64_t length(int64_t layer) const override;
  int64_t head_length(int64_t layer, int64_t head) const override;
  size_t bytes() const override;
  size_t bytes_in_use() const override;
  int64_t shared_source(int64_t layer) const override;
  /// The packed part of `layer`, or null when the layer is all float32.
  PackedLayer* packed_layer(int64_t layer);
  const PackedLayer* packed_layer(int64_t layer) const;
  KVCache kv;
  std::vector<PackedLayer> packed;  ///< [L] once a layer is encoded (PackedLayer::packed() false for the others); else empty
  std::vector<int64_t> sources;     ///< [L] once a layer is shared: the layer each one reads (itself when not shared)
};

class CpuBackend final : public Backend {
 public:
  /// `model` must outlive the backend.
  explicit CpuBackend(const Model& model) : model_(model) {}

  std::string kind() const override { return "cpu"; }
  std::string compute_dtype() const override { return "f32"; }
  std::string description() const override;
  const Model& model() const override { return model_; }

  PrefillResult prefill(const std::vector<int32_t>& tokens, const PrefillRequest& request) override;
  std::vector<float> extend(BackendCache& cache, const std::vector<int32_t>& tokens, int64_t start_pos,
                            LogitsFor which, const ExtendCapture& capture = {},
                            ExtendObservation* observed = nullptr) override;
  std::unique_ptr<BackendCache> clone_selected(const BackendCache& cache,
                                               const std::vector<const Selection*>& selections) override;
  std::unique_ptr<BackendCache> clone(const BackendCache& cache) override;
  LayerKV download_layer(const BackendCache& cache, int64_t layer) override;
  std::vector<int32_t> layer_positions(const BackendCache& cache, int64_t layer) override;
  TensorView layer_view(const BackendCache& cache, int64_t layer, bool values) override;
  void compact_layer(BackendCache& cache, int64_t layer, const Selection& sel) override;
  void reserve(BackendCache& cache, int64_t extra) override;
  void truncate(BackendCache& cache, int64_t length) override;
  std::vector<float> value_output_norms(const BackendCache& cache, int64_t layer) override;
  void rerotate_layer(BackendCache& cache, int64_t layer) override;
  void encode_layer(BackendCache& cache, int64_t layer, const CodecSpec& codec) override;
  void encode_layer_classes(BackendCache& cache, int64_t layer, const CodecSpec& codec,
                            const std::vector<uint8_t>& entry_class) override;
  void share_layer(BackendCache& cache, int64_t layer, int64_t source) override;
  std::unique_ptr<ProfilerSession> new_profiler(int64_t prefix_tokens, int64_t window_tokens,
                                                const ProtectedSpec& protect) override;
  void begin_phase(const std::string& name) override;
  void end_phase() override;
  std::vector<PhaseMemoryRecord> memory_phases() const override { return phases_; }

 private:
  const Model& model_;
  Workspace ws_;
  /// One layer's step of extend() on `cc`: forward_layer on its own entries (forward_packed_layer over the codes and
  /// the tail, then pack_oldest, when a codec stores it), or forward_shared_layer on its source's.
  void extend_layer(CpuCache& cc, int64_t layer, float* x, int64_t n, const int64_t* positions,
                    const LayerHooks* hooks);
  std::vector<std::string> open_phases_;
  std::vector<PhaseMemoryRecord> phases_;
};

/// The CpuCache behind a BackendCache made by a CpuBackend. Throws rkv::InputError for a cache of another backend.
CpuCache& cpu_cache(BackendCache& cache);
const CpuCache& cpu_cache(const BackendCache& cache);

}  // namespace rkv::cpu
