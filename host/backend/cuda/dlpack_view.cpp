#include "backend/cuda/dlpack_view.hpp"

#include <string>

#include "core/errors.hpp"

namespace rkv::RKV_CUDA_NS {

DLDataType dl_dtype(DType t) {
  return t == DType::F32 ? DLDataType{kDLFloat, 32, 1} : DLDataType{kDLBfloat, 16, 1};
}

DeviceTensorView layer_view(const Context& ctx, const DeviceLayerKV& layer, bool values) {
  if (layer.per_head())
    throw InputError("the layer holds per-head lengths (per-head budgets); it has no [H_kv, T, d] view");
  const int64_t shape[3] = {layer.n_kv_heads, layer.length, layer.head_dim};
  const int64_t strides[3] = {layer.capacity * layer.head_dim, layer.head_dim, 1};
  return DeviceTensorView(values ? layer.v.data() : layer.k.data(), DLDevice{kDLCUDA, ctx.device()},
                          dl_dtype(layer.dtype), 3, shape, strides);
}

DeviceTensorView stats_view(const Context& ctx, const StatsCapture& stats, int64_t layer, bool cumulative) {
  const bool have = cumulative ? stats.options.cumulative_attention : stats.options.window_attention;
  const auto& bufs = cumulative ? stats.cumulative_sums : stats.window_sums;
  if (!have || layer < 0 || layer >= static_cast<int64_t>(bufs.size()))
    throw InputError(std::string("attention statistics: no ") + (cumulative ? "cumulative" : "window") +
                     " attention captured for layer " + std::to_string(layer));
  const int64_t shape[2] = {stats.n_heads, stats.prefix_tokens};
  const int64_t strides[2] = {stats.prefix_tokens, 1};
  return DeviceTensorView(bufs[static_cast<size_t>(layer)].data(), DLDevice{kDLCUDA, ctx.device()},
                          DLDataType{kDLFloat, 32, 1}, 2, shape, strides);
}

}  // namespace rkv::RKV_CUDA_NS
