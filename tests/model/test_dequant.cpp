// Dequantization of every supported ggml type, checked on hand-made blocks whose values are worked out by hand in
// the comments (block layouts: ggml-common.h; formulas: ggml-quants.c dequantize_row_*).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/errors.hpp"
#include "model/dequant.hpp"
#include "model/ggml_types.hpp"
#include "model/half.hpp"

namespace {

using rkv::GgmlType;

// fp16 bit patterns used below: 1.0 = 0x3C00, 0.5 = 0x3800, 0.25 = 0x3400, 2.0 = 0x4000, -1.0 = 0xBC00.
void put16(std::vector<uint8_t>& b, size_t at, uint16_t v) {
  b[at] = static_cast<uint8_t>(v & 0xFF);
  b[at + 1] = static_cast<uint8_t>(v >> 8);
}

std::vector<float> dq(GgmlType t, const std::vector<uint8_t>& b, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n), std::numeric_limits<float>::quiet_NaN());
  rkv::dequantize_row(static_cast<uint32_t>(t), b.data(), y.data(), n);
  return y;
}

TEST(Half, Fp16ToFp32KnownValues) {
  EXPECT_EQ(rkv::fp16_to_fp32(0x3C00), 1.0f);
  EXPECT_EQ(rkv::fp16_to_fp32(0xC000), -2.0f);
  EXPECT_EQ(rkv::fp16_to_fp32(0x7BFF), 65504.0f);
  EXPECT_EQ(rkv::fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(rkv::fp16_to_fp32(0x0200), std::ldexp(1.0f, -15));  // subnormal 512 * 2^-24
  EXPECT_EQ(rkv::fp16_to_fp32(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(rkv::fp16_to_fp32(0x3555), 0.333251953125f);        // 1365/4096
  EXPECT_EQ(rkv::fp16_to_fp32(0x8000), -0.0f);
  EXPECT_TRUE(std::signbit(rkv::fp16_to_fp32(0x8000)));
  EXPECT_TRUE(std::isinf(rkv::fp16_to_fp32(0x7C00)));
  EXPECT_TRUE(std::isnan(rkv::fp16_to_fp32(0x7E00)));
}

TEST(Half, Fp32ToFp16RoundsToNearestEven) {
  EXPECT_EQ(rkv::fp32_to_fp16(1.0f), 0x3C00);
  EXPECT_EQ(rkv::fp32_to_fp16(1.0f / 3.0f), 0x3555);
  EXPECT_EQ(rkv::fp32_to_fp16(65519.0f), 0x7BFF);
  EXPECT_EQ(rkv::fp32_to_fp16(65520.0f), 0x7C00);                       // rounds up to infinity
  EXPECT_EQ(rkv::fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);   // tie -> even
  EXPECT_EQ(rkv::fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie -> even (up)
  EXPECT_EQ(rkv::fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);          // tie between 0 and 2^-24 -> 0
  EXPECT_EQ(rkv::fp32_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(rkv::fp32_to_fp16(std::ldexp(1.0f, -15)), 0x0200);
  EXPECT_EQ(rkv::fp32_to_fp16(-2.0f), 0xC000);
  for (uint32_t h = 0; h < 0x7C00; ++h) {  // every finite positive fp16 round-trips
    ASSERT_EQ(rkv::fp32_to_fp16(rkv::fp16_to_fp32(static_cast<uint16_t>(h))), h);
  }
}

TEST(Half, Bf16KnownValues) {
  EXPECT_EQ(rkv::bf16_to_fp32(0x3F80), 1.0f);
  EXPECT_EQ(rkv::bf16_to_fp32(0xC0A0), -5.0f);
  EXPECT_EQ(rkv::bf16_to_fp32(0x4049), 3.140625f);
  EXPECT_EQ(rkv::fp32_to_bf16(3.14159265f), 0x4049);
  EXPECT_EQ(rkv::fp32_to_bf16(1.0f), 0x3F80);
}

TEST(Dequant, PlainTypes) {
  std::vector<uint8_t> f32(8);
  const float v[2] = {1.5f, -3.25f};
  std::memcpy(f32.data(), v, 8);
  EXPECT_EQ(dq(GgmlType::F32, f32, 2), (std::vector<float>{1.5f, -3.25f}));
  std::vector<uint8_t> f16(6);
  put16(f16, 0, 0x3C00); put16(f16, 2, 0xC000); put16(f16, 4, 0x3555);
  EXPECT_EQ(dq(GgmlType::F16, f16, 3), (std::vector<float>{1.0f, -2.0f, 0.333251953125f}));
  std::vector<uint8_t> bf(4);
  put16(bf, 0, 0xC0A0); put16(bf, 2, 0x4049);
  EXPECT_EQ(dq(GgmlType::BF16, bf, 2), (std::vector<float>{-5.0f, 3.140625f}));
}

TEST(Dequant, Q8_0) {
  // d = 0.5, qs[j] = j - 16  ->  y[j] = (j - 16) / 2.
  std::vector<uint8_t> b(34);
  put16(b, 0, 0x3800);
  for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 16));
  const auto y = dq(GgmlType::Q8_0, b, 32);
  EXPECT_EQ(y[0], -8.0f);
  EXPECT_EQ(y[15], -0.5f);
  EXPECT_EQ(y[16], 0.0f);
  EXPECT_EQ(y[31], 7.5f);
}

TEST(Dequant, Q4_0) {
  // d = 2, qs[j] = j | (15-j) << 4  ->  y[j] = 2 (j - 8), y[j+16] = 2 (7 - j).
  std::vector<uint8_t> b(18);
  put16(b, 0, 0x4000);
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = dq(GgmlType::Q4_0, b, 32);
  EXPECT_EQ(y[0], -16.0f);
  EXPECT_EQ(y[8], 0.0f);
  EXPECT_EQ(y[15], 14.0f);
  EXPECT_EQ(y[16], 14.0f);
  EXPECT_EQ(y[31], -16.0f);
}

TEST(Dequant, Q4_1) {
  // d = 0.5, m = -1, qs[j] = j | j << 4  ->  y[j] = y[j+16] = j/2 - 1.
  std::vector<uint8_t> b(20);
  put16(b, 0, 0x3800);
  put16(b, 2, 0xBC00);
  for (int j = 0; j < 16; ++j) b[4 + j] = static_cast<uint8_t>(j | (j << 4));
  const auto y = dq(GgmlType::Q4_1, b, 32);
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[3], 0.5f);
  EXPECT_EQ(y[19], 0.5f);
  EXPECT_EQ(y[15], 6.5f);
  EXPECT_EQ(y[31], 6.5f);
}

TEST(Dequant, Q5_0) {
  // d = 1, qh = 0xFFFF0001 (5th bit set for elements 0 and 16..31), qs[j] = j | j << 4.
  // y[0] = (0|16) - 16 = 0; y[1] = 1 - 16 = -15; y[15] = -1; y[21] = (5|16) - 16 = 5; y[31] = 15.
  std::vector<uint8_t> b(22);
  put16(b, 0, 0x3C00);
  const uint32_t qh = 0xFFFF0001u;
  std::memcpy(b.data() + 2, &qh, 4);
  for (int j = 0; j < 16; ++j) b[6 + j] = static_cast<uint8_t>(j | (j << 4));
  const auto y = dq(GgmlType::Q5_0, b, 32);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], -15.0f);
  EXPECT_EQ(y[15], -1.0f);
  EXPECT_EQ(y[16], 0.0f);
  EXPECT_EQ(y[21], 5.0f);
  EXPECT_EQ(y[31], 15.0f);
}

