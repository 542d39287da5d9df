// Row-wise and element-wise kernels: embedding gather, RMSNorm (per row and per head), SwiGLU / GeGLU, conversion,
// scaling, soft-capping, residual add, random fill (kernels.hpp).
#pragma once
#include "backend/cuda/kernels/common.cuh"
#include "core/philox.hpp"

namespace rkv::RKV_CUDA_NS::kernels {

namespace {

constexpr int kRowThreads = 256;

template <class T>
__global__ void __launch_bounds__(kRowThreads) embed_kernel(const T* table, const int32_t* tokens, int64_t D,
                                                            float* x) {
  const int64_t i = blockIdx.x;
  const T* row = table + static_cast<int64_t>(tokens[i]) * D;
  for (int64_t c = threadIdx.x; c < D; c += blockDim.x) x[i * D + c] = to_f32(row[c]);
}

template <class T>
__global__ void __launch_bounds__(kRowThreads) rmsnorm_kernel(const float* x, const float* w, float eps, int64_t n,
                                                              T* y) {
  __shared__ double scratch[32];
  const int64_t r = blockIdx.x;
  const float* xr = x + r * n;
  double ss = 0.0;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
    const double v = static_cast<double>(xr[c]);
    ss = __dadd_rn(ss, __dmul_rn(v, v));
  }
  ss = block_sum(ss, scratch);
  const float s = static_cast<float>(1.0 / sqrt(ss / static_cast<double>(n) + static_cast<double>(eps)));
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) y[r * n + c] = from_f32<T>(__fmul_rn(__fmul_rn(xr[c], s), w[c]));
}

template <class T>
__global__ void __launch_bounds__(kRowThreads) silu_mul_kernel(const float* gate_up, int64_t n, int64_t F, T* act) {
  const int64_t total = n * F;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx / F, f = idx - i * F;
    const float g = gate_up[i * 2 * F + f], u = gate_up[i * 2 * F + F + f];
    act[idx] = from_f32<T>(__fmul_rn(g / (1.0f + expf(-g)), u));
  }
}

template <class T>
__global__ void __launch_bounds__(kRowThreads) gelu_tanh_mul_kernel(const float* gate_up, int64_t n, int64_t F,
                                                                    T* act) {
  const int64_t total = n * F;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx / F, f = idx - i * F;
    const float g = gate_up[i * 2 * F + f], u = gate_up[i * 2 * F + F + f];
    const float inner = 0.7978845608028654f * (g + 0.044715f * g * g * g);  // sqrt(2/pi) (g + 0.044715 g^3)
    act[idx] = from_f32<T>(0.5f * g * (1.0f + tanhf(inner)) * u);
  }
}

/// Grid (n, H + H_kv), 64 threads: one head vector of one row, normalised in place.
__global__ void __launch_bounds__(64) head_rmsnorm_kernel(float* qkv, int64_t ld, int n_heads, int d,
                                                          const float* q_w, const float* k_w, float eps) {
  __shared__ double scratch[32];
  const int64_t i = blockIdx.x;
  const int head = static_cast<int>(blockIdx.y);
  float* x = qkv + i * ld + static_cast<int64_t>(head) * d;
  const float* w = head < n_heads ? q_w : k_w;
  double ss = 0.0;
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    const double v = static_cast<double>(x[c]);
    ss = __dadd_rn(ss, __dmul_rn(v, v));
  }
  ss = block_sum(ss, scratch);
  const float s = static_cast<float>(1.0 / sqrt(ss / static_cast<double>(d) + static_cast<double>(eps)));
  for (int c = threadIdx.x; c < d; c += blockDim.x) x[c] = __fmul_rn(__fmul_rn(x[c], s), w[c]);
}

__global__ void __launch_bounds__(kRowThreads) scale_kernel(float* x, float s, int64_t count) {
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < count;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[idx] = __fmul_rn(x[idx], s);
}

__global__ void __launch_bounds__(kRowThreads) softcap_kernel(float* x, float cap, int64_t count) {
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < count;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[idx] = cap * tanhf(x[idx] / cap);
}

