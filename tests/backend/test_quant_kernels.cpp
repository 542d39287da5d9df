// The quantized dot kernels (backend/cpu/qdot.hpp) and the linear layer over quantized weights
// (backend/cpu/qlinear.hpp), every kernel set this CPU runs, against references computed independently: the weight
// rows dequantized by model/dequant.hpp and dotted in double with the original float activations.
//
// Tolerance (worked out): the integer block sums are exact, so the kernel computes sum_j w_j xq_j exactly up to float
// rounding, where xq = d q is the quantized activation. Per block of 32, q = nearbyint(x / d) with d = max|x| / 127, so
// |x_j - xq_j| <= d / 2 = max_b|x| / 254, and |sum_j w_j (x_j - xq_j)| <= sum_b (max_b|x| / 254) sum_{j in b} |w_j|.
// Float rounding adds at most a few ulp per block term and per accumulation step: 1e-5 * sum_j |w_j| (|x_j| + d_b)
// covers it for the row lengths used here (at most 48 blocks). int16 activations (the LM head's): the same with
// d = max|x| / 32767, so max_b|x| / 65534 in place of max_b|x| / 254.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/qdot.hpp"
#include "backend/cpu/qlinear.hpp"
#include "backend/cpu/threads.hpp"
#include "model/dequant.hpp"
#include "model/ggml_types.hpp"
#include "model/half.hpp"
#include "model/quant_matrix.hpp"

namespace {

using rkv::GgmlType;
using rkv::cpu::BlockQ16Act;
using rkv::cpu::BlockQ8Act;
using rkv::cpu::QuantKernels;

constexpr uint32_t kQ8_0 = static_cast<uint32_t>(GgmlType::Q8_0);
constexpr uint32_t kQ4_0 = static_cast<uint32_t>(GgmlType::Q4_0);
constexpr uint32_t kQ4_1 = static_cast<uint32_t>(GgmlType::Q4_1);

std::vector<const QuantKernels*> kernel_sets() {
  std::vector<const QuantKernels*> k = {&rkv::cpu::scalar_quant_kernels()};
  if (rkv::cpu::avx2_quant_kernels()) k.push_back(rkv::cpu::avx2_quant_kernels());
  return k;
}

int64_t block_bytes(uint32_t type) { return rkv::ggml_type_info(type)->type_size; }

void put_half(uint8_t* p, float x) {
  const uint16_t h = rkv::fp32_to_fp16(x);
  std::memcpy(p, &h, 2);
}

/// nb random blocks of `type`: scales in [0.001, 0.05], Q4_1 minimums in [-0.2, 0.2], quants uniform over their
/// range (Q8_0: -127..127, as llama.cpp's quantizer produces).
std::vector<uint8_t> random_blocks(uint32_t type, int64_t nb, std::mt19937& rng) {
  std::uniform_real_distribution<float> scale(0.001f, 0.05f), min(-0.2f, 0.2f);
  std::uniform_int_distribution<int> byte(0, 255), q8(-127, 127);
  const int64_t bb = block_bytes(type);
  std::vector<uint8_t> out(static_cast<size_t>(nb * bb));
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* p = out.data() + b * bb;
    put_half(p, scale(rng));
    if (type == kQ8_0) {
      for (int j = 0; j < 32; ++j) p[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(q8(rng)));
    } else {
      const int64_t qs = type == kQ4_1 ? 4 : 2;
      if (type == kQ4_1) put_half(p + 2, min(rng));
      for (int j = 0; j < 16; ++j) p[qs + j] = static_cast<uint8_t>(byte(rng));
    }
  }
  return out;
}

/// Activations: normal(0, 1) with an outlier of 20 in every fourth block (a block's scale follows its largest value).
std::vector<float> random_activations(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = g(rng);
  for (int64_t b = 0; b < n / 32; b += 4) x[static_cast<size_t>(b * 32 + 5)] = 20.0f;
  return x;
}

