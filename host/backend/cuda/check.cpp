#include "backend/cuda/check.hpp"

namespace rkv::RKV_CUDA_NS {

void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
  throw CudaError(std::string(expr) + " failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ") at " +
                  file + ":" + std::to_string(line));
}

void throw_cublas_error(cublasStatus_t st, const char* expr, const char* file, int line) {
  throw CudaError(std::string(expr) + " failed: " + cublasGetStatusString(st) + " at " + file + ":" +
                  std::to_string(line));
}

int device_count() noexcept {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // do not leave the failure for the next checked call
    return 0;
  }
  return n;
}

std::string device_unavailable_reason() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("cudaGetDeviceCount: ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
  }
  return n == 0 ? "cudaGetDeviceCount: no CUDA device" : "";
}

}  // namespace rkv::RKV_CUDA_NS
