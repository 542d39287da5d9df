// The KV cache on the device: per layer, keys (after RoPE) and values in the model's storage type and each entry's
// original position int32, in exactly rkv::LayerKV's two layouts (cache/kv_cache.hpp): uniform [H_kv, capacity, d]
// (after prefill and after a compaction that keeps the same count in every head), or per head (after per-head
// budgets): head h's entries are rows [head_begin[h], head_begin[h] + head_lengths[h]) of one buffer, ragged and
// physically compact. A layer is allocated at its own size; after compaction its storage is reallocated at exactly the
// rows kept (compression.hpp), so the memory is really freed. The per-head metadata lives on the host (the kernels
// are launched once per KV head on such a layer, each on its own rows).
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
  int64_t capacity = 0;  ///< uniform layout: positions allocated per head (unused by the per-head layout)
  int64_t length = 0;    ///< uniform: positions in use per head (<= capacity); per head: the longest head
  DType dtype = DType::F32;
  DeviceBuffer k;        ///< dtype, uniform: [n_kv_heads, capacity, head_dim]; per head: [head_begin.back(), head_dim]
  DeviceBuffer v;        ///< as k
  DeviceBuffer pos;      ///< int32, rows as k: each entry's original position (empty: not tracked)
  std::vector<int64_t> head_lengths;  ///< per-head layout: [n_kv_heads] entries in use; empty: uniform layout
  std::vector<int64_t> head_begin;    ///< per-head layout: [n_kv_heads + 1] first row of each head's region

  size_t elem_bytes() const { return kernels::dtype_size(dtype); }
  bool has_positions() const { return !pos.empty(); }
  bool per_head() const { return !head_lengths.empty(); }
  /// Entries held by KV head h.
  int64_t head_length(int64_t h) const { return per_head() ? head_lengths[static_cast<size_t>(h)] : length; }
  /// Row of k/v/pos where head h's entries start.
  int64_t head_row(int64_t h) const { return per_head() ? head_begin[static_cast<size_t>(h)] : h * capacity; }
  /// Rows reserved for head h.
  int64_t head_capacity(int64_t h) const {
    return per_head() ? head_begin[static_cast<size_t>(h) + 1] - head_begin[static_cast<size_t>(h)] : capacity;
  }
  /// Entries held over all KV heads.
  int64_t entries() const {
    int64_t n = 0;
    for (int64_t h = 0; h < n_kv_heads; ++h) n += head_length(h);
    return n;
  }
  /// Bytes held by keys, values and positions (what results report as kv_bytes).
  size_t bytes() const { return k.bytes() + v.bytes() + pos.bytes(); }
  /// Bytes of the entries in use, without capacity reserved for growth (rkv::LayerKV::bytes_in_use).
  size_t bytes_in_use() const {
    return static_cast<size_t>(entries()) *
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

/// A copy of `layer` on the device in the same layout with room for `spare` more entries in every head (uniform:
/// capacity = length + spare; per head: each region head_length + spare rows). Device-to-device copies on the stream.
DeviceLayerKV copy_layer(Context& ctx, const DeviceLayerKV& layer, int64_t spare);

/// Grows a uniform `layer` to at least `capacity` positions per head, keeping every entry (reallocates and copies); a
/// per-head layer gets room for (capacity - length) more entries in every head.
void reserve_layer(Context& ctx, DeviceLayerKV& layer, int64_t capacity);

/// Makes sure every KV head can take `extra` more entries, growing by rkv::growth_rows() (as rkv::reserve_extra).
void reserve_extra(Context& ctx, DeviceLayerKV& layer, int64_t extra);

/// A host float32 copy of a device layer's entries (bfloat16 widened exactly) in the same layout: uniform with
/// capacity = length, or per head with each region exactly its length.
LayerKV download_layer(Context& ctx, const DeviceLayerKV& layer);

/// A device copy of a host layer (either layout) in `dtype` (float32 rounded to nearest even for BF16); a uniform
/// layer gets capacity = max(length, `capacity`), a per-head layer (max(length, capacity) - length) spare rows per
/// head.
DeviceLayerKV upload_layer(Context& ctx, const LayerKV& layer, DType dtype, int64_t capacity = 0);

}  // namespace rkv::RKV_CUDA_NS
