// The KV cache on the device: per layer, keys (after RoPE) and values [H_kv, capacity, d] in the model's storage type
// and each entry's original position int32 [H_kv, capacity], exactly rkv::LayerKV's layout (cache/kv_cache.hpp). A layer is allocated at its own size; after compaction its
// storage is reallocated at [H_kv, b_l, d] (compression.hpp), so the memory is really freed.
//
// Thread rules: as the owning Context (context.hpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cuda/context.hpp"
#include "backend/cuda/kernels/kernels.hpp"
#include "cache/kv_cache.hpp"

namespace rkv::RKV_CUDA_NS {

using kernels::DType;

struct DeviceLayerKV {
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t capacity = 0;  ///< positions allocated per head
  int64_t length = 0;    ///< positions in use per head (<= capacity)
  DType dtype = DType::F32;
  DeviceBuffer k;        ///< dtype [n_kv_heads, capacity, head_dim]
  DeviceBuffer v;        ///< dtype [n_kv_heads, capacity, head_dim]
  DeviceBuffer pos;      ///< int32 [n_kv_heads, capacity]: each entry's original position (empty: not tracked)

  size_t elem_bytes() const { return kernels::dtype_size(dtype); }
  bool has_positions() const { return !pos.empty(); }
  /// Bytes held by keys, values and positions (what results report as kv_bytes).
  size_t bytes() const { return k.bytes() + v.bytes() + pos.bytes(); }
  /// Bytes of the entries in use, without capacity reserved for growth (rkv::LayerKV::bytes_in_use).
  size_t bytes_in_use() const {
    return static_cast<size_t>(length * n_kv_heads) *
           (2 * static_cast<size_t>(head_dim) * elem_bytes() + (has_positions() ? sizeof(int32_t) : 0));
  }
};

struct DeviceKVCache {
  std::vector<DeviceLayerKV> layers;
  size_t bytes() const {
    size_t b = 0;
    for (const auto& l : layers) b += l.bytes();
    return b;
  }
  size_t bytes_in_use() const {
    size_t b = 0;
    for (const auto& l : layers) b += l.bytes_in_use();
    return b;
  }
};

/// An empty cache of n_layers layers [n_kv_heads, capacity, head_dim] of `dtype`, length 0.
DeviceKVCache build_device_cache(Context& ctx, int64_t n_layers, int64_t n_kv_heads, int64_t head_dim,
                                 int64_t capacity, DType dtype);

/// Grows `layer` to at least `capacity` positions per head, keeping positions [0, length) (reallocates and copies).
void reserve_layer(Context& ctx, DeviceLayerKV& layer, int64_t capacity);

/// A host float32 copy of positions [0, length) of a device layer (bfloat16 widened exactly); capacity = length.
LayerKV download_layer(Context& ctx, const DeviceLayerKV& layer);

/// A device copy of a host layer in `dtype` (float32 rounded to nearest even for BF16), capacity = max(length,
/// `capacity`).
DeviceLayerKV upload_layer(Context& ctx, const LayerKV& layer, DType dtype, int64_t capacity = 0);

}  // namespace rkv::RKV_CUDA_NS
