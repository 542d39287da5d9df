// Q/K/V post-processing after the fused projection: bias, RoPE (rotate_half), append keys and values to the cache.
#pragma once
#include "backend/cuda/kernels/common.cuh"

namespace rkv::RKV_CUDA_NS::kernels {

namespace {

constexpr int kRopeThreads = 256;
constexpr int kRopeMaxHalf = 128;  // head_dim <= 256

/// One block per new row i: cos/sin of positions[i] * inv_freq[p] (double, rounded to float) in shared memory, then
/// every (head, pair) of queries and keys is rotated, and values are copied to the cache.
template <class T>
__global__ void __launch_bounds__(kRopeThreads)
    qkv_rope_append_kernel(const float* qkv, int64_t ld, const float* bias, const int64_t* positions,
                           const double* inv_freq, int H, int Hkv, int d, T* q_out, T* k_cache, T* v_cache,
                           int64_t capacity, int64_t first) {
  __shared__ float cs[kRopeMaxHalf], sn[kRopeMaxHalf];
  const int64_t i = blockIdx.x;
  const int half = d / 2;
  const double pos = static_cast<double>(positions[i]);
  for (int p = threadIdx.x; p < half; p += blockDim.x) {
    const double a = pos * inv_freq[p];
    cs[p] = static_cast<float>(cos(a));
    sn[p] = static_cast<float>(sin(a));
  }
  __syncthreads();
  const float* row = qkv + i * ld;
  T* qrow = q_out + i * static_cast<int64_t>(H) * d;
  for (int j = threadIdx.x; j < (H + Hkv) * half; j += blockDim.x) {
    const int hh = j / half, p = j - hh * half;
    const int64_t col = static_cast<int64_t>(hh) * d + p;
    float a = row[col], b = row[col + half];
    if (bias) {
      a = __fadd_rn(a, bias[col]);
      b = __fadd_rn(b, bias[col + half]);
    }
    const float c = cs[p], s = sn[p];
    const float ra = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
    const float rb = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
    if (hh < H) {
      qrow[col] = from_f32<T>(ra);
      qrow[col + half] = from_f32<T>(rb);
    } else {
      T* k = k_cache + (static_cast<int64_t>(hh - H) * capacity + first + i) * d;
      k[p] = from_f32<T>(ra);
      k[p + half] = from_f32<T>(rb);
    }
  }
  const int64_t vcol = static_cast<int64_t>(H + Hkv) * d;
  for (int j = threadIdx.x; j < Hkv * d; j += blockDim.x) {
    const int g = j / d, e = j - g * d;
    float v = row[vcol + j];
    if (bias) v = __fadd_rn(v, bias[vcol + j]);
    v_cache[(static_cast<int64_t>(g) * capacity + first + i) * d + e] = from_f32<T>(v);
  }
}

}  // namespace

cudaError_t qkv_rope_append(DType t, const float* qkv, int64_t n, int64_t ld, const float* bias,
                            const int64_t* positions, const double* inv_freq, int n_heads, int n_kv_heads, int head_dim,
                            void* q_out, void* k_cache, void* v_cache, int64_t capacity, int64_t first_index,
                            cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (head_dim % 2 != 0 || head_dim / 2 > kRopeMaxHalf) return cudaErrorInvalidValue;
  const unsigned grid = static_cast<unsigned>(n);
  if (t == DType::F32) {
    auto k = qkv_rope_append_kernel<float>;
    RKV_LAUNCH(k, grid, kRopeThreads, 0, stream, qkv, ld, bias, positions, inv_freq, n_heads, n_kv_heads, head_dim,
               static_cast<float*>(q_out), static_cast<float*>(k_cache), static_cast<float*>(v_cache), capacity,
               first_index);
  } else {
    auto k = qkv_rope_append_kernel<bf16>;
    RKV_LAUNCH(k, grid, kRopeThreads, 0, stream, qkv, ld, bias, positions, inv_freq, n_heads, n_kv_heads, head_dim,
               static_cast<bf16*>(q_out), static_cast<bf16*>(k_cache), static_cast<bf16*>(v_cache), capacity,
               first_index);
  }
  return cudaGetLastError();
}

}  // namespace rkv::RKV_CUDA_NS::kernels
