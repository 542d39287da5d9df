#include "backend/cuda/device_cache.hpp"

#include <algorithm>

#include "core/errors.hpp"
#include "model/half.hpp"

namespace rkv::RKV_CUDA_NS {

DeviceKVCache build_device_cache(Context& ctx, int64_t n_layers, int64_t n_kv_heads, int64_t head_dim,
                                 int64_t capacity, DType dtype) {
  DeviceKVCache c;
  c.layers.resize(static_cast<size_t>(n_layers));
  for (auto& l : c.layers) {
    l.n_kv_heads = n_kv_heads;
    l.head_dim = head_dim;
    l.dtype = dtype;
    l.capacity = capacity;
    const size_t bytes = static_cast<size_t>(n_kv_heads * capacity * head_dim) * l.elem_bytes();
    l.k = DeviceBuffer(ctx, bytes);
    l.v = DeviceBuffer(ctx, bytes);
    l.pos = DeviceBuffer(ctx, static_cast<size_t>(n_kv_heads * capacity) * sizeof(int32_t));
  }
  return c;
}

namespace {

/// Storage in the layout of `like` with room for `spare` more entries per head (uniform capacity, or per-head
/// regions), with a positions buffer when `positions`; nothing copied.
DeviceLayerKV empty_like(Context& ctx, const DeviceLayerKV& like, int64_t spare, bool positions) {
  DeviceLayerKV out;
  out.n_kv_heads = like.n_kv_heads;
  out.head_dim = like.head_dim;
  out.dtype = like.dtype;
  out.length = like.length;
  int64_t rows = 0;
  if (like.per_head()) {
    out.head_lengths = like.head_lengths;
    out.head_begin.assign(static_cast<size_t>(like.n_kv_heads) + 1, 0);
    for (int64_t h = 0; h < like.n_kv_heads; ++h)
      out.head_begin[static_cast<size_t>(h) + 1] = out.head_begin[static_cast<size_t>(h)] + like.head_length(h) + spare;
    rows = out.head_begin.back();
  } else {
    out.capacity = like.length + spare;
    rows = like.n_kv_heads * out.capacity;
  }
  const size_t bytes = static_cast<size_t>(rows * like.head_dim) * like.elem_bytes();
  out.k = DeviceBuffer(ctx, bytes);
  out.v = DeviceBuffer(ctx, bytes);
  if (positions) out.pos = DeviceBuffer(ctx, static_cast<size_t>(rows) * sizeof(int32_t));
  return out;
}

}  // namespace

DeviceLayerKV copy_layer(Context& ctx, const DeviceLayerKV& layer, int64_t spare) {
  DeviceLayerKV out = empty_like(ctx, layer, spare, layer.has_positions());
  const size_t row = static_cast<size_t>(layer.head_dim) * layer.elem_bytes();
  for (int64_t h = 0; h < layer.n_kv_heads; ++h) {
    const size_t n = static_cast<size_t>(layer.head_length(h));
    if (n == 0) continue;
    const size_t from = static_cast<size_t>(layer.head_row(h)), to = static_cast<size_t>(out.head_row(h));
    copy_on_device(ctx, out.k.as<char>() + to * row, layer.k.as<char>() + from * row, n * row);
    copy_on_device(ctx, out.v.as<char>() + to * row, layer.v.as<char>() + from * row, n * row);
    if (layer.has_positions())
      copy_on_device(ctx, out.pos.as<int32_t>() + to, layer.pos.as<int32_t>() + from, n * sizeof(int32_t));
  }
  return out;
}

void reserve_layer(Context& ctx, DeviceLayerKV& layer, int64_t capacity) {
  if (layer.per_head()) {
    reserve_extra(ctx, layer, capacity - layer.length);
    return;
  }
  if (capacity <= layer.capacity) return;
  layer = copy_layer(ctx, layer, capacity - layer.length);  // the old buffers are freed here (cudaFree waits)
}

void reserve_extra(Context& ctx, DeviceLayerKV& layer, int64_t extra) {
  if (extra <= 0) return;
  if (!layer.per_head()) {
    const int64_t need = layer.length + extra;
    if (need > layer.capacity) reserve_layer(ctx, layer, layer.length + growth_rows(layer.length, extra));
    return;
  }
  bool fits = true;
  for (int64_t h = 0; h < layer.n_kv_heads; ++h) fits = fits && layer.head_length(h) + extra <= layer.head_capacity(h);
  if (!fits) layer = copy_layer(ctx, layer, growth_rows(layer.length, extra));
}

LayerKV download_layer(Context& ctx, const DeviceLayerKV& layer) {
  LayerKV out = build_exact_layer(layer.n_kv_heads, layer.head_dim, layer.length, layer.head_lengths,
                                  layer.has_positions());
  const size_t d = static_cast<size_t>(layer.head_dim), es = layer.elem_bytes();
  for (int pass = 0; pass < 2; ++pass) {
    const DeviceBuffer& src = pass == 0 ? layer.k : layer.v;
    for (int64_t h = 0; h < layer.n_kv_heads; ++h) {
      const size_t count = static_cast<size_t>(layer.head_length(h)) * d;
      if (count == 0) continue;
      float* dst = pass == 0 ? out.k_at(h, 0) : out.v_at(h, 0);
      const char* from = src.as<char>() + static_cast<size_t>(layer.head_row(h)) * d * es;
      if (layer.dtype == DType::F32) {
        copy_to_host(ctx, dst, from, count * 4);
      } else {
        std::vector<uint16_t> tmp(count);
        copy_to_host(ctx, tmp.data(), from, count * 2);
        for (size_t i = 0; i < count; ++i) dst[i] = bf16_to_fp32(tmp[i]);
      }
    }
  }
  if (layer.has_positions()) {
    for (int64_t h = 0; h < layer.n_kv_heads; ++h)
      if (layer.head_length(h) > 0)
        copy_to_host(ctx, out.pos_at(h, 0), layer.pos.as<int32_t>() + layer.head_row(h),
                     static_cast<size_t>(layer.head_length(h)) * sizeof(int32_t));
  }
  return out;
}

DeviceLayerKV upload_layer(Context& ctx, const LayerKV& layer, DType dtype, int64_t capacity) {
  DeviceLayerKV like;  // the host layer's layout, to size the device one
  like.n_kv_heads = layer.n_kv_heads;
  like.head_dim = layer.head_dim;
  like.dtype = dtype;
  like.length = layer.length;
  like.head_lengths = layer.head_lengths;
  DeviceLayerKV out = empty_like(ctx, like, std::max<int64_t>(0, capacity - layer.length), layer.has_positions());
  const size_t d = static_cast<size_t>(layer.head_dim), es = out.elem_bytes();
  for (int pass = 0; pass < 2; ++pass) {
    DeviceBuffer& dst = pass == 0 ? out.k : out.v;
    for (int64_t h = 0; h < layer.n_kv_heads; ++h) {
      const size_t count = static_cast<size_t>(layer.head_length(h)) * d;
      if (count == 0) continue;
      const float* src = pass == 0 ? layer.k_at(h, 0) : layer.v_at(h, 0);
      char* to = dst.as<char>() + static_cast<size_t>(out.head_row(h)) * d * es;
      if (dtype == DType::F32) {
        copy_to_device(ctx, to, src, count * 4);
      } else {
        std::vector<uint16_t> tmp(count);
        for (size_t i = 0; i < count; ++i) tmp[i] = fp32_to_bf16(src[i]);
        copy_to_device(ctx, to, tmp.data(), count * 2);
      }
    }
  }
  if (layer.has_positions())
    for (int64_t h = 0; h < layer.n_kv_heads; ++h)
      if (layer.head_length(h) > 0)
        copy_to_device(ctx, out.pos.as<int32_t>() + out.head_row(h), layer.pos_at(h, 0),
                       static_cast<size_t>(layer.head_length(h)) * sizeof(int32_t));
  return out;
}

}  // namespace rkv::RKV_CUDA_NS