struct Reference {
  double dot = 0;    ///< sum_j w_j x_j (w dequantized, x the float activations), in double
  double bound = 0;  ///< the tolerance worked out at the top of this file
};

/// `half_step` = 254 for int8 activations (the rounding error is at most max|x| / 254), 65534 for int16 ones.
Reference reference(uint32_t type, const uint8_t* w, const float* x, int64_t n, double half_step = 254) {
  std::vector<float> wf(static_cast<size_t>(n));
  rkv::dequantize_row(type, w, wf.data(), n);
  Reference r;
  for (int64_t b = 0; b < n / 32; ++b) {
    double amax = 0, wabs = 0, slack = 0;
    for (int64_t j = b * 32; j < b * 32 + 32; ++j) amax = std::max(amax, std::fabs(static_cast<double>(x[j])));
    for (int64_t j = b * 32; j < b * 32 + 32; ++j) {
      r.dot += static_cast<double>(wf[j]) * x[j];
      wabs += std::fabs(wf[j]);
      slack += std::fabs(wf[j]) * (std::fabs(x[j]) + amax / 127);
    }
    r.bound += amax / half_step * wabs + 1e-5 * slack;
  }
  return r;
}

TEST(QuantActivations, HandWorkedBlock) {
  // x_j = j / 2 for j < 32: max 15.5, d = 15.5 / 127, q_j = nearbyint(j / 2 * 127 / 15.5) = nearbyint(4.0968 j).
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = 0.5f * static_cast<float>(j);
  BlockQ8Act a;
  rkv::cpu::quantize_activations(x.data(), &a, 1);
  EXPECT_FLOAT_EQ(a.d, 15.5f / 127.0f);
  EXPECT_EQ(a.qs[0], 0);
  EXPECT_EQ(a.qs[1], 4);    // 4.097
  EXPECT_EQ(a.qs[10], 41);  // 40.97
  EXPECT_EQ(a.qs[31], 127);
  int sum = 0;
  for (int j = 0; j < 32; ++j) {
    sum += a.qs[j];
    EXPECT_LE(std::fabs(x[j] - a.d * a.qs[j]), a.d / 2 * (1 + 1e-6)) << j;
  }
  EXPECT_FLOAT_EQ(a.s, a.d * static_cast<float>(sum));
  // An all-zero block quantizes to d = 0, q = 0 (no division by zero).
  std::vector<float> z(32, 0.0f);
  rkv::cpu::quantize_activations(z.data(), &a, 1);
  EXPECT_EQ(a.d, 0.0f);
  EXPECT_EQ(a.s, 0.0f);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(a.qs[j], 0);
}

TEST(QuantActivations, HandWorkedInt16Block) {
  // x_j = j / 2: max 15.5, d = 15.5 / 32767, 1 / d = 2114 exactly, so q_j = 1057 j (32767 = 31 * 1057).
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = 0.5f * static_cast<float>(j);
  BlockQ16Act a;
  rkv::cpu::quantize_activations(x.data(), &a, 1);
  EXPECT_FLOAT_EQ(a.d, 15.5f / 32767.0f);
  EXPECT_EQ(a.qs[0], 0);
  EXPECT_EQ(a.qs[1], 1057);
  EXPECT_EQ(a.qs[10], 10570);
  EXPECT_EQ(a.qs[31], 32767);
  EXPECT_FLOAT_EQ(a.s, a.d * 1057.0f * (31 * 32 / 2));  // sum_j 1057 j
  // Negative values and rounding: x = -1 at the block maximum 2, so q = nearbyint(-16383.5) = -16384 (ties to even).
  std::vector<float> y(32, 0.0f);
  y[0] = 2.0f;
  y[1] = -1.0f;
  rkv::cpu::quantize_activations(y.data(), &a, 1);
  EXPECT_EQ(a.qs[0], 32767);
  EXPECT_EQ(a.qs[1], -16384);
  std::vector<float> z(32, 0.0f);
  rkv::cpu::quantize_activations(z.data(), &a, 1);
  EXPECT_EQ(a.d, 0.0f);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(a.qs[j], 0);
}

