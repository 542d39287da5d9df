// Thin row-major wrappers over OpenBLAS (cblas) used by the forward pass and by the benchmarks (the "plain sgemm"
// ceiling). OpenBLAS runs them on num_threads() threads (backend/cpu/threads.hpp). Thread-safe.
#pragma once
#include <cstdint>

namespace rkv::cpu {

/// C[m, n] = alpha * A[m, k] B[n, k]^T + beta * C  (cblas_sgemm RowMajor, NoTrans, Trans).
void gemm_nt(int64_t m, int64_t n, int64_t k, float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
             float beta, float* C, int64_t ldc);

/// C[m, n] = alpha * A[m, k] B[k, n] + beta * C  (cblas_sgemm RowMajor, NoTrans, NoTrans).
void gemm_nn(int64_t m, int64_t n, int64_t k, float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
             float beta, float* C, int64_t ldc);

/// A linear layer without bias: y[rows, out] = x[rows, in] W[out, in]^T + beta * y. Uses sgemv when rows == 1.
void linear(const float* x, int64_t rows, int64_t in, const float* W, int64_t out, float* y, float beta = 0.0f);

}  // namespace rkv::cpu
