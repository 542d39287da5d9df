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

void reserve_layer(Context& ctx, DeviceLayerKV& layer, int64_t capacity) {
  if (capacity <= layer.capacity) return;
  const size_t es = layer.elem_bytes(), row = static_cast<size_t>(layer.head_dim) * es;
  const size_t bytes = static_cast<size_t>(layer.n_kv_heads * capacity) * row;
  DeviceBuffer k(ctx, bytes), v(ctx, bytes);
  if (layer.length > 0) {
    const size_t width = static_cast<size_t>(layer.length) * row;
    RKV_CUDA_CHECK(cudaMemcpy2DAsync(k.data(), static_cast<size_t>(capacity) * row, layer.k.data(),
                                     static_cast<size_t>(layer.capacity) * row, width,
                                     static_cast<size_t>(layer.n_kv_heads), cudaMemcpyDeviceToDevice, ctx.stream()));
    RKV_CUDA_CHECK(cudaMemcpy2DAsync(v.data(), static_cast<size_t>(capacity) * row, layer.v.data(),
                                     static_cast<size_t>(layer.capacity) * row, width,
                                     static_cast<size_t>(layer.n_kv_heads), cudaMemcpyDeviceToDevice, ctx.stream()));
  }
  if (layer.has_positions()) {
    DeviceBuffer pos(ctx, static_cast<size_t>(layer.n_kv_heads * capacity) * sizeof(int32_t));
    if (layer.length > 0)
      RKV_CUDA_CHECK(cudaMemcpy2DAsync(pos.data(), static_cast<size_t>(capacity) * sizeof(int32_t), layer.pos.data(),
                                       static_cast<size_t>(layer.capacity) * sizeof(int32_t),
                                       static_cast<size_t>(layer.length) * sizeof(int32_t),
                                       static_cast<size_t>(layer.n_kv_heads), cudaMemcpyDeviceToDevice, ctx.stream()));
    layer.pos = std::move(pos);
  }
  layer.k = std::move(k);  // the old buffers are freed here (cudaFree waits for the copies)
  layer.v = std::move(v);
  layer.capacity = capacity;
}

LayerKV download_layer(Context& ctx, const DeviceLayerKV& layer) {
  LayerKV out;
  out.n_kv_heads = layer.n_kv_heads;
  out.head_dim = layer.head_dim;
  out.capacity = out.length = layer.length;
  const size_t n = static_cast<size_t>(layer.n_kv_heads * layer.length * layer.head_dim);
  out.k.resize(n);
  out.v.resize(n);
  const size_t row = static_cast<size_t>(layer.head_dim);
  for (int pass = 0; pass < 2; ++pass) {
    const DeviceBuffer& src = pass == 0 ? layer.k : layer.v;
    std::vector<float>& dst = pass == 0 ? out.k : out.v;
    for (int64_t h = 0; h < layer.n_kv_heads; ++h) {
      const size_t count = static_cast<size_t>(layer.length) * row;
      const size_t off = static_cast<size_t>(h * layer.capacity) * row * layer.elem_bytes();
      if (layer.dtype == DType::F32) {
        copy_to_host(ctx, dst.data() + static_cast<size_t>(h) * count, src.as<char>() + off, count * 4);
      } else {
        std::vector<uint16_t> tmp(count);
        copy_to_host(ctx, tmp.data(), src.as<char>() + off, count * 2);
        for (size_t i = 0; i < count; ++i) dst[static_cast<size_t>(h) * count + i] = bf16_to_fp32(tmp[i]);
      }
    }
  }
  if (layer.has_positions()) {
    out.pos.resize(static_cast<size_t>(layer.n_kv_heads * layer.length));
    for (int64_t h = 0; h < layer.n_kv_heads && layer.length > 0; ++h)
      copy_to_host(ctx, out.pos.data() + h * layer.length,
                   layer.pos.as<char>() + static_cast<size_t>(h * layer.capacity) * sizeof(int32_t),
                   static_cast<size_t>(layer.length) * sizeof(int32_t));
  }
  return out;
}

DeviceLayerKV upload_layer(Context& ctx, const LayerKV& layer, DType dtype, int64_t capacity) {
  DeviceLayerKV out;
  out.n_kv_heads = layer.n_kv_heads;
  out.head_dim = layer.head_dim;
  out.dtype = dtype;
  out.length = layer.length;
  out.capacity = std::max(layer.length, capacity);
  const size_t row = static_cast<size_t>(layer.head_dim), es = out.elem_bytes();
  const size_t bytes = static_cast<size_t>(out.n_kv_heads * out.capacity) * row * es;
  out.k = DeviceBuffer(ctx, bytes);
  out.v = DeviceBuffer(ctx, bytes);
  for (int pass = 0; pass < 2; ++pass) {
    DeviceBuffer& dst = pass == 0 ? out.k : out.v;
    for (int64_t h = 0; h < layer.n_kv_heads; ++h) {
      const float* src = (pass == 0 ? layer.k_at(h, 0) : layer.v_at(h, 0));
      const size_t count = static_cast<size_t>(layer.length) * row;
      char* d = dst.as<char>() + static_cast<size_t>(h * out.capacity) * row * es;
      if (dtype == DType::F32) {
        copy_to_device(ctx, d, src, count * 4);
      } else {
        std::vector<uint16_t> tmp(count);
        for (size_t i = 0; i < count; ++i) tmp[i] = fp32_to_bf16(src[i]);
        copy_to_device(ctx, d, tmp.data(), count * 2);
      }
    }
  }
  if (layer.has_positions()) {
    out.pos = DeviceBuffer(ctx, static_cast<size_t>(out.n_kv_heads * out.capacity) * sizeof(int32_t));
    for (int64_t h = 0; h < layer.n_kv_heads && layer.length > 0; ++h)
      copy_to_device(ctx, out.pos.as<char>() + static_cast<size_t>(h * out.capacity) * sizeof(int32_t),
                     layer.pos_at(h, 0), static_cast<size_t>(layer.length) * sizeof(int32_t));
  }
  return out;
}

}  // namespace rkv::RKV_CUDA_NS
