// Key re-rotation of one layer's device cache to contiguous positions (compression.rerotate), with exactly the
// semantics of the host function rkv::rerotate_layer (cache/rerotation.hpp).
//
// Thread rules: as the Context (context.hpp); rerotate_layer mutates its layer.
#pragma once
#include <cstdint>

#include "backend/cuda/device_cache.hpp"

namespace rkv::RKV_CUDA_NS {

/// rkv::rerotate_layer on the device: for every KV head h and entry i < head_length(h), with p its stored position,
/// key <- R((i - p) inv_freq) key and position <- i (kernels::rerotate_keys; one launch for a uniform layer, one per
/// KV head on its own rows for a per-head layer). In place on the stream, no reallocation; values untouched.
/// `inv_freq`: device double [head_dim / 2] (DeviceModel::rope_inv_freq). Throws rkv::InputError naming
/// `layer_index` when the layer tracks no positions; a CudaError when a launch fails.
void rerotate_layer(Context& ctx, DeviceLayerKV& layer, const double* inv_freq, int64_t layer_index);

}  // namespace rkv::RKV_CUDA_NS
