// Attention of one new row over a long (possibly compacted) KV cache: split-K "flash-decoding" (Dao et al. 2023).
// Each block reduces a contiguous range of one KV head's cache for all G query heads of that KV head (so each key and
// value row is read once per step), keeping an online softmax per query head; a second kernel merges the splits:
//   M = max_s m_s,  L = sum_s l_s e^{m_s - M},  o = (sum_s o_s e^{m_s - M}) / L.
#pragma once
#include "backend/cuda/kernels/common.cuh"

namespace rkv::RKV_CUDA_NS::kernels {

namespace {

constexpr int kDecodeWarps = 4;
constexpr int kDecodeThreads = 32 * kDecodeWarps;
constexpr int kDecodeMaxGroup = 8;  // G = H / H_kv at most 8
constexpr int64_t kDecodeMinChunk = 256;
constexpr int kDecodeMaxSplits = 256;

/// Grid (splits, H_kv), 128 threads. Warp w takes keys j_begin + w, j_begin + w + 4, ...; lane owns dims lane + 32 k.
/// Writes per (split, query head) the unnormalised output [D], the max m and the sum l to ws[split][h][D + 2].
template <class T, int D>
__global__ void __launch_bounds__(kDecodeThreads)
    decode_split_kernel(const T* q, const T* k_cache, const T* v_cache, int64_t capacity, int64_t length, int G,
                        float scale, float softcap, int64_t window, const int32_t* k_pos, const int64_t* q_pos,
                        int64_t chunk, float* ws) {
  constexpr int EPL = D / 32;
  __shared__ float sm_m[kDecodeWarps][kDecodeMaxGroup];
  __shared__ float sm_l[kDecodeWarps][kDecodeMaxGroup];
  __shared__ float sm_o[kDecodeWarps][kDecodeMaxGroup][D];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int split = blockIdx.x, g = blockIdx.y;
  const int H = static_cast<int>(gridDim.y) * G;
  const int64_t j_begin = static_cast<int64_t>(split) * chunk;
  const int64_t j_end = imin64(length, j_begin + chunk);

  float qr[kDecodeMaxGroup][EPL], acc[kDecodeMaxGroup][EPL], m[kDecodeMaxGroup], l[kDecodeMaxGroup];
#pragma unroll
  for (int a = 0; a < kDecodeMaxGroup; ++a) {
    m[a] = -INFINITY;
    l[a] = 0.0f;
#pragma unroll
    for (int k = 0; k < EPL; ++k) {
      qr[a][k] = a < G ? to_f32(q[static_cast<int64_t>(g * G + a) * D + lane + 32 * k]) : 0.0f;
      acc[a][k] = 0.0f;
    }
  }
  const T* kh = k_cache + static_cast<int64_t>(g) * capacity * D;
  const T* vh = v_cache + static_cast<int64_t>(g) * capacity * D;
  const int32_t* kp = window > 0 ? k_pos + static_cast<int64_t>(g) * capacity : nullptr;  // sliding window only
  const int64_t qp = kp ? q_pos[0] : 0;
  for (int64_t j = j_begin + warp; j < j_end; j += kDecodeWarps) {
    if (kp && qp - kp[j] >= window) continue;  // older than the window (uniform across the warp)
    float kv[EPL], vv[EPL];
#pragma unroll
    for (int k = 0; k < EPL; ++k) {
      kv[k] = to_f32(kh[j * D + lane + 32 * k]);
      vv[k] = to_f32(vh[j * D + lane + 32 * k]);
    }
#pragma unroll
    for (int a = 0; a < kDecodeMaxGroup; ++a) {
      if (a < G) {  // uniform across the block
        float part = 0.0f;
#pragma unroll
        for (int k = 0; k < EPL; ++k) part = fmaf(qr[a][k], kv[k], part);
        const float s = softcap_score(warp_sum(part) * scale, softcap);
        const float mn = fmaxf(m[a], s);
        const float corr = expf(m[a] - mn);
        const float p = expf(s - mn);
        l[a] = l[a] * corr + p;
#pragma unroll
        for (int k = 0; k < EPL; ++k) acc[a][k] = fmaf(p, vv[k], acc[a][k] * corr);
        m[a] = mn;
      }
    }
  }
#pragma unroll
  for (int a = 0; a < kDecodeMaxGroup; ++a) {
    if (a < G) {
      if (lane == 0) {
        sm_m[warp][a] = m[a];
        sm_l[warp][a] = l[a];
      }
#pragma unroll
      for (int k = 0; k < EPL; ++k) sm_o[warp][a][lane + 32 * k] = acc[a][k];
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < G * D; idx += kDecodeThreads) {
    const int a = idx / D, e = idx - a * D;
    float M = -INFINITY;
    for (int w = 0; w < kDecodeWarps; ++w) M = fmaxf(M, sm_m[w][a]);
    float L = 0.0f, O = 0.0f;
    for (int w = 0; w < kDecodeWarps; ++w) {
      const float f = M == -INFINITY ? 0.0f : expf(sm_m[w][a] - M);  // 0 for a warp that saw no key (m = -inf)
      L += sm_l[w][a] * f;
      O += sm_o[w][a][e] * f;
    }
    float* part = ws + (static_cast<int64_t>(split) * H + g * G + a) * (D + 2);
    part[e] = O;
    if (e == 0) {
      part[D] = M;
      part[D + 1] = L;
    }
  }
}

/// Grid H, D threads: merges the splits of query head h and writes out[h, :].
template <class T, int D>
__global__ void __launch_bounds__(D) decode_merge_kernel(const float* ws, int splits, T* out) {
  const int h = blockIdx.x, e = threadIdx.x, H = gridDim.x;
  float M = -INFINITY;
  for (int s = 0; s < splits; ++s) M = fmaxf(M, ws[(static_cast<int64_t>(s) * H + h) * (D + 2) + D]);
  float L = 0.0f, O = 0.0f;
  for (int s = 0; s < splits; ++s) {
    const float* p = ws + (static_cast<int64_t>(s) * H + h) * (D + 2);
    const float f = expf(p[D] - M);
    L += p[D + 1] * f;
    O += p[e] * f;
  }
  out[static_cast<int64_t>(h) * D + e] = from_f32<T>(O / L);
}

template <class T, int D>
cudaError_t launch_decode(const void* q, const void* k_cache, const void* v_cache, int64_t capacity, int64_t length,
                          AttentionShape s, int splits, float* ws, void* out, cudaStream_t stream) {
  const int64_t chunk = (length + splits - 1) / splits;
  const int used = static_cast<int>((length + chunk - 1) / chunk);  // every split holds at least one key
  auto k1 = decode_split_kernel<T, D>;
  RKV_LAUNCH(k1, dim3(static_cast<unsigned>(used), static_cast<unsigned>(s.n_kv_heads)), kDecodeThreads, 0, stream,
             static_cast<const T*>(q), static_cast<const T*>(k_cache), static_cast<const T*>(v_cache), capacity,
             length, s.n_heads / s.n_kv_heads, s.scale, s.softcap, s.window, s.k_pos, s.q_pos, chunk, ws);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  auto k2 = decode_merge_kernel<T, D>;
  RKV_LAUNCH(k2, static_cast<unsigned>(s.n_heads), D, 0, stream, static_cast<const float*>(ws), used,
             static_cast<T*>(out));
  return cudaGetLastError();
}

}  // namespace

int decode_attention_splits(int64_t length, int n_kv_heads, int sm_count) {
  const int64_t want = (2 * static_cast<int64_t>(sm_count > 0 ? sm_count : 1) + n_kv_heads - 1) / n_kv_heads;
  const int64_t by_length = (length + kDecodeMinChunk - 1) / kDecodeMinChunk;
  int64_t splits = want < by_length ? want : by_length;
  if (splits > kDecodeMaxSplits) splits = kDecodeMaxSplits;
  return static_cast<int>(splits < 1 ? 1 : splits);
}

cudaError_t decode_attention(DType t, const void* q, const void* k_cache, const void* v_cache, int64_t capacity,
                             int64_t length, AttentionShape shape, int splits, float* workspace, void* out,
                             cudaStream_t stream) {
  if (length <= 0 || splits <= 0 || shape.n_kv_heads <= 0 || shape.n_heads % shape.n_kv_heads != 0 ||
      shape.n_heads / shape.n_kv_heads > kDecodeMaxGroup || shape.n_kv_heads > 65535)
    return cudaErrorInvalidValue;
  if (t == DType::F32) {
    if (shape.head_dim == 64)
      return launch_decode<float, 64>(q, k_cache, v_cache, capacity, length, shape, splits, workspace, out, stream);
    if (shape.head_dim == 128)
      return launch_decode<float, 128>(q, k_cache, v_cache, capacity, length, shape, splits, workspace, out, stream);
    if (shape.head_dim == 256)
      return launch_decode<float, 256>(q, k_cache, v_cache, capacity, length, shape, splits, workspace, out, stream);
  } else {
    if (shape.head_dim == 64)
      return launch_decode<bf16, 64>(q, k_cache, v_cache, capacity, length, shape, splits, workspace, out, stream);
    if (shape.head_dim == 128)
      return launch_decode<bf16, 128>(q, k_cache, v_cache, capacity, length, shape, splits, workspace, out, stream);
    if (shape.head_dim == 256)
      return launch_decode<bf16, 256>(q, k_cache, v_cache, capacity, length, shape, splits, workspace, out, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace rkv::RKV_CUDA_NS::kernels
