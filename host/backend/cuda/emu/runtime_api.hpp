// The CUDA runtime API of the CPU emulator (cuda_emu.hpp): memory, copies, streams, events, launches and function
// attributes as the backend calls them. Test-only (RKV_CUDA_EMU=1); the execution model is in cuda_emu.hpp.
// Thread rules: not thread-safe, one launch at a time in the process (as cuda_emu.hpp).
#pragma once
#include "backend/cuda/emu/cuda_emu.hpp"

// ---- runtime API ----------------------------------------------------------------------------------------------------

inline const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
  }
  return "unknown error";
}
inline const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
  }
  return "cudaErrorUnknown";
}
inline cudaError_t cudaGetLastError() {
  const cudaError_t e = ::rkv::emu::state().last_error;
  ::rkv::emu::state().last_error = cudaSuccess;
  return e;
}
inline cudaError_t cudaPeekAtLastError() { return ::rkv::emu::state().last_error; }
inline cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorInvalidValue; }
inline cudaError_t cudaGetDevice(int* d) {
  *d = 0;
  return cudaSuccess;
}
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
  std::memset(p, 0, sizeof(*p));
  std::snprintf(p->name, sizeof(p->name), "cuda_emu (CPU emulation)");
  p->totalGlobalMem = ::rkv::emu::kDeviceBytes;
  p->major = 8;
  p->minor = 0;
  return cudaSuccess;
}
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int) {
  *v = a == cudaDevAttrMultiProcessorCount ? 4 : static_cast<int>(::rkv::emu::kMaxDynamicSmem);
  return cudaSuccess;
}
inline cudaError_t cudaMalloc(void** p, size_t bytes) {
  auto& s = ::rkv::emu::state();
  *p = std::aligned_alloc(256, ((bytes + 255) / 256) * 256 + 256);
  if (!*p) return cudaErrorMemoryAllocation;
  std::memset(*p, 0xA5, bytes);  // uninitialised device memory is garbage, not zeros
  s.allocations[*p] = bytes;
  s.allocated += bytes;
  return cudaSuccess;
}
inline cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;
  auto& s = ::rkv::emu::state();
  const auto it = s.allocations.find(p);
  if (it == s.allocations.end()) return cudaErrorInvalidValue;
  s.allocated -= it->second;
  s.allocations.erase(it);
  std::free(p);
  return cudaSuccess;
}
inline cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
  *total = ::rkv::emu::kDeviceBytes;
  *free_bytes = ::rkv::emu::kDeviceBytes - ::rkv::emu::state().allocated;
  return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind, cudaStream_t = nullptr) {
  if (bytes) std::memmove(dst, src, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind k) {
  return cudaMemcpyAsync(dst, src, bytes, k);
}
inline cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                     size_t height, cudaMemcpyKind, cudaStream_t = nullptr) {
  if (width > dpitch || width > spitch) return cudaErrorInvalidValue;
  for (size_t r = 0; r < height; ++r)
    std::memmove(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch, width);
  return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t = nullptr) {
  if (bytes) std::memset(p, value, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  static char token;
  *s = reinterpret_cast<cudaStream_t>(&token);
  return cudaSuccess;
}
inline cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t cudaEventCreate(cudaEvent_t* e) {
  *e = new CUevent_emu;
  return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t = nullptr) {
  e->ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
  return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  *ms = static_cast<float>(b->ms - a->ms);
  return cudaSuccess;
}
template <class F>
inline cudaError_t cudaFuncSetAttribute(F* fn, cudaFuncAttribute, int value) {
  if (value < 0 || static_cast<size_t>(value) > ::rkv::emu::kMaxDynamicSmem) return cudaErrorInvalidValue;
  ::rkv::emu::state().smem_limit[reinterpret_cast<const void*>(fn)] = static_cast<size_t>(value);
  return cudaSuccess;
}
