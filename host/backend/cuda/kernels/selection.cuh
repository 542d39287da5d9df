// Top-k selection with protected positions, and the gather that compacts a cache to the kept rows.
#pragma once
#include "backend/cuda/kernels/common.cuh"

namespace rkv::RKV_CUDA_NS::kernels {

namespace {

constexpr int kSelectThreads = 512;
constexpr int kGatherThreads = 256;

/// 64-bit key ordering candidates as the host does (score descending, then position ascending): the score's bits made
/// order-preserving (-0 counted as +0), then the complemented position. Distinct positions give distinct keys.
__device__ __forceinline__ uint64_t select_key(float s, int64_t p) {
  unsigned u = __float_as_uint(s == 0.0f ? 0.0f : s);
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return (static_cast<uint64_t>(u) << 32) | static_cast<uint64_t>(0xFFFFFFFFu - static_cast<uint32_t>(p));
}

/// One block per KV head. Radix select (8 passes of 8 bits, most significant first) finds the key of rank n_top
/// among the candidates; every candidate with a key at least that large is kept. Then a block-wide scan writes the
/// kept positions in ascending order.
__global__ void __launch_bounds__(kSelectThreads)
    select_topk_kernel(const float* scores, int64_t T, const uint8_t* prot, const uint8_t* keep_prot, int64_t n_top,
                       int64_t budget, int64_t* positions, int64_t* bad) {
  __shared__ int hist[256];
  __shared__ int scan_scratch[33];
  __shared__ unsigned long long sh_prefix;
  __shared__ long long sh_k;
  const int tid = threadIdx.x;
  const int64_t h = blockIdx.x;
  const float* s = scores + h * T;
  uint64_t threshold = 0;
  if (n_top > 0) {
    for (int64_t p = tid; p < T; p += blockDim.x)
      if (!prot[p] && !finite_f32(s[p]))
        atomicMin(reinterpret_cast<unsigned long long*>(bad), static_cast<unsigned long long>(h * T + p));
    uint64_t prefix = 0, mask = 0;
    long long k = n_top;
    for (int shift = 56; shift >= 0; shift -= 8) {
      for (int b = tid; b < 256; b += blockDim.x) hist[b] = 0;
      __syncthreads();
      for (int64_t p = tid; p < T; p += blockDim.x) {
        if (prot[p]) continue;
        const uint64_t key = select_key(s[p], p);
        if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1);
      }
      __syncthreads();
      if (tid == 0) {
        long long above = 0;
        int b = 255;
        for (; b > 0; --b) {
          if (above + hist[b] >= k) break;
          above += hist[b];
        }
        sh_prefix = prefix | (static_cast<unsigned long long>(b) << shift);
        sh_k = k - above;
      }
      __syncthreads();
      prefix = sh_prefix;
      k = sh_k;
      mask |= static_cast<uint64_t>(0xFFu) << shift;
      __syncthreads();
    }
    threshold = prefix;
  }
  int64_t base = 0;
  for (int64_t p0 = 0; p0 < T; p0 += blockDim.x) {
    const int64_t p = p0 + tid;
    int flag = 0;
    if (p < T) flag = keep_prot[p] || (n_top > 0 && !prot[p] && select_key(s[p], p) >= threshold);
    int total = 0;
    const int off = block_exclusive_scan(flag, scan_scratch, &total);
    if (flag && base + off < budget) positions[h * budget + base + off] = p;
    base += total;
  }
}

template <class T>
__global__ void __launch_bounds__(kGatherThreads)
    gather_rows_kernel(const T* src, int64_t src_capacity, const int64_t* positions, int64_t Hkv, int64_t kept, int d,
                       T* dst) {
  const int64_t total = Hkv * kept * d;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = idx / d, e = idx - row * d;
    const int64_t h = row / kept;
    dst[idx] = src[(h * src_capacity + positions[row]) * d + e];
  }
}

}  // namespace

cudaError_t select_topk(const float* scores, int64_t n_kv_heads, int64_t T, const uint8_t* protected_mask,
                        const uint8_t* keep_protected, int64_t n_protected_kept, int64_t budget, int64_t* positions,
                        int64_t* bad, cudaStream_t stream) {
  if (n_kv_heads <= 0 || T <= 0 || budget <= 0 || budget > T || n_protected_kept > budget ||
      T > 0x7fffffffLL)
    return cudaErrorInvalidValue;
  auto k = select_topk_kernel;
  RKV_LAUNCH(k, static_cast<unsigned>(n_kv_heads), kSelectThreads, 0, stream, scores, T, protected_mask,
             keep_protected, budget - n_protected_kept, budget, positions, bad);
  return cudaGetLastError();
}

cudaError_t gather_rows(DType t, const void* src, int64_t src_capacity, const int64_t* positions, int64_t n_kv_heads,
                        int64_t kept, int head_dim, void* dst, cudaStream_t stream) {
  if (n_kv_heads <= 0 || kept <= 0) return cudaSuccess;
  const unsigned grid = stride_blocks(n_kv_heads * kept * head_dim, kGatherThreads);
  if (t == DType::F32) {
    auto k = gather_rows_kernel<float>;
    RKV_LAUNCH(k, grid, kGatherThreads, 0, stream, static_cast<const float*>(src), src_capacity, positions,
               n_kv_heads, kept, head_dim, static_cast<float*>(dst));
  } else {
    auto k = gather_rows_kernel<bf16>;
    RKV_LAUNCH(k, grid, kGatherThreads, 0, stream, static_cast<const bf16*>(src), src_capacity, positions, n_kv_heads,
               kept, head_dim, static_cast<bf16*>(dst));
  }
  return cudaGetLastError();
}

}  // namespace rkv::RKV_CUDA_NS::kernels
