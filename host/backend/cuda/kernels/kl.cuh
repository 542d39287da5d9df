// KL divergence between the next-token distributions of two logit rows (the perturbation_kl reduction).
#pragma once
#include "backend/cuda/kernels/common.cuh"

namespace rkv::RKV_CUDA_NS::kernels {

namespace {

constexpr int kKlThreads = 256;

/// One block per row; three passes over the vocabulary (max, sums of exponentials, KL terms), double accumulators,
/// fixed reduction order.
__global__ void __launch_bounds__(kKlThreads) kl_rows_kernel(const float* P, const float* Q, int64_t V, double* out) {
  __shared__ float fscratch[32];
  __shared__ double dscratch[32];
  const int64_t r = blockIdx.x;
  const float* p = P + r * V;
  const float* q = Q + r * V;
  float mp = -INFINITY, mq = -INFINITY;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
    mp = fmaxf(mp, p[v]);
    mq = fmaxf(mq, q[v]);
  }
  mp = block_max(mp, fscratch);
  mq = block_max(mq, fscratch);
  double sp = 0.0, sq = 0.0;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
    sp += exp(static_cast<double>(p[v]) - static_cast<double>(mp));
    sq += exp(static_cast<double>(q[v]) - static_cast<double>(mq));
  }
  sp = block_sum(sp, dscratch);
  sq = block_sum(sq, dscratch);
  const double lse_p = static_cast<double>(mp) + log(sp), lse_q = static_cast<double>(mq) + log(sq);
  double kl = 0.0;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
    const double lp = static_cast<double>(p[v]) - lse_p, lq = static_cast<double>(q[v]) - lse_q;
    kl = __dadd_rn(kl, __dmul_rn(exp(lp), lp - lq));
  }
  kl = block_sum(kl, dscratch);
  if (threadIdx.x == 0) out[r] = kl;
}

}  // namespace

cudaError_t kl_rows(const float* p_logits, const float* q_logits, int64_t rows, int64_t vocab, double* out,
                    cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (vocab <= 0) return cudaErrorInvalidValue;
  auto k = kl_rows_kernel;
  RKV_LAUNCH(k, static_cast<unsigned>(rows), kKlThreads, 0, stream, p_logits, q_logits, vocab, out);
  return cudaGetLastError();
}

}  // namespace rkv::RKV_CUDA_NS::kernels
