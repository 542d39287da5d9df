#include "model/half.hpp"

#include <cstring>

namespace rkv {

static float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
static uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) return bits_to_float(sign | 0x7F800000u | (mant << 13));  // inf / NaN
  if (exp == 0) {
    if (mant == 0) return bits_to_float(sign);  // +-0
    // Subnormal: value = mant * 2^-24; normalize.
    int e = -1;
    do {
      mant <<= 1;
      ++e;
    } while ((mant & 0x400u) == 0);
    mant &= 0x3FFu;
    return bits_to_float(sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant << 13));
  }
  return bits_to_float(sign | (exp + 127 - 15) << 23 | (mant << 13));
}

uint16_t fp32_to_fp16(float f) {
  const uint32_t u = float_to_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t absu = u & 0x7FFFFFFFu;
  if (absu > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u);  // NaN
  if (absu >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to >= 65520 -> inf
  const int exp = static_cast<int>(absu >> 23) - 127;
  uint32_t mant = (absu & 0x7FFFFFu) | 0x800000u;  // 24-bit significand with the implicit 1
  int shift;                                         // bits to drop from the 24-bit significand
  uint32_t base;
  if (exp < -14) {  // subnormal in fp16: value = m * 2^-24
    if (exp < -25) return sign;  // below half the smallest subnormal: rounds to zero
    shift = 13 + (-14 - exp);
    base = 0;
  } else {
    shift = 13;
    base = static_cast<uint32_t>(exp + 15) << 10;
    mant &= 0x7FFFFFu;
  }
  uint32_t q = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return static_cast<uint16_t>(sign | (base + q));  // a mantissa carry correctly bumps the exponent
}

float bf16_to_fp32(uint16_t b) { return bits_to_float(static_cast<uint32_t>(b) << 16); }

uint16_t fp32_to_bf16(float f) {
  const uint32_t u = float_to_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  const uint32_t rounding = 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

}  // namespace rkv