template <class T>
__global__ void __launch_bounds__(kRowThreads) to_dtype_kernel(const float* x, int64_t count, T* y) {
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < count;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[idx] = from_f32<T>(x[idx]);
}

__global__ void __launch_bounds__(kRowThreads) add_kernel(float* x, const float* y, int64_t count) {
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < count;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[idx] = __fadd_rn(x[idx], y[idx]);
}

__global__ void __launch_bounds__(kRowThreads) row_l1_kernel(const float* x, int64_t n, float* out) {
  __shared__ double scratch[32];
  const int64_t r = blockIdx.x;
  double s = 0.0;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) s = __dadd_rn(s, fabs(static_cast<double>(x[r * n + c])));
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) out[r] = static_cast<float>(s);
}

template <class T>
__global__ void __launch_bounds__(kRowThreads) fill_uniform_kernel(T* out, int64_t count, float scale, float offset,
                                                                   uint32_t k0, uint32_t k1) {
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < count;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const Philox4x32 c{{static_cast<uint32_t>(idx), static_cast<uint32_t>(static_cast<uint64_t>(idx) >> 32),
                        0x243F6A88u, 0x85A308D3u}};
    const Philox4x32 r = philox4x32_10(c, k0, k1);
    const float u = static_cast<float>(static_cast<double>(r.v[0]) * 4.656612873077393e-10 - 1.0);  // [-1, 1)
    out[idx] = from_f32<T>(offset + scale * u);
  }
}

}  // namespace

cudaError_t embed(DType t, const void* table, const int32_t* tokens, int64_t n, int64_t d_model, float* x,
                  cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const unsigned grid = static_cast<unsigned>(n);
  if (t == DType::F32) {
    auto k = embed_kernel<float>;
    RKV_LAUNCH(k, grid, kRowThreads, 0, stream, static_cast<const float*>(table), tokens, d_model, x);
  } else {
    auto k = embed_kernel<bf16>;
    RKV_LAUNCH(k, grid, kRowThreads, 0, stream, static_cast<const bf16*>(table), tokens, d_model, x);
  }
  return cudaGetLastError();
}

cudaError_t rmsnorm(const float* x, const float* w, float eps, int64_t rows, int64_t n, DType out, void* y,
                    cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  const unsigned grid = static_cast<unsigned>(rows);
  if (out == DType::F32) {
    auto k = rmsnorm_kernel<float>;
    RKV_LAUNCH(k, grid, kRowThreads, 0, stream, x, w, eps, n, static_cast<float*>(y));
  } else {
    auto k = rmsnorm_kernel<bf16>;
    RKV_LAUNCH(k, grid, kRowThreads, 0, stream, x, w, eps, n, static_cast<bf16*>(y));
  }
  return cudaGetLastError();
}

cudaError_t silu_mul(DType t, const float* gate_up, int64_t n, int64_t d_ff, void* act, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const unsigned grid = stride_blocks(n * d_ff, kRowThreads);
  if (t == DType::F32) {
    auto k = silu_mul_kernel<float>;
    RKV_LAUNCH(k, grid, kRowThreads, 0, stream, gate_up, n, d_ff, static_cast<float*>(act));
  } else {
    auto k = silu_mul_kernel<bf16>;
    RKV_LAUNCH(k, grid, kRowThreads, 0, stream, gate_up, n, d_ff, static_cast<bf16*>(act));
  }
  return cudaGetLastError();
}

cudaError_t gelu_tanh_mul(DType t, const float* gate_up, int64_t n, int64_t d_ff, void* act, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const unsigned grid = stride_blocks(n * d_ff, kRowThreads);
  if (t == DType::F32) {
    auto k = gelu_tanh_mul_kernel<float>;
    RKV_LAUNCH(k, grid, kRowThreads, 0, stream, gate_up, n, d_ff, static_cast<float*>(act));
  } else {
    auto k = gelu_tanh_mul_kernel<bf16>;
    RKV_LAUNCH(k, grid, kRowThreads, 0, stream, gate_up, n, d_ff, static_cast<bf16*>(act));
  }
  return cudaGetLastError();
}

