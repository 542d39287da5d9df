// Causal grouped-query attention over new rows (prefill), FlashAttention-style (Dao et al. 2022, Algorithm 1):
// a block owns 64 query rows of one query head and walks the visible keys in tiles of 64, keeping a running max m,
// running sum l and unnormalised output per row (online softmax, Milakov & Gimelshein 2018). No [rows, keys] matrix
// is ever stored beyond one 64 x 64 tile in shared memory. Float32 math on CUDA cores, from fp32 or bf16 storage.
#pragma once
#include "backend/cuda/kernels/common.cuh"

namespace rkv::RKV_CUDA_NS::kernels {

namespace {

constexpr int kPrefillRows = 64;     // query rows per block (Br)
constexpr int kPrefillKeys = 64;     // keys per tile (Bc)
constexpr int kPrefillThreads = 128; // 16 row groups (ty) x 8 column lanes (tx)

/// Whether the V tile shares the K tile's shared memory (loaded after the scores of a tile are taken): for D = 256,
/// where separate Q, K, V and P tiles (209 KB) would not fit an A100's 163 KB; with the V tile in K's place they take
/// 145 KB. D = 64 and 128 keep both tiles (one load per tile, no extra barrier).
__host__ __device__ constexpr bool prefill_shares_kv(int D) { return D > 128; }

/// Dynamic shared memory of prefill_attention_kernel<T, D>: Q and K tiles [64][D + 1], V tile [64][D] (unless it
/// shares K's), P tile [64][65].
constexpr size_t prefill_smem_bytes(int D) {
  return sizeof(float) * (static_cast<size_t>(kPrefillRows) * (D + 1) + static_cast<size_t>(kPrefillKeys) * (D + 1) +
                          (prefill_shares_kv(D) ? 0 : static_cast<size_t>(kPrefillKeys) * D) +
                          static_cast<size_t>(kPrefillRows) * (kPrefillKeys + 1));
}

/// Grid (ceil(n / 64), H), 128 threads. Thread (ty = tid / 8, tx = tid % 8) owns rows ty*4 .. ty*4+3 of the tile;
/// for scores it owns key columns tx + 8 c (c < 8), for the output dims tx + 8 e (e < D / 8). The 8 threads of a row
/// group are 8 consecutive lanes of one warp, so row max and row sum are 8-lane butterflies.
template <class T, int D>
__global__ void __launch_bounds__(kPrefillThreads)
    prefill_attention_kernel(const T* q, int64_t q_ld, int64_t n, const T* k_cache, const T* v_cache,
                             int64_t capacity, int64_t first, int G, float scale, float softcap, int64_t window,
                             const int32_t* k_pos, const int64_t* q_pos, T* out, int64_t out_ld, float* lse) {
  constexpr int DP = D + 1;
  constexpr int PP = kPrefillKeys + 1;
  constexpr int EPT = D / 8;
  RKV_DYNAMIC_SMEM(float, smem);
  float* Qs = smem;                      // [64][DP]
  float* Ks = Qs + kPrefillRows * DP;    // [64][DP]
  constexpr bool share = prefill_shares_kv(D);
  float* Vs = share ? Ks : Ks + kPrefillKeys * DP;  // [64][D]
  float* Ps = share ? Ks + kPrefillKeys * DP : Vs + kPrefillKeys * D;  // [64][PP]
  const int tid = threadIdx.x, tx = tid & 7, ty = tid >> 3;
  const int h = blockIdx.y, g = h / G;
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * kPrefillRows;
  const int64_t rows = imin64(kPrefillRows, n - i0);
  const T* kh = k_cache + static_cast<int64_t>(g) * capacity * D;
  const T* vh = v_cache + static_cast<int64_t>(g) * capacity * D;
  const int32_t* kp = window > 0 ? k_pos + static_cast<int64_t>(g) * capacity : nullptr;  // sliding window only

  for (int idx = tid; idx < kPrefillRows * D; idx += kPrefillThreads) {
    const int r = idx / D, c = idx - r * D;
    Qs[r * DP + c] = r < rows ? to_f32(q[(i0 + r) * q_ld + static_cast<int64_t>(h) * D + c]) : 0.0f;
  }
  float m[4], l[4], acc[4][EPT];
  int64_t last[4];  // the last key index each of my rows may see (rows past n behave like row n - 1)
  int64_t qp[4];    // my rows' positions (sliding window only)
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int e = 0; e < EPT; ++e) acc[r][e] = 0.0f;
    last[r] = first + imin64(i0 + ty * 4 + r, n - 1);
    qp[r] = kp ? q_pos[imin64(i0 + ty * 4 + r, n - 1)] : 0;
  }
  const int64_t kv_end = first + i0 + rows;  // keys [0, kv_end) are visible to some row of this tile

  for (int64_t j0 = 0; j0 < kv_end; j0 += kPrefillKeys) {
    __syncthreads();  // the Q tile is written (first tile); K, V and P of the previous tile are consumed
    for (int idx = tid; idx < kPrefillKeys * D; idx += kPrefillThreads) {
      const int c = idx / D, e = idx - c * D;
      const int64_t j = j0 + c;
      const bool ok = j < kv_end;
      Ks[c * DP + e] = ok ? to_f32(kh[j * D + e]) : 0.0f;
      if (!share) Vs[c * D + e] = ok ? to_f32(vh[j * D + e]) : 0.0f;
    }
    __syncthreads();

    float s[4][8];
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int c = 0; c < 8; ++c) s[r][c] = 0.0f;
    for (int e = 0; e < D; ++e) {
      float qv[4], kv[8];
#pragma unroll
      for (int r = 0; r < 4; ++r) qv[r] = Qs[(ty * 4 + r) * DP + e];
#pragma unroll
      for (int c = 0; c < 8; ++c) kv[c] = Ks[(tx + 8 * c) * DP + e];
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 8; ++c) s[r][c] = fmaf(qv[r], kv[c], s[r][c]);
    }

