// Linear layers through cuBLAS (cublasGemmEx) on the context's stream.
#pragma once
#include <cstdint>

#include "backend/cuda/context.hpp"
#include "backend/cuda/kernels/kernels.hpp"

namespace rkv::RKV_CUDA_NS {

using kernels::DType;

/// y[rows, out] = x[rows, in] W[out, in]^T + beta * y  (row-major; W in PyTorch nn.Linear layout), float32
/// accumulation (CUBLAS_COMPUTE_32F; no TF32). W and x have storage types wt and xt (F32 or BF16, both the same), y
/// has yt (F32 or BF16); beta = 1 adds into y (the residual stream). W's rows are ldw elements apart (0: in, a
/// whole matrix; more: `in` columns of a wider one, e.g. one head's columns of o_proj). Throws CudaError when cuBLAS
/// fails, and std::invalid_argument for dimensions beyond int range, ldw in (0, in) or mixed W/x types.
void linear(Context& ctx, int64_t rows, int64_t in, int64_t out, const void* W, DType wt, const void* x, DType xt,
            void* y, DType yt, float beta = 0.0f, int64_t ldw = 0);

}  // namespace rkv::RKV_CUDA_NS