TEST(Dequant, Q5_1) {
  // d = 0.25, m = 2, qh = 0x80000000 (element 31 only), qs[j] = 0x21 (low 1, high 2).
  // y[j<16] = 0.25 + 2 = 2.25; y[16..30] = 0.5 + 2 = 2.5; y[31] = 0.25 * 18 + 2 = 6.5.
  std::vector<uint8_t> b(24);
  put16(b, 0, 0x3400);
  put16(b, 2, 0x4000);
  const uint32_t qh = 0x80000000u;
  std::memcpy(b.data() + 4, &qh, 4);
  for (int j = 0; j < 16; ++j) b[8 + j] = 0x21;
  const auto y = dq(GgmlType::Q5_1, b, 32);
  EXPECT_EQ(y[0], 2.25f);
  EXPECT_EQ(y[15], 2.25f);
  EXPECT_EQ(y[16], 2.5f);
  EXPECT_EQ(y[30], 2.5f);
  EXPECT_EQ(y[31], 6.5f);
}

TEST(Dequant, IQ4_NL) {
  // d = 0.5, qs[j] = j | (15-j) << 4; levels {-127,...,113}: y[0] = -63.5, y[8] = 0.5, y[15] = 56.5,
  // y[16] = 113/2 = 56.5, y[31] = -63.5, y[20] = level[11]/2 = 19.
  std::vector<uint8_t> b(18);
  put16(b, 0, 0x3800);
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = dq(GgmlType::IQ4_NL, b, 32);
  EXPECT_EQ(y[0], -63.5f);
  EXPECT_EQ(y[8], 0.5f);
  EXPECT_EQ(y[15], 56.5f);
  EXPECT_EQ(y[16], 56.5f);
  EXPECT_EQ(y[20], 19.0f);
  EXPECT_EQ(y[31], -63.5f);
}

