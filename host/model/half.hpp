// IEEE binary16 (fp16) and bfloat16 conversions, exact (subnormals, infinities and NaN included).
// Source: IEEE 754-2008 binary16 layout (1 sign, 5 exponent bits with bias 15, 10 mantissa bits); bfloat16 is the
// upper 16 bits of a binary32.
#pragma once
#include <cstdint>

namespace rkv {

/// fp16 bits -> float (exact). Thread-safe, pure.
float fp16_to_fp32(uint16_t h);
/// float -> fp16 bits, round to nearest even; overflow gives infinity, NaN stays NaN. Thread-safe, pure.
uint16_t fp32_to_fp16(float f);
/// bfloat16 bits -> float (exact: the bits become the upper half of a binary32).
float bf16_to_fp32(uint16_t b);
/// float -> bfloat16 bits, round to nearest even (NaN stays NaN).
uint16_t fp32_to_bf16(float f);

}  // namespace rkv
