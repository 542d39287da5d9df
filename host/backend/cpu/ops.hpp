// Element-wise and row-wise kernels of the CPU forward pass (float32, row-major). All are pure functions of their
// arguments, thread-safe on disjoint outputs, and run on the calling thread (callers parallelize over rows).
#pragma once
#include <cstdint>

namespace rkv::cpu {

/// RMSNorm of one row (Zhang & Sennrich 2019; HF LlamaRMSNorm): y[i] = x[i] / sqrt(mean(x^2) + eps) * w[i].
/// The mean of squares is accumulated in double. x and y may alias.
void rmsnorm_row(const float* x, const float* w, float eps, int64_t n, float* y);

/// SwiGLU activation (Shazeer 2020): gate[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)). In place on gate.
void silu_mul(float* gate, const float* up, int64_t n);

/// GeGLU activation with the tanh approximation of GELU (Gemma; Hendrycks & Gimpel 2016, eq. in sec. 2; torch
/// gelu(approximate="tanh")): gate[i] = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) * up[i], g = gate[i]. In place
/// on gate; std::tanh in float32.
void gelu_tanh_mul(float* gate, const float* up, int64_t n);

/// Logit soft-capping (Gemma 2/3 final_logit_softcapping): x[i] = cap * tanh(x[i] / cap), cap > 0, in place.
void softcap(float* x, float cap, int64_t n);

/// Softmax of row x[0..n) in place, with max subtraction: x[j] = exp(x[j] - max) / sum. Uses exp_inplace's exp.
void softmax_row(float* x, int64_t n);

/// The unnormalized part of softmax_row: x[j] = exp(x[j] - max_k x[k]) in place; returns sum_j x[j] (accumulated in
/// 16 float lanes, then double). softmax_row(x) equals this followed by x[j] *= 1 / sum. Attention uses it to divide
/// the (much smaller) output rows by the sum instead of the probability rows.
float softmax_unnormalized(float* x, int64_t n);

/// x[j] = exp(x[j]) for n values: Cody-Waite range reduction x = k ln2 + r, |r| <= ln2/2, degree-6 Taylor polynomial
/// for exp(r), times 2^k. Max relative error about 2e-7 on [-87, 88]; inputs below -87.3 give 0, above 88.7 give
/// +inf. Vectorized by the compiler (AVX-512 / AVX2 clones chosen at run time).
void exp_inplace(float* x, int64_t n);

/// y[i] += b[i] for n values.
void add_bias(float* y, const float* b, int64_t n);

}  // namespace rkv::cpu
