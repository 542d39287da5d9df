// Scorer statistics (cache/attention_stats.hpp): window attention sums and cumulative attention sums over the columns
// (keys) of the causal softmax, from the queries and keys of a prefill chunk and the per-row log-sum-exp that
// prefill_attention() wrote. Deterministic: a block owns 64 key columns of one query head and walks the query rows
// in order; no atomics.
#pragma once
#include "backend/cuda/kernels/common.cuh"

namespace rkv::RKV_CUDA_NS::kernels {

namespace {

constexpr int kStatKeys = 64;      // key columns per block
constexpr int kStatRows = 32;      // query rows per shared tile
constexpr int kStatThreads = 256;  // thread (kj = tid % 64, qg = tid / 64) handles rows qg*8 .. qg*8+7 of a tile

/// Dynamic shared memory: K tile [64][D + 1], Q tile [32][D], lse [32], partial sums [2][4][64].
constexpr size_t stats_smem_bytes(int D) {
  return sizeof(float) * (static_cast<size_t>(kStatKeys) * (D + 1) + static_cast<size_t>(kStatRows) * D + kStatRows +
                          2 * 4 * kStatKeys);
}

/// Grid (ceil((first + n) / 64), H).
template <class T, int D>
__global__ void __launch_bounds__(kStatThreads)
    attention_stats_kernel(const T* q, int64_t q_ld, int64_t n, int64_t first, const float* lse, const T* k_cache,
                           int64_t capacity, int G, float scale, float softcap, int64_t window, const int32_t* k_pos,
                           const int64_t* q_pos, int64_t stats_len, int64_t window_start, float* win, float* cum) {
  constexpr int DP = D + 1;
  RKV_DYNAMIC_SMEM(float, smem);
  float* Ks = smem;                    // [64][DP]
  float* Qs = Ks + kStatKeys * DP;     // [32][D]
  float* Ls = Qs + kStatRows * D;      // [32]
  float* red = Ls + kStatRows;         // [2][4][64]
  const int tid = threadIdx.x, kj = tid & 63, qg = tid >> 6;
  const int h = blockIdx.y, g = h / G;
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kStatKeys;
  const int64_t kv_end = first + n;
  const T* kh = k_cache + static_cast<int64_t>(g) * capacity * D;
  for (int idx = tid; idx < kStatKeys * D; idx += kStatThreads) {
    const int c = idx / D, e = idx - c * D;
    const int64_t j = j0 + c;
    Ks[c * DP + e] = j < kv_end ? to_f32(kh[j * D + e]) : 0.0f;
  }
  // Row i (position first + i) sees key j iff j <= first + i; without cumulative sums only window rows matter.
  int64_t i_begin = imax64(0, j0 - first);
  if (!cum) i_begin = imax64(i_begin, window_start - first);
  const int64_t j = j0 + kj;
  const int32_t* kp = window > 0 ? k_pos + static_cast<int64_t>(g) * capacity : nullptr;  // sliding window only
  const int64_t kpos = kp && j < kv_end ? kp[j] : 0;
  float cs = 0.0f, wsum = 0.0f;
  for (int64_t r0 = i_begin; r0 < n; r0 += kStatRows) {
    __syncthreads();  // K tile written (first pass); the previous Q tile consumed
    for (int idx = tid; idx < kStatRows * D; idx += kStatThreads) {
      const int r = idx / D, e = idx - r * D;
      const int64_t i = r0 + r;
      Qs[r * D + e] = i < n ? to_f32(q[i * q_ld + static_cast<int64_t>(h) * D + e]) : 0.0f;
    }
    if (tid < kStatRows) Ls[tid] = r0 + tid < n ? lse[static_cast<int64_t>(h) * n + r0 + tid] : 0.0f;
    __syncthreads();
    for (int rr = 0; rr < 8; ++rr) {
      const int r = qg * 8 + rr;
      const int64_t i = r0 + r, t = first + i;
      float s = 0.0f;
      for (int e = 0; e < D; ++e) s = fmaf(Qs[r * D + e], Ks[kj * DP + e], s);
      if (i < n && j <= t && (!kp || q_pos[i] - kpos < window)) {
        const float p = expf(softcap_score(s * scale, softcap) - Ls[r]);
        cs += p;
        if (t >= window_start) wsum += p;
      }
    }
  }
  red[qg * kStatKeys + kj] = cs;
  red[4 * kStatKeys + qg * kStatKeys + kj] = wsum;
  __syncthreads();
  if (qg == 0 && j < kv_end) {
    const float* rc = red;
    const float* rw = red + 4 * kStatKeys;
    const int64_t o = static_cast<int64_t>(h) * stats_len + j;
    if (cum) cum[o] += ((rc[kj] + rc[kStatKeys + kj]) + rc[2 * kStatKeys + kj]) + rc[3 * kStatKeys + kj];
    if (win) win[o] += ((rw[kj] + rw[kStatKeys + kj]) + rw[2 * kStatKeys + kj]) + rw[3 * kStatKeys + kj];
  }
}

template <class T, int D>
cudaError_t launch_stats(const void* q, int64_t q_ld, int64_t n, int64_t first, const float* lse, const void* k_cache,
                         int64_t capacity, AttentionShape s, int64_t stats_len, int64_t window_start, float* win,
                         float* cum, cudaStream_t stream) {
  auto k = attention_stats_kernel<T, D>;
  const size_t smem = stats_smem_bytes(D);
  const cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>((first + n + kStatKeys - 1) / kStatKeys), static_cast<unsigned>(s.n_heads));
  RKV_LAUNCH(k, grid, kStatThreads, smem, stream, static_cast<const T*>(q), q_ld, n, first, lse,
             static_cast<const T*>(k_cache), capacity, s.n_heads / s.n_kv_heads, s.scale, s.softcap, s.window, s.k_pos,
             s.q_pos,
             stats_len, window_start, win, cum);
  return cudaGetLastError();
}

}  // namespace

