#include "backend/cuda/rerotation.hpp"

#include <string>

#include "backend/cuda/check.hpp"
#include "core/errors.hpp"

namespace rkv::RKV_CUDA_NS {

void rerotate_layer(Context& ctx, DeviceLayerKV& layer, const double* inv_freq, int64_t layer_index) {
  if (!layer.has_positions())
    throw InputError("layer " + std::to_string(layer_index) +
                     ": key re-rotation needs each entry's position, and this cache tracks none");
  const int d = static_cast<int>(layer.head_dim);
  if (!layer.per_head()) {
    RKV_CUDA_CHECK(kernels::rerotate_keys(layer.dtype, layer.k.data(), layer.pos.as<int32_t>(), layer.capacity,
                                          layer.n_kv_heads, layer.length, d, inv_freq, ctx.stream()));
    return;
  }
  const size_t row = static_cast<size_t>(d) * layer.elem_bytes();
  for (int64_t h = 0; h < layer.n_kv_heads; ++h) {  // head h's own rows, as a one-head uniform region
    const int64_t first = layer.head_row(h);
    RKV_CUDA_CHECK(kernels::rerotate_keys(layer.dtype, layer.k.as<char>() + static_cast<size_t>(first) * row,
                                          layer.pos.as<int32_t>() + first, layer.head_capacity(h), 1,
                                          layer.head_length(h), d, inv_freq, ctx.stream()));
  }
}

}  // namespace rkv::RKV_CUDA_NS