// The 12 packed scale bytes shared by the Q4_K and Q5_K tests. Decoded (get_scale_min_k4) by hand:
//   q = {65, 2, 3, 4, 133, 6, 7, 8, 0x93, 0x21, 0x00, 0xFF}
//   s0: sc = 65&63 = 1, m = 133&63 = 5      s1: sc 2, m 6     s2: sc 3, m 7     s3: sc 4, m 8
//   s4: sc = (0x93&15) | (65>>6)<<4 = 3|16 = 19,  m = (0x93>>4) | (133>>6)<<4 = 9|32 = 41
//   s5: sc = 1, m = 2      s6: sc 0, m 0      s7: sc 15, m 15
std::vector<uint8_t> k_scales() { return {65, 2, 3, 4, 133, 6, 7, 8, 0x93, 0x21, 0x00, 0xFF}; }

TEST(Dequant, Q4_K) {
  // d = 1, dmin = 0.5, qs all 0x3A (low nibble 10 -> even sub-blocks, high nibble 3 -> odd sub-blocks),
  // y = d*sc*q - dmin*m per sub-block of 32:
  //   s0: 10 - 2.5 = 7.5   s1: 6 - 3 = 3   s2: 30 - 3.5 = 26.5   s3: 12 - 4 = 8
  //   s4: 190 - 20.5 = 169.5   s5: 3 - 1 = 2   s6: 0   s7: 45 - 7.5 = 37.5
  // qs[33] = 0x5F: group 1, l = 1 -> element 65 (s2, q 15): 45 - 3.5 = 41.5; element 97 (s3, q 5): 20 - 4 = 16.
  std::vector<uint8_t> b(144);
  put16(b, 0, 0x3C00);
  put16(b, 2, 0x3800);
  const auto sc = k_scales();
  std::copy(sc.begin(), sc.end(), b.begin() + 4);
  for (int l = 0; l < 128; ++l) b[16 + l] = 0x3A;
  b[16 + 33] = 0x5F;
  const auto y = dq(GgmlType::Q4_K, b, 256);
  const float expect_sub[8] = {7.5f, 3.0f, 26.5f, 8.0f, 169.5f, 2.0f, 0.0f, 37.5f};
  for (int s = 0; s < 8; ++s) {
    EXPECT_EQ(y[32 * s], expect_sub[s]) << "sub-block " << s;
    EXPECT_EQ(y[32 * s + 31], expect_sub[s]) << "sub-block " << s;
  }
  EXPECT_EQ(y[65], 41.5f);
  EXPECT_EQ(y[97], 16.0f);
  EXPECT_EQ(y[64], 26.5f);
}

TEST(Dequant, Q5_K) {
  // As Q4_K (same scales, d = 1, dmin = 0.5, qs all 0x3A) plus high bits: qh[0] = 1 (bit 0 -> sub-block 0,
  // element 0 gets +16) and qh[5] = 0x80 (bit 7 -> sub-block 7, element 7*32+5 = 229 gets +16).
  //   y[0] = (10+16) - 2.5 = 23.5; y[1] = 7.5; y[32] = 3; y[229] = 15*(3+16) - 7.5 = 277.5; y[228] = 37.5.
  std::vector<uint8_t> b(176);
  put16(b, 0, 0x3C00);
  put16(b, 2, 0x3800);
  const auto sc = k_scales();
  std::copy(sc.begin(), sc.end(), b.begin() + 4);
  b[16 + 0] = 0x01;
  b[16 + 5] = 0x80;
  for (int l = 0; l < 128; ++l) b[48 + l] = 0x3A;
  const auto y = dq(GgmlType::Q5_K, b, 256);
  EXPECT_EQ(y[0], 23.5f);
  EXPECT_EQ(y[1], 7.5f);
  EXPECT_EQ(y[32], 3.0f);
  EXPECT_EQ(y[160], 2.0f);
  EXPECT_EQ(y[229], 277.5f);
  EXPECT_EQ(y[228], 37.5f);
}

