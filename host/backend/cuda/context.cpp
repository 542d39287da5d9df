#include "backend/cuda/context.hpp"

#include <stdexcept>
#include <utility>

namespace rkv::RKV_CUDA_NS {

void MemoryTracker::on_alloc(size_t bytes) {
  current_ += bytes;
  if (current_ > peak_) peak_ = current_;
  for (PhaseMemory& p : open_)
    if (current_ > p.peak_bytes) p.peak_bytes = current_;
}

void MemoryTracker::on_free(size_t bytes) { current_ -= bytes < current_ ? bytes : current_; }

void MemoryTracker::begin_phase(const std::string& name) {
  PhaseMemory p;
  p.phase = name;
  p.start_bytes = p.peak_bytes = current_;
  open_.push_back(p);
}

PhaseMemory MemoryTracker::end_phase(size_t device_used) {
  if (open_.empty()) throw std::logic_error("MemoryTracker::end_phase without an open phase");
  PhaseMemory p = open_.back();
  open_.pop_back();
  p.end_bytes = current_;
  p.device_used_bytes = device_used;
  closed_.push_back(p);
  return p;
}

Context::Context(int device, size_t cublas_workspace_bytes) : device_(device) {
  const int n = device_count();
  if (n == 0) throw CudaError("no CUDA device: " + device_unavailable_reason());
  if (device < 0 || device >= n)
    throw CudaError("CUDA device " + std::to_string(device) + " does not exist (" + std::to_string(n) + " present)");
  RKV_CUDA_CHECK(cudaSetDevice(device));
  cudaDeviceProp prop;
  RKV_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  name_ = prop.name;
  total_memory_ = prop.totalGlobalMem;
  RKV_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device));
  RKV_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  try {
    RKV_CUBLAS_CHECK(cublasCreate(&cublas_));
    RKV_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
    RKV_CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
    if (cublas_workspace_bytes > 0) {
      RKV_CUDA_CHECK(cudaMalloc(&workspace_, cublas_workspace_bytes));
      workspace_bytes_ = cublas_workspace_bytes;
      memory_.on_alloc(workspace_bytes_);
      RKV_CUBLAS_CHECK(cublasSetWorkspace(cublas_, workspace_, workspace_bytes_));
    }
  } catch (...) {
    if (cublas_) cublasDestroy(cublas_);
    if (workspace_) cudaFree(workspace_);
    cudaStreamDestroy(stream_);
    throw;
  }
}

Context::~Context() {
  if (stream_) cudaStreamSynchronize(stream_);
  if (cublas_) cublasDestroy(cublas_);
  if (workspace_) {
    cudaFree(workspace_);
    memory_.on_free(workspace_bytes_);
  }
  if (stream_) cudaStreamDestroy(stream_);
}

void Context::synchronize() const { RKV_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

size_t Context::device_used_bytes() const {
  size_t free_bytes = 0, total = 0;
  RKV_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  return total - free_bytes;
}

PhaseMemory Context::end_phase() {
  synchronize();
  return memory_.end_phase(device_used_bytes());
}

DeviceBuffer::DeviceBuffer(Context& ctx, size_t bytes) : ctx_(&ctx) {
  if (bytes == 0) return;
  const cudaError_t err = cudaMalloc(&ptr_, bytes);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    ptr_ = nullptr;
    throw CudaError("cudaMalloc of " + std::to_string(bytes) + " bytes failed: " + cudaGetErrorName(err) + " (" +
                    cudaGetErrorString(err) + "); " + std::to_string(ctx.memory().current()) +
                    " bytes already allocated by ripplekv");
  }
  bytes_ = bytes;
  ctx.memory().on_alloc(bytes);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    ctx_ = std::exchange(o.ctx_, nullptr);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::reset() noexcept {
  if (ptr_) {
    cudaFree(ptr_);
    if (ctx_) ctx_->memory().on_free(bytes_);
  }
  ptr_ = nullptr;
  bytes_ = 0;
}

void DeviceBuffer::ensure(Context& ctx, size_t bytes) {
  if (bytes <= bytes_) return;
  reset();
  *this = DeviceBuffer(ctx, bytes);
}

void copy_to_device(Context& ctx, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  RKV_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx.stream()));
  ctx.synchronize();
}

void copy_to_host(Context& ctx, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  RKV_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx.stream()));
  ctx.synchronize();
}

void copy_on_device(Context& ctx, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  RKV_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx.stream()));
}

}  // namespace rkv::RKV_CUDA_NS