TEST(QuantActivations, Int16LeavesAtMostMaxOver65534) {
  // d = max|x| / 32767 and |x - d q| <= d / 2 = max|x| / 65534 per value (plus float rounding of x / d).
  std::mt19937 rng(2);
  const std::vector<float> x = random_activations(96, rng);
  std::vector<BlockQ16Act> a(3);
  rkv::cpu::quantize_activations(x.data(), a.data(), 3);
  for (int b = 0; b < 3; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    for (int j = 0; j < 32; ++j) {
      const double back = static_cast<double>(a[b].d) * a[b].qs[j];
      EXPECT_LE(std::fabs(x[b * 32 + j] - back), amax / 65534.0 * (1 + 1e-3)) << b * 32 + j;
    }
  }
}

TEST(QuantActivations, EveryKernelSetGivesTheSameBlocksBitForBit) {
  // The public quantize_activations uses the fastest set; the scalar one is the reference. Ties (x * id exactly
  // halfway) round to even in both: x = 2 and -1 as in HandWorkedInt16Block, and 63.5 / 127 steps for int8.
  std::mt19937 rng(4);
  std::vector<float> x = random_activations(32 * 40, rng);
  for (int j = 0; j < 64; ++j) x[32 * 38 + j] = 0.0f;  // block 38 all zero
  x[32 * 39] = 2.0f, x[32 * 39 + 1] = -1.0f, x[32 * 39 + 2] = 1.0f;  // block 39: max 2; int8: 1 * 63.5 -> 64 (even)
  for (const QuantKernels* k : kernel_sets()) {
    std::vector<BlockQ8Act> want(40), got(40);
    std::vector<BlockQ16Act> want16(40), got16(40);
    rkv::cpu::scalar_quant_kernels().quantize(x.data(), want.data(), 40);
    rkv::cpu::scalar_quant_kernels().quantize16(x.data(), want16.data(), 40);
    k->quantize(x.data(), got.data(), 40);
    k->quantize16(x.data(), got16.data(), 40);
    EXPECT_EQ(std::memcmp(want.data(), got.data(), sizeof(BlockQ8Act) * 40), 0) << k->isa;
    EXPECT_EQ(std::memcmp(want16.data(), got16.data(), sizeof(BlockQ16Act) * 40), 0) << k->isa;
    EXPECT_EQ(got[39].qs[2], 64) << k->isa;
    EXPECT_EQ(got16[39].qs[1], -16384) << k->isa;
  }
}

TEST(QuantDot, EveryKernelMatchesTheDequantizedDotWithinTheActivationRoundingBound) {
  std::mt19937 rng(18);
  for (const QuantKernels* k : kernel_sets()) {
    for (uint32_t type : {kQ8_0, kQ4_0, kQ4_1}) {
      for (int64_t nb : {1, 2, 18, 48}) {
        for (int trial = 0; trial < 20; ++trial) {
          const std::vector<uint8_t> w = random_blocks(type, nb, rng);
          const std::vector<float> x = random_activations(nb * 32, rng);
          std::vector<BlockQ8Act> a(static_cast<size_t>(nb));
          std::vector<BlockQ16Act> a16(static_cast<size_t>(nb));
          rkv::cpu::quantize_activations(x.data(), a.data(), nb);
          rkv::cpu::quantize_activations(x.data(), a16.data(), nb);
          const Reference ref = reference(type, w.data(), x.data(), nb * 32);
          const Reference ref16 = reference(type, w.data(), x.data(), nb * 32, 65534);
          EXPECT_NEAR(k->for_type(type)(w.data(), a.data(), nb), ref.dot, ref.bound)
              << k->isa << " " << rkv::ggml_type_name(type) << " nb " << nb;
          EXPECT_NEAR(k->for_type16(type)(w.data(), a16.data(), nb), ref16.dot, ref16.bound)
              << k->isa << " int16 " << rkv::ggml_type_name(type) << " nb " << nb;
        }
      }
    }
  }
}

