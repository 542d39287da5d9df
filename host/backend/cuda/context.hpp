// The device context of the CUDA backend: one device, ONE stream that the host owns (every kernel, copy and cuBLAS
// call of the backend runs on it, in order), a cuBLAS handle bound to that stream with a tracked workspace, and the
// accounting of device memory (current, peak, and peak per named phase).
//
// Thread rules: a Context and everything allocated through it are used from one host thread at a time (the thread
// that created it, or another after handing it over). Destroy buffers, models and caches before their Context.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/check.hpp"
#include "backend/cuda/runtime.hpp"

namespace rkv::RKV_CUDA_NS {

/// Device memory of one named phase ("prefill", "decode", ...).
struct PhaseMemory {
  std::string phase;
  size_t start_bytes = 0;        ///< bytes allocated through the context when the phase began
  size_t peak_bytes = 0;         ///< the most allocated at any moment during the phase (own accounting)
  size_t end_bytes = 0;          ///< allocated when the phase ended
  size_t device_used_bytes = 0;  ///< cudaMemGetInfo (total - free) at the end: the whole device, including the CUDA
                                 ///< context, cuBLAS internals and other processes
};

/// Counts the bytes allocated through DeviceBuffer. Phases nest; each keeps its own peak.
class MemoryTracker {
 public:
  size_t current() const { return current_; }
  size_t peak() const { return peak_; }
  void on_alloc(size_t bytes);
  void on_free(size_t bytes);
  /// Opens a phase named `name`; its peak starts at the current bytes.
  void begin_phase(const std::string& name);
  /// Closes the innermost open phase, records it in phases() and returns it. `device_used` is stored as given.
  /// Throws std::logic_error when no phase is open.
  PhaseMemory end_phase(size_t device_used);
  /// Every closed phase, in closing order.
  const std::vector<PhaseMemory>& phases() const { return closed_; }

 private:
  size_t current_ = 0, peak_ = 0;
  std::vector<PhaseMemory> open_, closed_;
};

class Context {
 public:
  /// Selects `device`, creates the stream and the cuBLAS handle (default math: no TF32, so float32 GEMMs are full
  /// float32), and a cuBLAS workspace of `cublas_workspace_bytes`. Throws CudaError when no device is present (with
  /// device_unavailable_reason()) or a call fails.
  explicit Context(int device = 0, size_t cublas_workspace_bytes = size_t(32) << 20);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  const std::string& device_name() const { return name_; }
  int sm_count() const { return sm_count_; }
  size_t total_memory() const { return total_memory_; }
  MemoryTracker& memory() { return memory_; }
  const MemoryTracker& memory() const { return memory_; }

  /// Waits until the stream has finished; throws CudaError for an asynchronous failure.
  void synchronize() const;
  /// cudaMemGetInfo: bytes in use on the whole device (total - free).
  size_t device_used_bytes() const;
  /// Opens / closes a memory phase (MemoryTracker); end_phase synchronizes the stream and records device use.
  void begin_phase(const std::string& name) { memory_.begin_phase(name); }
  PhaseMemory end_phase();

 private:
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::string name_;
  int sm_count_ = 0;
  size_t total_memory_ = 0;
  MemoryTracker memory_;
};

/// Device memory owned by one object, counted in its Context's MemoryTracker. Move-only; freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  /// Allocates `bytes` (nothing for 0). Throws CudaError naming the size when the device is out of memory.
  DeviceBuffer(Context& ctx, size_t bytes);
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }
  bool empty() const { return bytes_ == 0; }
  /// Frees the memory (cudaFree waits for work in flight on the device).
  void reset() noexcept;
  /// Makes the buffer at least `bytes` large; when it must grow, the old contents are discarded.
  void ensure(Context& ctx, size_t bytes);

 private:
  Context* ctx_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

/// Copies `bytes` host -> device on the context's stream and waits for it (the host buffer may be freed after).
void copy_to_device(Context& ctx, void* dst, const void* src, size_t bytes);
/// Copies `bytes` device -> host on the context's stream and waits for it.
void copy_to_host(Context& ctx, void* dst, const void* src, size_t bytes);
/// Copies `bytes` device -> device on the context's stream (asynchronous).
void copy_on_device(Context& ctx, void* dst, const void* src, size_t bytes);

/// A new buffer holding a copy of `v`.
template <class T>
DeviceBuffer upload(Context& ctx, const std::vector<T>& v) {
  DeviceBuffer b(ctx, v.size() * sizeof(T));
  copy_to_device(ctx, b.data(), v.data(), v.size() * sizeof(T));
  return b;
}

/// `count` elements of type T copied from device memory `src`.
template <class T>
std::vector<T> download(Context& ctx, const void* src, size_t count) {
  std::vector<T> v(count);
  copy_to_host(ctx, v.data(), src, count * sizeof(T));
  return v;
}

}  // namespace rkv::RKV_CUDA_NS