#pragma unroll
    for (int r = 0; r < 4; ++r) {
      float mt = -INFINITY;
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        const int64_t j = j0 + tx + 8 * c;
        const bool visible = j <= last[r] && (!kp || qp[r] - kp[j] < window);
        s[r][c] = visible ? softcap_score(s[r][c] * scale, softcap) : -INFINITY;
        mt = fmaxf(mt, s[r][c]);
      }
      mt = group_allreduce<8>(mt, MaxOp{});
      const float mn = fmaxf(m[r], mt);  // -inf while a sliding window has shown the row no key yet
      const float corr = mn == -INFINITY ? 1.0f : expf(m[r] - mn);  // 0 on the row's first visible tile
      float ps = 0.0f;
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        const float p = s[r][c] == -INFINITY ? 0.0f : expf(s[r][c] - mn);
        Ps[(ty * 4 + r) * PP + tx + 8 * c] = p;
        ps += p;
      }
      ps = group_allreduce<8>(ps, SumOp{});
      l[r] = l[r] * corr + ps;
      m[r] = mn;
#pragma unroll
      for (int e = 0; e < EPT; ++e) acc[r][e] *= corr;
    }
    __syncthreads();  // the P tile is complete (and, with a shared K/V tile, the K tile is consumed)
    if (share) {  // D = 256: the V tile now takes the K tile's place
      for (int idx = tid; idx < kPrefillKeys * D; idx += kPrefillThreads) {
        const int c = idx / D, e = idx - c * D;
        const int64_t j = j0 + c;
        Vs[c * D + e] = j < kv_end ? to_f32(vh[j * D + e]) : 0.0f;
      }
      __syncthreads();
    }

    for (int c = 0; c < kPrefillKeys; ++c) {
      float pv[4], vv[EPT];
#pragma unroll
      for (int r = 0; r < 4; ++r) pv[r] = Ps[(ty * 4 + r) * PP + c];
#pragma unroll
      for (int e = 0; e < EPT; ++e) vv[e] = Vs[c * D + tx + 8 * e];
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int e = 0; e < EPT; ++e) acc[r][e] = fmaf(pv[r], vv[e], acc[r][e]);
    }
  }

#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int row = ty * 4 + r;
    if (row < rows) {
      const float inv = 1.0f / l[r];
      T* o = out + (i0 + row) * out_ld + static_cast<int64_t>(h) * D;
#pragma unroll
      for (int e = 0; e < EPT; ++e) o[tx + 8 * e] = from_f32<T>(acc[r][e] * inv);
      if (lse && tx == 0) lse[static_cast<int64_t>(h) * n + i0 + row] = m[r] + logf(l[r]);
    }
  }
}

template <class T, int D>
cudaError_t launch_prefill(const void* q, int64_t q_ld, int64_t n, const void* k_cache, const void* v_cache,
                           int64_t capacity, int64_t first, AttentionShape s, void* out, int64_t out_ld, float* lse,
                           cudaStream_t stream) {
  auto k = prefill_attention_kernel<T, D>;
  const size_t smem = prefill_smem_bytes(D);
  const cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>((n + kPrefillRows - 1) / kPrefillRows), static_cast<unsigned>(s.n_heads));
  RKV_LAUNCH(k, grid, kPrefillThreads, smem, stream, static_cast<const T*>(q), q_ld, n,
             static_cast<const T*>(k_cache), static_cast<const T*>(v_cache), capacity, first,
             s.n_heads / s.n_kv_heads, s.scale, s.softcap, s.window, s.k_pos, s.q_pos, static_cast<T*>(out), out_ld,
             lse);
  return cudaGetLastError();
}

}  // namespace

cudaError_t prefill_attention(DType t, const void* q, int64_t q_ld, int64_t n, const void* k_cache,
                              const void* v_cache, int64_t capacity, int64_t first_index, AttentionShape shape,
                              void* out, int64_t out_ld, float* lse, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (shape.n_kv_heads <= 0 || shape.n_heads % shape.n_kv_heads != 0 || shape.n_heads > 65535)
    return cudaErrorInvalidValue;
  if (t == DType::F32) {
    if (shape.head_dim == 64)
      return launch_prefill<float, 64>(q, q_ld, n, k_cache, v_cache, capacity, first_index, shape, out, out_ld, lse,
                                       stream);
    if (shape.head_dim == 128)
      return launch_prefill<float, 128>(q, q_ld, n, k_cache, v_cache, capacity, first_index, shape, out, out_ld, lse,
                                        stream);
    if (shape.head_dim == 256)
      return launch_prefill<float, 256>(q, q_ld, n, k_cache, v_cache, capacity, first_index, shape, out, out_ld, lse,
                                        stream);
  } else {
    if (shape.head_dim == 64)
      return launch_prefill<bf16, 64>(q, q_ld, n, k_cache, v_cache, capacity, first_index, shape, out, out_ld, lse,
                                      stream);
    if (shape.head_dim == 128)
      return launch_prefill<bf16, 128>(q, q_ld, n, k_cache, v_cache, capacity, first_index, shape, out, out_ld, lse,
                                       stream);
    if (shape.head_dim == 256)
      return launch_prefill<bf16, 256>(q, q_ld, n, k_cache, v_cache, capacity, first_index, shape, out, out_ld, lse,
                                       stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace rkv::RKV_CUDA_NS::kernels