TEST(QuantDot, KernelSetsAgreeToFloatRounding) {
  // Same integer sums, different float summation order: the sets agree to a few ulp of the sum of |block terms|.
  const QuantKernels* avx2 = rkv::cpu::avx2_quant_kernels();
  if (!avx2) GTEST_SKIP() << "this CPU has no AVX2 + FMA + F16C: only the scalar kernels run";
  const QuantKernels& scalar = rkv::cpu::scalar_quant_kernels();
  std::mt19937 rng(7);
  for (uint32_t type : {kQ8_0, kQ4_0, kQ4_1}) {
    const int64_t nb = 18;
    const std::vector<uint8_t> w = random_blocks(type, nb, rng);
    const std::vector<float> x = random_activations(nb * 32, rng);
    std::vector<BlockQ8Act> a(static_cast<size_t>(nb));
    std::vector<BlockQ16Act> a16(static_cast<size_t>(nb));
    rkv::cpu::quantize_activations(x.data(), a.data(), nb);
    rkv::cpu::quantize_activations(x.data(), a16.data(), nb);
    const Reference ref = reference(type, w.data(), x.data(), nb * 32);
    const double tol = 1e-5 * (std::fabs(ref.dot) + ref.bound * 254);
    EXPECT_NEAR(scalar.for_type(type)(w.data(), a.data(), nb), avx2->for_type(type)(w.data(), a.data(), nb), tol)
        << rkv::ggml_type_name(type);
    EXPECT_NEAR(scalar.for_type16(type)(w.data(), a16.data(), nb), avx2->for_type16(type)(w.data(), a16.data(), nb),
                tol)
        << "int16 " << rkv::ggml_type_name(type);
  }
}

TEST(QuantDequant, EveryKernelSetGivesTheDequantizerBitForBit) {
  // The prefill's tiles: each kernel set's dequantization equals model/dequant.hpp's float for float.
  std::mt19937 rng(31);
  for (const QuantKernels* k : kernel_sets()) {
    for (uint32_t type : {kQ8_0, kQ4_0, kQ4_1}) {
      const int64_t nb = 7;
      const std::vector<uint8_t> w = random_blocks(type, nb, rng);
      std::vector<float> want(static_cast<size_t>(nb * 32)), got(want.size());
      rkv::dequantize_row(type, w.data(), want.data(), nb * 32);
      k->dequant_for_type(type)(w.data(), got.data(), nb);
      EXPECT_EQ(got, want) << k->isa << " " << rkv::ggml_type_name(type);
    }
  }
}

TEST(QuantDot, OnlyTheThreeNativeTypesHaveKernels) {
  const QuantKernels& k = rkv::cpu::quant_kernels();
  EXPECT_NE(k.for_type(kQ8_0), nullptr);
  EXPECT_NE(k.for_type16(kQ4_1), nullptr);
  EXPECT_EQ(k.for_type16(static_cast<uint32_t>(GgmlType::Q6_K)), nullptr);
  EXPECT_EQ(k.for_type(static_cast<uint32_t>(GgmlType::Q5_0)), nullptr);
  EXPECT_EQ(k.for_type(static_cast<uint32_t>(GgmlType::F32)), nullptr);
  EXPECT_EQ(k.dequant_for_type(static_cast<uint32_t>(GgmlType::Q4_K)), nullptr);
}

TEST(QuantizeRowQ8_0, RoundTripsWithinHalfAStepPlusTheFp16Scale) {
  // llama.cpp's quantize_row_q8_0_ref: |x - d q| <= d / 2 with d = max|x| / 127, plus the fp16 rounding of d
  // (relative 2^-11, times |q| <= 127: at most max|x| * 2^-11).
  std::mt19937 rng(3);
  const std::vector<float> x = random_activations(96, rng);
  std::vector<uint8_t> q(3 * 34);
  rkv::quantize_row_q8_0(x.data(), q.data(), 96);
  std::vector<float> back(96);
  rkv::dequantize_row(kQ8_0, q.data(), back.data(), 96);
  for (int b = 0; b < 3; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    for (int j = 0; j < 32; ++j)
      EXPECT_LE(std::fabs(x[b * 32 + j] - back[b * 32 + j]), amax / 254 + amax / 2048) << b * 32 + j;
  }
}