TEST(Dequant, Q6_K) {
  // d = 0.5; scales[i] = i + 1 except scales[3] = -2; every 16 consecutive elements share scales[e / 16].
  // ql all 0x21 (low 1, high 2), qh all 0xE4 (bits 0-1 = 0, 2-3 = 1, 4-5 = 2, 6-7 = 3). Within each half of 128:
  //   run 0 (e%128 in 0..31):   q = (1 | 0<<4) - 32 = -31      run 1 (32..63): q = (1 | 1<<4) - 32 = -15
  //   run 2 (64..95):           q = (2 | 2<<4) - 32 = 2        run 3 (96..127): q = (2 | 3<<4) - 32 = 18
  //   y[0] = 0.5*1*-31 = -15.5   y[16] = 0.5*2*-31 = -31   y[32] = 0.5*3*-15 = -22.5   y[48] = 0.5*-2*-15 = 15
  //   y[64] = 0.5*5*2 = 5        y[96] = 0.5*7*18 = 63      y[128] = 0.5*9*-31 = -139.5  y[255] = 0.5*16*18 = 144
  // ql[64+10] = 0x0F (half 1, l = 10): element 138 low 15, qh bits 0 -> q = -17, scale 9: -76.5;
  //   element 128+64+10 = 202: high 0, qh bits 4-5 = 2 -> q = 0 -> 0.
  std::vector<uint8_t> b(210);
  for (int l = 0; l < 128; ++l) b[l] = 0x21;
  for (int l = 0; l < 64; ++l) b[128 + l] = 0xE4;
  for (int i = 0; i < 16; ++i) b[192 + i] = static_cast<uint8_t>(static_cast<int8_t>(i + 1));
  b[192 + 3] = static_cast<uint8_t>(static_cast<int8_t>(-2));
  put16(b, 208, 0x3800);
  b[64 + 10] = 0x0F;
  const auto y = dq(GgmlType::Q6_K, b, 256);
  EXPECT_EQ(y[0], -15.5f);
  EXPECT_EQ(y[16], -31.0f);
  EXPECT_EQ(y[32], -22.5f);
  EXPECT_EQ(y[48], 15.0f);
  EXPECT_EQ(y[64], 5.0f);
  EXPECT_EQ(y[96], 63.0f);
  EXPECT_EQ(y[128], -139.5f);
  EXPECT_EQ(y[255], 144.0f);
  EXPECT_EQ(y[138], -76.5f);
  EXPECT_EQ(y[202], 0.0f);
}

TEST(Dequant, SeveralBlocksInARow) {
  // Two Q8_0 blocks: d = 1 with qs = 1, then d = 2 with qs = -3.
  std::vector<uint8_t> b(68);
  put16(b, 0, 0x3C00);
  for (int j = 0; j < 32; ++j) b[2 + j] = 1;
  put16(b, 34, 0x4000);
  for (int j = 0; j < 32; ++j) b[36 + j] = static_cast<uint8_t>(static_cast<int8_t>(-3));
  const auto y = dq(GgmlType::Q8_0, b, 64);
  EXPECT_EQ(y[31], 1.0f);
  EXPECT_EQ(y[32], -6.0f);
  EXPECT_EQ(y[63], -6.0f);
}

TEST(Dequant, RejectsUnsupportedTypesAndBadCounts) {
  std::vector<uint8_t> b(300);
  std::vector<float> y(256);
  EXPECT_THROW(rkv::dequantize_row(static_cast<uint32_t>(GgmlType::Q2_K), b.data(), y.data(), 256), rkv::InputError);
  EXPECT_THROW(rkv::dequantize_row(999, b.data(), y.data(), 256), rkv::InputError);
  EXPECT_THROW(rkv::dequantize_row(static_cast<uint32_t>(GgmlType::Q4_0), b.data(), y.data(), 31), rkv::InputError);
  EXPECT_FALSE(rkv::can_dequantize(static_cast<uint32_t>(GgmlType::IQ2_XXS)));
  EXPECT_TRUE(rkv::can_dequantize(static_cast<uint32_t>(GgmlType::Q6_K)));
}

}  // namespace
