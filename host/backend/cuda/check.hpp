// Error handling of the CUDA backend: every CUDA runtime and cuBLAS call is checked and a failure becomes an
// rkv::RKV_CUDA_NS::CudaError naming the call, the error and the source location. Device discovery never throws.
#pragma once
#include <stdexcept>
#include <string>

#include "backend/cuda/runtime.hpp"

namespace rkv::RKV_CUDA_NS {

/// A CUDA runtime or cuBLAS call failed (out of memory, invalid launch, no device, ...). The message names the call.
struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Throws CudaError for a failed runtime call: "<expr> failed: <name> (<description>) at <file>:<line>".
void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line);
/// Throws CudaError for a failed cuBLAS call.
void throw_cublas_error(cublasStatus_t st, const char* expr, const char* file, int line);

/// Number of usable CUDA devices; 0 (never an exception) when the driver, the device or the runtime is missing.
/// Clears the runtime's sticky error state it may have caused. Thread-safe.
int device_count() noexcept;

/// Why device_count() is 0, in words ("cudaGetDeviceCount: CUDA driver version is insufficient ..."), or "" when a
/// device is present.
std::string device_unavailable_reason();

}  // namespace rkv::RKV_CUDA_NS

/// Checks a CUDA runtime call (or a kernel launcher's return value).
#define RKV_CUDA_CHECK(expr)                                                                 \
  do {                                                                                       \
    const cudaError_t rkv_err_ = (expr);                                                     \
    if (rkv_err_ != cudaSuccess) ::rkv::RKV_CUDA_NS::throw_cuda_error(rkv_err_, #expr, __FILE__, __LINE__); \
  } while (0)

/// Checks a cuBLAS call.
#define RKV_CUBLAS_CHECK(expr)                                                                    \
  do {                                                                                            \
    const cublasStatus_t rkv_st_ = (expr);                                                        \
    if (rkv_st_ != CUBLAS_STATUS_SUCCESS)                                                         \
      ::rkv::RKV_CUDA_NS::throw_cublas_error(rkv_st_, #expr, __FILE__, __LINE__);                 \
  } while (0)
