// DLPack views of device data, for plugins that declare CUDA support (docs/ARCHITECTURE.md "Plugin ABI": they get device
// DLTensors and the host's stream; others get CPU copies, e.g. download_layer() / StatsCapture::download()).
// A view borrows the device memory: valid while the buffer lives and is not reallocated (decode growth, compaction).
#pragma once
#include <dlpack/dlpack.h>

#include <cstdint>

#include "backend/backend.hpp"
#include "backend/cuda/device_cache.hpp"
#include "backend/cuda/forward.hpp"

namespace rkv::RKV_CUDA_NS {

/// A DLTensor with its own shape and stride storage (backend/backend.hpp's TensorView; kDLCUDA here).
using DeviceTensorView = rkv::TensorView;

/// DLPack type of a storage type: float32 or bfloat16.
DLDataType dl_dtype(DType t);

/// Keys (values = false) or values of positions [0, length) of a layer: [H_kv, length, d] with strides
/// (capacity d, d, 1), in the layer's storage type.
DeviceTensorView layer_view(const Context& ctx, const DeviceLayerKV& layer, bool values);

/// Window (cumulative = false) or cumulative attention sums of `layer`: float32 [H, T], contiguous. Throws
/// rkv::InputError when that statistic was not captured.
DeviceTensorView stats_view(const Context& ctx, const StatsCapture& stats, int64_t layer, bool cumulative);

}  // namespace rkv::RKV_CUDA_NS