/// A [rows, cols] QuantMatrix of random blocks (owned by the returned matrix).
rkv::QuantMatrix random_matrix(uint32_t type, int64_t rows, int64_t cols, std::mt19937& rng) {
  auto bytes = std::make_shared<std::vector<uint8_t>>(random_blocks(type, rows * cols / 32, rng));
  return rkv::to_quant_matrix(type, bytes->data(), rows, cols, bytes);
}

TEST(QuantLinear, DecodeAndPrefillPathsMatchTheDequantizedProduct) {
  // n <= kQuantDotMaxRows: quantized activations (the per-row bound above); larger n: sgemm on dequantized tiles,
  // exact against the dequantized weights up to float rounding (1e-5 of sum |w x|). rows * cols > one tile, so the
  // tiled path crosses tile boundaries. beta = 1 adds to what y held.
  std::mt19937 rng(11);
  rkv::cpu::set_num_threads(2);
  const int64_t rows = 1100, cols = 1024;  // 1.1M values: two tiles of 1024 rows
  for (uint32_t type : {kQ8_0, kQ4_1}) {
    const rkv::QuantMatrix W = random_matrix(type, rows, cols, rng);
    const rkv::cpu::WeightRef ref_w{nullptr, &W, rows, cols};
    for (int64_t n : {int64_t{1}, rkv::cpu::kQuantDotMaxRows, rkv::cpu::kQuantDotMaxRows + 3}) {
      for (float beta : {0.0f, 1.0f}) {
        const std::vector<float> x = random_activations(n * cols, rng);
        std::vector<float> y(static_cast<size_t>(n * rows), beta == 0.0f ? NAN : 0.25f);
        rkv::cpu::QuantScratch scratch;
        rkv::cpu::weight_linear(x.data(), n, ref_w, y.data(), scratch, beta);
        const bool quant_path = n <= rkv::cpu::kQuantDotMaxRows;
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t r = 0; r < rows; r += 37) {
            Reference ref = reference(type, W.row(r), x.data() + i * cols, cols);
            if (!quant_path) ref.bound = 1e-4 * (ref.bound * 254);  // a scale of sum |w x|; no activation rounding
            const double want = ref.dot + (beta == 0.0f ? 0.0 : 0.25);
            EXPECT_NEAR(y[static_cast<size_t>(i * rows + r)], want, ref.bound)
                << rkv::ggml_type_name(type) << " n " << n << " row " << r << " beta " << beta;
          }
        }
      }
    }
  }
}

TEST(QuantLinear, Int16ActivationsShrinkTheBoundTo65534) {
  // The decode path with ActivationPrecision::int16 (the LM head's): the activation term of the bound is
  // max|x| / 65534 per value instead of max|x| / 254; the float-rounding term stays.
  std::mt19937 rng(12);
  const int64_t rows = 64, cols = 576;
  for (uint32_t type : {kQ8_0, kQ4_0, kQ4_1}) {
    const rkv::QuantMatrix W = random_matrix(type, rows, cols, rng);
    const std::vector<float> x = random_activations(cols, rng);
    std::vector<float> y(static_cast<size_t>(rows));
    rkv::cpu::QuantScratch scratch;
    rkv::cpu::weight_linear(x.data(), 1, {nullptr, &W, rows, cols}, y.data(), scratch, 0.0f,
                            rkv::cpu::ActivationPrecision::int16);
    for (int64_t r = 0; r < rows; ++r) {
      const Reference ref = reference(type, W.row(r), x.data(), cols, 65534);
      EXPECT_NEAR(y[static_cast<size_t>(r)], ref.dot, ref.bound) << rkv::ggml_type_name(type) << " row " << r;
    }
  }
}

