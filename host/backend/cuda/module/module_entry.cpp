// The entry point of libripplekv-cuda.so (backend/backend_module.hpp): what the host's make_backend() finds when it
// loads this module. Compiled twice, like the rest of the backend (ns.hpp): into the real module (nvcc + cuBLAS,
// rkv::cuda) and into the test suite's emulated one (tests/gpu: rkv::cuda_emu, tests/emu-backend/libripplekv-cuda.so).
#include "backend/backend_module.hpp"
#include "backend/cuda/check.hpp"
#include "backend/cuda/cuda_backend.hpp"
#include "ripplekv/build_info.hpp"

namespace {

int module_device_count() noexcept { return rkv::RKV_CUDA_NS::device_count(); }
std::string module_unavailable_reason() { return rkv::RKV_CUDA_NS::device_unavailable_reason(); }
std::unique_ptr<rkv::Backend> module_make_backend(const rkv::Model& model, const rkv::BackendOptions& options) {
  return rkv::RKV_CUDA_NS::make_cuda_backend(model, options);
}

const rkv::BackendModule kCudaModule{rkv::kBackendModuleInterface, "cuda", RIPPLEKV_VERSION_STRING,
                                     &module_device_count, &module_unavailable_reason, &module_make_backend};

}  // namespace

/// The CUDA backend module. Static storage; thread-safe (returns a constant).
extern "C" __attribute__((visibility("default"))) const rkv::BackendModule* rkv_backend_module_get() {
  return &kCudaModule;
}
