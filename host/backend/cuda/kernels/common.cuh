// Device-side vocabulary shared by every kernel file: bf16 <-> fp32 conversions, warp reductions and scans in a fixed
// order (bitwise reproducible), and the launch macro. Kernels know nothing of the framework: raw pointers, sizes and
// a stream (the FlashInfer style); the binding layer (backend/cuda/*.cpp) owns memory and checks errors.
//
// Compiled by nvcc (real build) or, in the emulation test suite, by the host compiler against
// backend/cuda/emu/cuda_emu.hpp (RKV_CUDA_EMU=1). Device code may only use what both provide.
#pragma once
#include <cstdint>

#include "backend/cuda/kernels/kernels.hpp"

#if !RKV_CUDA_EMU
#include <cuda_bf16.h>
#include <cuda_runtime.h>
/// Launches `kernel` (a function or a pointer to a __global__ function) on `stream`.
#define RKV_LAUNCH(kernel, grid, block, smem, stream, ...) kernel<<<(grid), (block), (smem), (stream)>>>(__VA_ARGS__)
/// Declares `name` as a `type*` view of the launch's dynamic shared memory (16-byte aligned).
#define RKV_DYNAMIC_SMEM(type, name)                                       \
  extern __shared__ __align__(16) unsigned char rkv_dynamic_smem_[]; \
  type* name = reinterpret_cast<type*>(rkv_dynamic_smem_)
#endif

namespace rkv::RKV_CUDA_NS::kernels {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(bf16 x) { return __bfloat162float(x); }

/// float -> storage type, round to nearest even.
template <class T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ bf16 from_f32<bf16>(float x) {
  return __float2bfloat16(x);
}

/// An attention score after the model's soft-cap: c tanh(s / c) for c > 0 (gemma2), s for c = 0 (rkv::softcap_score).
__device__ __forceinline__ float softcap_score(float s, float c) { return c > 0.0f ? c * tanhf(s / c) : s; }

/// Blocks for a grid-stride loop over `count` items with `threads` per block (at least 1, at most 2^20).
inline unsigned stride_blocks(int64_t count, int threads) {
  const int64_t b = (count + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > (1 << 20) ? (1 << 20) : b));
}

__device__ __forceinline__ int64_t imin64(int64_t a, int64_t b) { return a < b ? a : b; }
__device__ __forceinline__ int64_t imax64(int64_t a, int64_t b) { return a > b ? a : b; }

/// True when x is neither infinite nor NaN.
__device__ __forceinline__ bool finite_f32(float x) { return (__float_as_uint(x) & 0x7f800000u) != 0x7f800000u; }

struct SumOp {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a > b ? a : b; }
};

/// All-reduce over aligned groups of W lanes (W a power of two <= 32): the xor butterfly with masks 1, 2, ..., W/2;
/// every lane of a group ends with the same value. All 32 lanes of the warp must call it.
template <int W, class T, class Op>
__device__ __forceinline__ T group_allreduce(T v, Op op) {
#if RKV_CUDA_EMU
  return ::rkv::emu::group_allreduce<W>(v, op);
#else
#pragma unroll
  for (int m = 1; m < W; m <<= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
#endif
}

template <class T>
__device__ __forceinline__ T warp_sum(T v) {
  return group_allreduce<32>(v, SumOp{});
}
__device__ __forceinline__ float warp_max(float v) { return group_allreduce<32>(v, MaxOp{}); }

/// Inclusive prefix sum of an int over the 32 lanes of a warp.
__device__ __forceinline__ int warp_inclusive_scan(int v) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
#if RKV_CUDA_EMU
  (void)lane;
  int all[32];
  ::rkv::emu::warp_gather(v, all);
  int s = 0;
  for (unsigned l = 0; l <= ::rkv::emu::lane(); ++l) s += all[l];
  return s;
#else
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int n = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += n;
  }
  return v;
#endif
}

/// Sum over a block of blockDim.x threads (a multiple of 32, at most 1024), in a fixed order: warp butterflies, then
/// the warp totals by warp 0. Every thread gets the result. `scratch` holds 32 values of T in shared memory; the
/// function synchronizes the block (twice) and may be called repeatedly with the same scratch.
template <class T>
__device__ __forceinline__ T block_sum(T v, T* scratch) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T t = lane < warps ? scratch[lane] : T(0);
  t = warp_sum(t);
  return t;
}

/// Max over a block (as block_sum). Every thread gets the result.
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float t = lane < warps ? scratch[lane] : -INFINITY;
  return warp_max(t);
}

/// Exclusive prefix sum of `flag` over the block in thread order; *total receives the block's sum. `scratch` holds
/// 33 ints in shared memory. Synchronizes the block.
__device__ __forceinline__ int block_exclusive_scan(int flag, int* scratch, int* total) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int incl = warp_inclusive_scan(flag);
  __syncthreads();
  if (lane == 31) scratch[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    const int w = lane < warps ? scratch[lane] : 0;
    const int wi = warp_inclusive_scan(w);
    if (lane < warps) scratch[lane] = wi - w;  // exclusive offset of each warp
    if (lane == 31) scratch[32] = wi;
  }
  __syncthreads();
  *total = scratch[32];
  return scratch[warp] + incl - flag;
}

}  // namespace rkv::RKV_CUDA_NS::kernels