cudaError_t head_rmsnorm(float* qkv, int64_t n, int64_t ld, int n_heads, int n_kv_heads, int head_dim,
                         const float* q_w, const float* k_w, float eps, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  auto k = head_rmsnorm_kernel;
  RKV_LAUNCH(k, dim3(static_cast<unsigned>(n), static_cast<unsigned>(n_heads + n_kv_heads)), 64, 0, stream, qkv, ld,
             n_heads, head_dim, q_w, k_w, eps);
  return cudaGetLastError();
}

cudaError_t to_dtype(const float* x, int64_t count, DType out, void* y, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  if (out == DType::F32) {
    auto k = to_dtype_kernel<float>;
    RKV_LAUNCH(k, stride_blocks(count, kRowThreads), kRowThreads, 0, stream, x, count, static_cast<float*>(y));
  } else {
    auto k = to_dtype_kernel<bf16>;
    RKV_LAUNCH(k, stride_blocks(count, kRowThreads), kRowThreads, 0, stream, x, count, static_cast<bf16*>(y));
  }
  return cudaGetLastError();
}

cudaError_t scale_inplace(float* x, float s, int64_t count, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  auto k = scale_kernel;
  RKV_LAUNCH(k, stride_blocks(count, kRowThreads), kRowThreads, 0, stream, x, s, count);
  return cudaGetLastError();
}

cudaError_t softcap(float* x, float cap, int64_t count, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  auto k = softcap_kernel;
  RKV_LAUNCH(k, stride_blocks(count, kRowThreads), kRowThreads, 0, stream, x, cap, count);
  return cudaGetLastError();
}

__global__ void __launch_bounds__(kRowThreads) store_positions_kernel(int32_t* pos, int64_t capacity, int64_t first,
                                                                      const int64_t* positions, int64_t n,
                                                                      int64_t count) {
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < count;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t h = idx / n, i = idx % n;
    pos[h * capacity + first + i] = static_cast<int32_t>(positions[i]);
  }
}

cudaError_t store_positions(int32_t* pos, int64_t capacity, int n_kv_heads, int64_t first, const int64_t* positions,
                            int64_t n, cudaStream_t stream) {
  const int64_t count = n * n_kv_heads;
  if (count <= 0) return cudaSuccess;
  auto k = store_positions_kernel;
  RKV_LAUNCH(k, stride_blocks(count, kRowThreads), kRowThreads, 0, stream, pos, capacity, first, positions, n, count);
  return cudaGetLastError();
}

cudaError_t row_l1(const float* x, int64_t rows, int64_t n, float* out, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  auto k = row_l1_kernel;
  RKV_LAUNCH(k, static_cast<unsigned>(rows), kRowThreads, 0, stream, x, n, out);
  return cudaGetLastError();
}

cudaError_t add_inplace(float* x, const float* y, int64_t count, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  auto k = add_kernel;
  RKV_LAUNCH(k, stride_blocks(count, kRowThreads), kRowThreads, 0, stream, x, y, count);
  return cudaGetLastError();
}

cudaError_t fill_uniform(DType t, void* out, int64_t count, float scale, float offset, uint64_t seed,
                         cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  const unsigned grid = stride_blocks(count, kRowThreads);
  const uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  if (t == DType::F32) {
    auto k = fill_uniform_kernel<float>;
    RKV_LAUNCH(k, grid, kRowThreads, 0, stream, static_cast<float*>(out), count, scale, offset, k0, k1);
  } else {
    auto k = fill_uniform_kernel<bf16>;
    RKV_LAUNCH(k, grid, kRowThreads, 0, stream, static_cast<bf16*>(out), count, scale, offset, k0, k1);
  }
  return cudaGetLastError();
}

}  // namespace rkv::RKV_CUDA_NS::kernels