TEST(QuantLinear, AGroupGivesBitForBitTheSeparateProducts) {
  // weight_linear_group quantizes the input once and splits all rows in one dispatch; each output is the same kernel
  // on the same quantized input as in a separate weight_linear call, so the results are equal bit for bit (decode
  // sizes), and equal to separate calls on the tiled path too (n above kQuantDotMaxRows: it falls back to them).
  std::mt19937 rng(13);
  rkv::cpu::set_num_threads(2);
  const int64_t cols = 128;
  const rkv::QuantMatrix A = random_matrix(kQ4_1, 40, cols, rng), B = random_matrix(kQ8_0, 24, cols, rng),
                         C = random_matrix(kQ4_0, 8, cols, rng);
  for (int64_t n : {int64_t{1}, int64_t{3}, rkv::cpu::kQuantDotMaxRows + 1}) {
    const std::vector<float> x = random_activations(n * cols, rng);
    std::vector<float> ya(n * 40), yb(n * 24), yc(n * 8), sa(n * 40), sb(n * 24), sc(n * 8);
    rkv::cpu::QuantScratch scratch;
    const rkv::cpu::WeightRef wa{nullptr, &A, 40, cols}, wb{nullptr, &B, 24, cols}, wc{nullptr, &C, 8, cols};
    rkv::cpu::weight_linear_group(x.data(), n, {{wa, ya.data()}, {wb, yb.data()}, {wc, yc.data()}}, scratch);
    rkv::cpu::weight_linear(x.data(), n, wa, sa.data(), scratch);
    rkv::cpu::weight_linear(x.data(), n, wb, sb.data(), scratch);
    rkv::cpu::weight_linear(x.data(), n, wc, sc.data(), scratch);
    EXPECT_EQ(ya, sa) << n;
    EXPECT_EQ(yb, sb) << n;
    EXPECT_EQ(yc, sc) << n;
  }
}

TEST(QuantMatrix, RequantizesOtherTypesToQ8_0AndViewsNativeOnes) {
  // An F16 matrix becomes Q8_0 (owned copy) within the Q8_0 round-trip bound; a Q4_1 one is used in place.
  std::mt19937 rng(5);
  const int64_t rows = 3, cols = 64;
  const std::vector<float> x = random_activations(rows * cols, rng);
  auto f16 = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(rows * cols * 2));
  for (int64_t i = 0; i < rows * cols; ++i) put_half(f16->data() + 2 * i, x[static_cast<size_t>(i)]);
  const rkv::QuantMatrix q = rkv::to_quant_matrix(static_cast<uint32_t>(GgmlType::F16), f16->data(), rows, cols, f16);
  EXPECT_EQ(q.type, kQ8_0);
  EXPECT_NE(q.data, f16->data());
  EXPECT_EQ(q.row_bytes(), 2 * 34);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    rkv::dequantize_matrix_row(q, r, row.data());
    for (int64_t b = 0; b < 2; ++b) {
      float amax = 0;
      for (int64_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(rkv::fp16_to_fp32(rkv::fp32_to_fp16(x[r * cols + b * 32 + j]))));
      for (int64_t j = 0; j < 32; ++j) {
        const float orig = rkv::fp16_to_fp32(rkv::fp32_to_fp16(x[r * cols + b * 32 + j]));
        EXPECT_LE(std::fabs(row[b * 32 + j] - orig), amax / 254 + amax / 2048);
      }
    }
  }
  auto q41 = std::make_shared<std::vector<uint8_t>>(random_blocks(kQ4_1, rows * cols / 32, rng));
  const rkv::QuantMatrix v = rkv::to_quant_matrix(kQ4_1, q41->data(), rows, cols, q41);
  EXPECT_EQ(v.type, kQ4_1);
  EXPECT_EQ(v.data, q41->data());
  EXPECT_EQ(v.row(2), q41->data() + 2 * 2 * 20);
}

}  // namespace
