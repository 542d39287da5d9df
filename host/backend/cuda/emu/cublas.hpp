// The cuBLAS subset of the CPU emulator (cuda_emu.hpp): handles, workspace and cublasGemmEx for the (T, N) products
// of linear layers on float32 / bfloat16 with float32 accumulation, through OpenBLAS. Test-only (RKV_CUDA_EMU=1).
// Thread rules: a handle is used from one thread at a time (as cuBLAS).
#pragma once
#include <algorithm>
#include <vector>

#include <cblas.h>

#include "backend/cuda/emu/runtime_api.hpp"

// ---- cuBLAS ---------------------------------------------------------------------------------------------------------

enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_NOT_SUPPORTED = 15
};
struct cublasContext {
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};
using cublasHandle_t = cublasContext*;
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasMath_t { CUBLAS_DEFAULT_MATH = 0, CUBLAS_PEDANTIC_MATH = 2 };
enum cudaDataType { CUDA_R_32F = 0, CUDA_R_16BF = 14 };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };

inline const char* cublasGetStatusString(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}
inline cublasStatus_t cublasCreate(cublasHandle_t* h) {
  *h = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasDestroy(cublasHandle_t h) {
  delete h;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void* p, size_t bytes) {
  h->workspace = p;
  h->workspace_bytes = bytes;
  return CUBLAS_STATUS_SUCCESS;
}

namespace rkv::emu {
/// A column-major matrix (rows x cols, leading dimension ld) of `type` as float32, row-major [cols, rows].
inline std::vector<float> to_f32(const void* p, cudaDataType type, int rows, int cols, int ld) {
  std::vector<float> out(size_t(rows) * size_t(cols));
  for (int c = 0; c < cols; ++c)
    for (int r = 0; r < rows; ++r) {
      const size_t i = size_t(c) * size_t(ld) + size_t(r);
      out[size_t(c) * size_t(rows) + size_t(r)] =
          type == CUDA_R_32F ? static_cast<const float*>(p)[i]
                             : __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    }
  return out;
}
}  // namespace rkv::emu

/// C = alpha op(A) op(B) + beta C (column-major, as cuBLAS), only for transa = T, transb = N.
inline cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                   const void* alpha, const void* A, cudaDataType at, int lda, const void* B,
                                   cudaDataType bt, int ldb, const void* beta, void* C, cudaDataType ct, int ldc,
                                   cublasComputeType_t compute, cublasGemmAlgo_t) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (ta != CUBLAS_OP_T || tb != CUBLAS_OP_N || compute != CUBLAS_COMPUTE_32F || m <= 0 || n <= 0 || k <= 0 ||
      lda < k || ldb < k || ldc < m)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  // Column-major A (k x m) and B (k x n) are row-major Arm [m, k] and Brm [n, k]; C (m x n) is row-major Crm [n, m]:
  // Crm = Brm Arm^T.
  const std::vector<float> a = rkv::emu::to_f32(A, at, k, m, lda);  // [m, k]
  const std::vector<float> b = rkv::emu::to_f32(B, bt, k, n, ldb);  // [n, k]
  std::vector<float> c = rkv::emu::to_f32(C, ct, m, n, ldc);        // [n, m]
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  if (be == 0.0f) std::fill(c.begin(), c.end(), 0.0f);  // beta = 0: C is not read (it may hold NaN)
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, m, k, al, b.data(), k, a.data(), k, be, c.data(), m);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      const float v = c[size_t(j) * size_t(m) + size_t(i)];
      const size_t o = size_t(j) * size_t(ldc) + size_t(i);
      if (ct == CUDA_R_32F)
        static_cast<float*>(C)[o] = v;
      else
        static_cast<__nv_bfloat16*>(C)[o] = __float2bfloat16(v);
    }
  return CUBLAS_STATUS_SUCCESS;
}
