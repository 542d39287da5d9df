// Dot products of ggml weight blocks with quantized activations: the inner loop of the quantized matrix-vector
// product (backend/cpu/qlinear.hpp).
//
// Activations are quantized per block of 32 to int8, as llama.cpp's quantize_row_q8_1 does (ggml-quants.c; here d
// and s are float32, not fp16): d = max|x| / 127, q = nearbyint(x / d) in [-127, 127], s = d * sum(q), so x ~ d q.
// Per block b of 32 (weight layouts: model/quant_matrix.hpp), with dw, mw the block's fp16 scale and min:
//   Q8_0  dw d_b sum_j qw_j qa_j
//   Q4_0  dw d_b sum_j (nib_j - 8) qa_j
//   Q4_1  dw d_b sum_j nib_j qa_j + mw s_b
// (ggml_vec_dot_q8_0_q8_0, ggml_vec_dot_q4_0_q8_0, ggml_vec_dot_q4_1_q8_1 in llama.cpp ggml-cpu/quants.c). The
// integer sums are exact; only the block sums are accumulated in float (in an order that depends on the kernel set).
// The LM head quantizes its input to int16 instead (BlockQ16Act: d = max|x| / 32767, q in [-32767, 32767], error at
// most max|x| / 65534 per value instead of max|x| / 254) with the same formulas; the int16 products are summed in
// int32 (at most 32 * 128 * 32767 < 2^31 per block).
//
// Kernel sets: "scalar" (portable C++) and "avx2" (x86-64 AVX2 + FMA + F16C, chosen at run time when the CPU has
// them). Every function is pure and thread-safe.
#pragma once
#include <cstdint>

namespace rkv::cpu {

/// One block of 32 quantized activations: x[j] ~ d * qs[j]; s = d * sum(qs).
struct BlockQ8Act {
  float d;
  float s;
  int8_t qs[32];
};

/// Quantizes x[32 * nb] into nb blocks with the fastest kernel set (every set gives the same blocks bit for bit:
/// max and the products x * (127 / max) are exact operations or the same float rounding, nearbyint rounds to even).
void quantize_activations(const float* x, BlockQ8Act* out, int64_t nb);

/// One block of 32 activations quantized to int16 (the LM head's input): x[j] ~ d * qs[j]; s = d * sum(qs).
struct BlockQ16Act {
  float d;
  float s;
  int16_t qs[32];
};

/// Quantizes x[32 * nb] into nb int16 blocks: d = max|x| / 32767, q = nearbyint(x / d), s = d * sum(q) (as above:
/// the fastest kernel set, the same blocks from every set).
void quantize_activations(const float* x, BlockQ16Act* out, int64_t nb);

/// Dot product of one weight row (nb blocks of its type at `w`) with nb activation blocks.
using QuantDotFn = float (*)(const uint8_t* w, const BlockQ8Act* a, int64_t nb);

/// The same with int16 activation blocks.
using QuantDot16Fn = float (*)(const uint8_t* w, const BlockQ16Act* a, int64_t nb);

/// Quantizes x[32 * nb] into nb activation blocks (see quantize_activations).
using QuantizeFn = void (*)(const float* x, BlockQ8Act* out, int64_t nb);
using Quantize16Fn = void (*)(const float* x, BlockQ16Act* out, int64_t nb);

/// Dequantizes nb blocks of a native type to float32 (32 nb values), bit for bit as model/dequant.hpp does.
using DequantFn = void (*)(const uint8_t* w, float* out, int64_t nb);

/// One kernel set.
struct QuantKernels {
  const char* isa;  ///< "scalar" or "avx2"
  QuantizeFn quantize;
  Quantize16Fn quantize16;
  QuantDotFn dot_q8_0;
  QuantDotFn dot_q4_0;
  QuantDotFn dot_q4_1;
  QuantDot16Fn dot16_q8_0;
  QuantDot16Fn dot16_q4_0;
  QuantDot16Fn dot16_q4_1;
  DequantFn dequant_q8_0;
  DequantFn dequant_q4_0;
  DequantFn dequant_q4_1;
  /// The dequantization for ggml type `type` (Q8_0, Q4_0 or Q4_1); nullptr for any other type.
  DequantFn dequant_for_type(uint32_t type) const;
  /// The dot for ggml type id `type` (Q8_0, Q4_0 or Q4_1); nullptr for any other type.
  QuantDotFn for_type(uint32_t type) const;
  /// The int16-activation dot for ggml type id `type` (Q8_0, Q4_0 or Q4_1); nullptr for any other type.
  QuantDot16Fn for_type16(uint32_t type) const;
};

/// The portable kernels.
const QuantKernels& scalar_quant_kernels();
/// The AVX2 kernels, or nullptr when this CPU (or build) does not have AVX2, FMA and F16C.
const QuantKernels* avx2_quant_kernels();
/// The fastest set this CPU runs (chosen once, at first use).
const QuantKernels& quant_kernels();

}  // namespace rkv::cpu