cudaError_t attention_stats(DType t, const void* q, int64_t q_ld, int64_t n, int64_t first_index, const float* lse,
                            const void* k_cache, int64_t capacity, AttentionShape shape, int64_t stats_len,
                            int64_t window_start, float* window_sums, float* cumulative_sums, cudaStream_t stream) {
  if (n <= 0 || (!window_sums && !cumulative_sums)) return cudaSuccess;
  if (first_index + n > stats_len || shape.n_kv_heads <= 0 || shape.n_heads % shape.n_kv_heads != 0)
    return cudaErrorInvalidValue;
  if (t == DType::F32) {
    if (shape.head_dim == 64)
      return launch_stats<float, 64>(q, q_ld, n, first_index, lse, k_cache, capacity, shape, stats_len, window_start,
                                     window_sums, cumulative_sums, stream);
    if (shape.head_dim == 128)
      return launch_stats<float, 128>(q, q_ld, n, first_index, lse, k_cache, capacity, shape, stats_len, window_start,
                                      window_sums, cumulative_sums, stream);
    if (shape.head_dim == 256)
      return launch_stats<float, 256>(q, q_ld, n, first_index, lse, k_cache, capacity, shape, stats_len, window_start,
                                      window_sums, cumulative_sums, stream);
  } else {
    if (shape.head_dim == 64)
      return launch_stats<bf16, 64>(q, q_ld, n, first_index, lse, k_cache, capacity, shape, stats_len, window_start,
                                    window_sums, cumulative_sums, stream);
    if (shape.head_dim == 128)
      return launch_stats<bf16, 128>(q, q_ld, n, first_index, lse, k_cache, capacity, shape, stats_len, window_start,
                                     window_sums, cumulative_sums, stream);
    if (shape.head_dim == 256)
      return launch_stats<bf16, 256>(q, q_ld, n, first_index, lse, k_cache, capacity, shape, stats_len, window_start,
                                     window_sums, cumulative_sums, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace rkv::RKV_CUDA_NS::kernels
