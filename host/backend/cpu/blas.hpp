// Thin row-major wrappers over OpenBLAS (cblas) used by the forward pass and by the benchmarks (the "plain sgemm"
// ceiling). OpenBLAS runs them on num_threads() threads (backend/cpu/threads.hpp). Thread-safe.
//
// OpenBLAS kernel selection: Debian's OpenBLAS 0.3.21 picks its kernels by CPU model and falls back to the generic
// "Prescott" (SSE3) kernels on CPUs newer than it knows (e.g. Emerald Rapids), about 4x slower than its AVX-512 ones.
// When libripplekv is loaded it therefore checks the chosen core and, if it is such a legacy fallback while the CPU
// supports AVX-512 (F, CD, BW, DQ, VL) or AVX2+FMA, re-runs OpenBLAS's dynamic-arch selection with OPENBLAS_CORETYPE
// set to SkylakeX or Haswell. A user-set OPENBLAS_CORETYPE is always respected. See blas_core_name().
#pragma once
#include <cstdint>
#include <string>

namespace rkv::cpu {

/// C[m, n] = alpha * A[m, k] B[n, k]^T + beta * C  (cblas_sgemm RowMajor, NoTrans, Trans).
void gemm_nt(int64_t m, int64_t n, int64_t k, float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
             float beta, float* C, int64_t ldc);

/// C[m, n] = alpha * A[m, k] B[k, n] + beta * C  (cblas_sgemm RowMajor, NoTrans, NoTrans).
void gemm_nn(int64_t m, int64_t n, int64_t k, float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
             float beta, float* C, int64_t ldc);

/// A linear layer without bias: y[rows, out] = x[rows, in] W[out, in]^T + beta * y. Uses sgemv when rows == 1.
void linear(const float* x, int64_t rows, int64_t in, const float* W, int64_t out, float* y, float beta = 0.0f);

/// The kernel set OpenBLAS runs (openblas_get_corename(), e.g. "SkylakeX"), and " (selected by ripplekv)" appended
/// when the load-time correction above replaced a legacy fallback.
std::string blas_core_name();

}  // namespace rkv::cpu
