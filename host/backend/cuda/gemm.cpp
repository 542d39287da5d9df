#include "backend/cuda/gemm.hpp"

#include <climits>
#include <stdexcept>
#include <string>

namespace rkv::RKV_CUDA_NS {

namespace {
cudaDataType cuda_type(DType t) { return t == DType::F32 ? CUDA_R_32F : CUDA_R_16BF; }
}  // namespace

void linear(Context& ctx, int64_t rows, int64_t in, int64_t out, const void* W, DType wt, const void* x, DType xt,
            void* y, DType yt, float beta, int64_t ldw) {
  if (rows <= 0) return;
  if (ldw == 0) ldw = in;
  if (ldw < in) throw std::invalid_argument("linear: weight row stride " + std::to_string(ldw) + " below in = " +
                                            std::to_string(in));
  if (rows > INT_MAX || in > INT_MAX || out > INT_MAX || ldw > INT_MAX)
    throw std::invalid_argument("linear: dimensions " + std::to_string(rows) + " x " + std::to_string(in) + " x " +
                                std::to_string(out) + " exceed cuBLAS's int range");
  if (wt != xt) throw std::invalid_argument("linear: weights and activations must share a storage type");
  // Column-major view: W is [in x out] (lda = ldw), x is [in x rows] (ldb = in), y is [out x rows] (ldc = out);
  // y = W^T x gives y[r, o] = sum_i W[o, i] x[r, i].
  const float alpha = 1.0f;
  RKV_CUBLAS_CHECK(cublasGemmEx(ctx.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out), static_cast<int>(rows),
                                static_cast<int>(in), &alpha, W, cuda_type(wt), static_cast<int>(ldw), x, cuda_type(xt),
                                static_cast<int>(in), &beta, y, cuda_type(yt), static_cast<int>(out),
                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace rkv::RKV_CUDA_NS
