// Key re-rotation to contiguous positions (compression.rerotate; cache/rerotation.hpp is the host version).
#pragma once
#include "backend/cuda/kernels/common.cuh"

namespace rkv::RKV_CUDA_NS::kernels {

namespace {

constexpr int kRerotateThreads = 64;
constexpr int kRerotateMaxHalf = 128;  // head_dim <= 256

/// One block per cache row r = h * length + i (grid-stride over rows): every thread reads the row's stored position
/// p, then rotates its pairs q by the angle (i - p) * inv_freq[q] (double, cos/sin rounded to float, float32
/// arithmetic as rope_rotate_half); after a barrier thread 0 stores the new position i.
template <class T>
__global__ void __launch_bounds__(kRerotateThreads)
    rerotate_keys_kernel(T* k_cache, int32_t* pos, int64_t capacity, int64_t n_kv_heads, int64_t length, int d,
                         const double* inv_freq) {
  const int half = d / 2;
  const int64_t rows = n_kv_heads * length;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t h = r / length, i = r - h * length, at = h * capacity + i;
    const double shift = static_cast<double>(i) - static_cast<double>(pos[at]);
    T* k = k_cache + at * d;
    for (int q = threadIdx.x; q < half; q += blockDim.x) {
      const double angle = shift * inv_freq[q];
      const float c = static_cast<float>(cos(angle)), s = static_cast<float>(sin(angle));
      const float a = to_f32(k[q]), b = to_f32(k[q + half]);
      k[q] = from_f32<T>(__fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)));
      k[q + half] = from_f32<T>(__fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s)));
    }
    __syncthreads();  // every thread has read pos[at]
    if (threadIdx.x == 0) pos[at] = static_cast<int32_t>(i);
  }
}

}  // namespace

cudaError_t rerotate_keys(DType t, void* k_cache, int32_t* pos, int64_t capacity, int64_t n_kv_heads, int64_t length,
                          int head_dim, const double* inv_freq, cudaStream_t stream) {
  if (n_kv_heads <= 0 || length <= 0) return cudaSuccess;
  if (head_dim % 2 != 0 || head_dim / 2 > kRerotateMaxHalf || length > capacity) return cudaErrorInvalidValue;
  const unsigned grid = stride_blocks(n_kv_heads * length, 1);
  if (t == DType::F32) {
    auto k = rerotate_keys_kernel<float>;
    RKV_LAUNCH(k, grid, kRerotateThreads, 0, stream, static_cast<float*>(k_cache), pos, capacity, n_kv_heads, length,
               head_dim, inv_freq);
  } else {
    auto k = rerotate_keys_kernel<bf16>;
    RKV_LAUNCH(k, grid, kRerotateThreads, 0, stream, static_cast<bf16*>(k_cache), pos, capacity, n_kv_heads, length,
               head_dim, inv_freq);
  }
  return cudaGetLastError();
}

}  // namespace rkv::RKV_CUDA_NS::kernels
