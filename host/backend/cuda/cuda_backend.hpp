// The CUDA implementation of rkv::Backend (backend/backend.hpp): the binding layer's DeviceModel, forward pass,
// compaction and DeviceProfiler behind the one interface the runner, C API and CLI use. Compiled into libripplekv
// (namespace rkv::cuda) when nvcc is found, and into the test suite against the CPU emulator (rkv::cuda_emu, ns.hpp),
// where tests register it as the "cuda" backend (register_backend) so whole runs take this code path on any machine.
//
// What stays on the host: scorer plugins (CPU-only; they get Backend::download_layer copies and host statistics),
// selection (cache/selection.hpp; the device top-k in compression.hpp gives the same positions), allocation.
// Statistics are computed on the device during the prefill from the attention's own log-sum-exp
// (kernels::attention_stats) and copied to the host once per layer.
//
// Thread rules: as Backend; everything runs on the backend's Context's one stream.
#pragma once
#include <memory>

#include "backend/backend.hpp"
#include "backend/cuda/ns.hpp"

namespace rkv::RKV_CUDA_NS {

/// A CUDA backend on device `options.device` computing in `options.dtype` ("f32" validation mode, or "bf16").
/// Throws CudaError when no device is present, rkv::InputError for a model geometry the kernels do not support
/// (head_dim not 64/128, G > 8) or an unknown dtype. `model` must outlive the result.
std::unique_ptr<Backend> make_cuda_backend(const Model& model, const BackendOptions& options);

}  // namespace rkv::RKV_CUDA_NS
