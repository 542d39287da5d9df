// The perturbation_kl noise on one layer's value cache (kernels/perturb_row.hpp has the formula).
#pragma once
#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/kernels/perturb_row.hpp"

namespace rkv::RKV_CUDA_NS::kernels {

namespace {

constexpr int kPerturbThreads = 128;

/// One thread per (KV head, prefix position) row.
template <class T>
__global__ void __launch_bounds__(kPerturbThreads)
    perturb_values_kernel(T* v, int64_t capacity, int64_t Hkv, int64_t prefix, int d, const uint8_t* mask,
                          double alpha, uint64_t seed, uint32_t draw, uint32_t example, uint32_t layer) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= Hkv * prefix) return;
  const int64_t h = idx / prefix, u = idx - h * prefix;
  if (mask[u]) return;
  T* row = v + (h * capacity + u) * d;
  float x[kPerturbMaxHeadDim];
  for (int e = 0; e < d; ++e) x[e] = to_f32(row[e]);
  perturb_value_row(x, d, alpha, seed, draw, example, layer, static_cast<uint32_t>(h), static_cast<uint32_t>(u));
  for (int e = 0; e < d; ++e) row[e] = from_f32<T>(x[e]);
}

}  // namespace

cudaError_t perturb_values(DType t, void* v_cache, int64_t capacity, int64_t n_kv_heads, int64_t prefix,
                           int head_dim, const uint8_t* protected_mask, double alpha, uint64_t seed, uint32_t draw,
                           uint32_t example, uint32_t layer, cudaStream_t stream) {
  if (n_kv_heads <= 0 || prefix <= 0) return cudaSuccess;
  if (head_dim % 4 != 0 || head_dim > kPerturbMaxHeadDim || head_dim <= 0) return cudaErrorInvalidValue;
  const int64_t rows = n_kv_heads * prefix;
  const unsigned grid = static_cast<unsigned>((rows + kPerturbThreads - 1) / kPerturbThreads);
  if (t == DType::F32) {
    auto k = perturb_values_kernel<float>;
    RKV_LAUNCH(k, grid, kPerturbThreads, 0, stream, static_cast<float*>(v_cache), capacity, n_kv_heads, prefix,
               head_dim, protected_mask, alpha, seed, draw, example, layer);
  } else {
    auto k = perturb_values_kernel<bf16>;
    RKV_LAUNCH(k, grid, kPerturbThreads, 0, stream, static_cast<bf16*>(v_cache), capacity, n_kv_heads, prefix,
               head_dim, protected_mask, alpha, seed, draw, example, layer);
  }
  return cudaGetLastError();
}

}  // namespace rkv::RKV_CUDA_NS::kernels
