// KV codecs (cache/codec.hpp) and the packed layer (cache/packed_kv.hpp):
//  - byte counts worked out by hand from each layout (q4_0 block of 32 = 18 bytes, ...);
//  - hand-encoded groups byte for byte (int2 asymmetric, int4 symmetric, llama.cpp's q4_0 from its reference code);
//  - round-to-nearest error within half a step of the stored scale on random data, every format;
//  - packing the oldest entries (residual, KIVI's key units), unpacking, appending, and the bytes held.
// The numpy comparison of dequantized caches and attention is tests/cache/test_codec_numpy.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cache/codec.hpp"
#include "cache/layer_bits.hpp"
#include "cache/packed_kv.hpp"
#include "core/errors.hpp"
#include "model/half.hpp"

namespace {

using rkv::CodecFormat;
using rkv::CodecSpec;

CodecSpec integer(int bits, int64_t group, bool symmetric, int64_t residual = 0) {
  CodecSpec s;
  s.format = CodecFormat::integer;
  s.bits = bits;
  s.group = group;
  s.symmetric = symmetric;
  s.residual = residual;
  return s;
}

CodecSpec kivi(int bits, int64_t group, int64_t residual) {
  CodecSpec s;
  s.format = CodecFormat::kivi;
  s.bits = bits;
  s.group = group;
  s.residual = residual;
  return s;
}

CodecSpec block(CodecFormat f) {
  CodecSpec s;
  s.format = f;
  return s;
}

std::vector<float> random_rows(size_t n, uint32_t seed, float scale = 3.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

float fp16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return rkv::fp16_to_fp32(h);
}

TEST(CodecBytes, ByHandFromTheLayouts) {
  // d = 64. int4 asymmetric, groups of 32: 2 groups x (fp16 scale + fp16 min + 32 x 4 bits = 16) = 40.
  EXPECT_EQ(rkv::codec_value_row_bytes(integer(4, 32, false), 64), 40u);
  // int4 symmetric: 2 x (2 + 16) = 36; int2 asymmetric: 2 x (4 + 8) = 24; int8 symmetric g64: 2 + 64 = 66.
  EXPECT_EQ(rkv::codec_value_row_bytes(integer(4, 32, true), 64), 36u);
  EXPECT_EQ(rkv::codec_value_row_bytes(integer(2, 32, false), 64), 24u);
  EXPECT_EQ(rkv::codec_value_row_bytes(integer(8, 64, true), 64), 66u);
  // llama.cpp: q8_0 block of 32 = 2 + 32 = 34 bytes, q4_0 = 2 + 16 = 18 bytes.
  EXPECT_EQ(rkv::codec_value_row_bytes(block(CodecFormat::q8_0), 32), 34u);
  EXPECT_EQ(rkv::codec_value_row_bytes(block(CodecFormat::q4_0), 32), 18u);
  EXPECT_EQ(rkv::codec_value_row_bytes(block(CodecFormat::q4_0), 64), 36u);
  // KIVI 2-bit, group 32: a key unit is 32 entries; each of 64 channels is one group (4 + 32 x 2 / 8 = 12): 768
  // bytes, i.e. 24 per entry; a value row is 2 groups of 12 = 24.
  EXPECT_EQ(rkv::codec_key_quantum(kivi(2, 32, 0)), 32);
  EXPECT_EQ(rkv::codec_key_unit_bytes(kivi(2, 32, 0), 64), 768u);
  EXPECT_EQ(rkv::codec_value_row_bytes(kivi(2, 32, 0), 64), 24u);
  EXPECT_EQ(rkv::codec_key_quantum(integer(4, 32, false)), 1);
}

TEST(CodecGroups, Int2AsymmetricByteForByte) {
  // x = [0, 1, 2, 3], 2 bits: min 0, scale (3 - 0) / 3 = 1, codes 0 1 2 3 -> payload 0b11'10'01'00 = 0xE4.
  const float x[4] = {0, 1, 2, 3};
  uint8_t out[5];
  rkv::encode_integer_group(x, 1, 4, 2, false, out);
  const uint8_t expect[5] = {0x00, 0x3C, 0x00, 0x00, 0xE4};  // fp16 1.0 = 0x3C00, fp16 0 = 0x0000
  for (int i = 0; i < 5; ++i) EXPECT_EQ(out[i], expect[i]) << "byte " << i;
  float y[4];
  rkv::decode_integer_group(out, 4, 2, false, y, 1);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y[i], x[i]);
}

TEST(CodecGroups, Int4SymmetricByteForByte) {
  // x = [-7, 3.5]: scale 7 / 7 = 1; codes round(-7) = -7 and round(3.5) = 4 (half away from zero), stored + 8:
  // 1 and 12 -> payload 1 | 12 << 4 = 0xC1; decoded -7 and 4 (error 0.5 = half a step).
  const float x[2] = {-7.0f, 3.5f};
  uint8_t out[3];
  rkv::encode_integer_group(x, 1, 2, 4, true, out);
  EXPECT_EQ(out[0], 0x00);
  EXPECT_EQ(out[1], 0x3C);
  EXPECT_EQ(out[2], 0xC1);
  float y[2];
  rkv::decode_integer_group(out, 2, 4, true, y, 1);
  EXPECT_EQ(y[0], -7.0f);
  EXPECT_EQ(y[1], 4.0f);
}

TEST(CodecGroups, Q4_0AsLlamaCppReferenceCode) {
  // ggml-quants.c quantize_row_q4_0_ref on x[j] = j - 16: the largest magnitude is x[0] = -16, so d = -16 / -8 = 2,
  // q[j] = min(15, trunc(x[j] / 2 + 8.5)): q[0] = 0, q[1] = 1, q[16] = 8, q[31] = min(15, 16) = 15.
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16);
  uint8_t out[18];
  rkv::quantize_row_q4_0(x, out, 32);
  EXPECT_EQ(fp16_at(out), 2.0f);
  EXPECT_EQ(out[2], 0x80);                // q[0] = 0 low, q[16] = 8 high
  EXPECT_EQ(out[2 + 1], 0x91);            // q[1] = 1 (trunc(-7.5 + 8.5) = 1), q[17] = 9 (trunc(0.5 + 8.5))
  EXPECT_EQ(out[2 + 15] >> 4, 15);        // q[31] clamps at 15
  float y[32];
  rkv::decode_value_row(block(CodecFormat::q4_0), out, 32, y);
  EXPECT_EQ(y[0], -16.0f);  // (0 - 8) * 2
  EXPECT_EQ(y[1], -14.0f);  // x = -15 -> (1 - 8) * 2: error 1 = d / 2
  EXPECT_EQ(y[31], 14.0f);  // x = 15 -> (15 - 8) * 2
}

/// |x - x'| <= s / 2 for every element of every group, s the group's stored scale (plus float rounding).
void expect_half_step(const CodecSpec& spec, int64_t d) {
  SCOPED_TRACE(spec.label());
  const std::vector<float> x = random_rows(static_cast<size_t>(d) * 8, 17);
  const bool sym = spec.format == CodecFormat::integer && spec.symmetric;
  const size_t gb = rkv::integer_group_bytes(spec.group, spec.bits, sym);
  std::vector<uint8_t> packed(rkv::codec_value_row_bytes(spec, d));
  std::vector<float> y(static_cast<size_t>(d));
  for (int64_t r = 0; r < 8; ++r) {
    const float* row = x.data() + r * d;
    rkv::encode_value_row(spec, row, d, packed.data());
    rkv::decode_value_row(spec, packed.data(), d, y.data());
    for (int64_t i = 0; i < d; ++i) {
      const float s = fp16_at(packed.data() + static_cast<size_t>(i / spec.group) * gb);
      EXPECT_LE(std::fabs(row[i] - y[static_cast<size_t>(i)]), 0.5f * s * (1 + 1e-5f) + 1e-6f) << "row " << r << " i " << i;
    }
  }
}

TEST(CodecError, IntegerWithinHalfAStep) {
  for (bool sym : {false, true})
    for (int bits : {2, 4, 8}) expect_half_step(integer(bits, 32, sym), 64);
  expect_half_step(integer(4, 16, false), 64);
  expect_half_step(kivi(2, 32, 0), 64);  // KIVI's value rows
}

TEST(CodecError, KiviKeysPerChannelWithinHalfAStep) {
  // A key unit of 32 entries: channel c's 32 values share one scale, stored at byte c x 12.
  const CodecSpec spec = kivi(2, 32, 0);
  const int64_t d = 64;
  std::vector<float> x = random_rows(32 * d, 5);
  for (int64_t t = 0; t < 32; ++t) x[static_cast<size_t>(t * d + 3)] += 100.0f;  // an outlier channel (KIVI's motive)
  std::vector<uint8_t> unit(rkv::codec_key_unit_bytes(spec, d));
  std::vector<float> y(x.size());
  rkv::encode_key_unit(spec, x.data(), d, unit.data());
  rkv::decode_key_unit(spec, unit.data(), d, y.data());
  for (int64_t c = 0; c < d; ++c) {
    const float s = fp16_at(unit.data() + c * 12);
    for (int64_t t = 0; t < 32; ++t)
      EXPECT_LE(std::fabs(x[static_cast<size_t>(t * d + c)] - y[static_cast<size_t>(t * d + c)]), 0.5f * s * (1 + 1e-5f) + 1e-6f);
  }
  // Per channel, the outlier channel's offset costs the other channels nothing: channel 0's step is that of N(0, 3)
  // over 32 values, far below the outlier channel's +100 range.
  EXPECT_LT(fp16_at(unit.data()), 10.0f);
}

TEST(CodecError, LlamaCppBlocksWithinHalfAStepPlusScaleRounding) {
  // q8_0: d = amax / 127 rounded to fp16 after q is computed with the float d: |x - q d16| <= d / 2 + 127 |d - d16|.
  const int64_t d = 64;
  const std::vector<float> x = random_rows(static_cast<size_t>(d), 9);
  for (CodecFormat f : {CodecFormat::q8_0, CodecFormat::q4_0}) {
    const CodecSpec spec = block(f);
    std::vector<uint8_t> packed(rkv::codec_value_row_bytes(spec, d));
    std::vector<float> y(static_cast<size_t>(d));
    rkv::encode_value_row(spec, x.data(), d, packed.data());
    rkv::decode_value_row(spec, packed.data(), d, y.data());
    const size_t bb = f == CodecFormat::q8_0 ? 34 : 18;
    const float qmax = f == CodecFormat::q8_0 ? 127.0f : 8.0f;
    for (int64_t i = 0; i < d; ++i) {
      float amax = 0;
      for (int64_t j = i / 32 * 32; j < i / 32 * 32 + 32; ++j) amax = std::max(amax, std::fabs(x[static_cast<size_t>(j)]));
      const float d_true = amax / qmax, d16 = std::fabs(fp16_at(packed.data() + static_cast<size_t>(i / 32) * bb));
      // q4_0 also clamps the code 16 to 15 at +amax: one more step there (its known asymmetry, ggml-quants.c).
      const float slack = f == CodecFormat::q4_0 ? d16 : 0.0f;
      EXPECT_LE(std::fabs(x[static_cast<size_t>(i)] - y[static_cast<size_t>(i)]),
                0.5f * d_true + qmax * std::fabs(d_true - d16) + slack + 1e-5f)
          << codec_format_name(f) << " i " << i;
    }
  }
}

TEST(CodecCheck, RefusesWhatCannotPack) {
  EXPECT_THROW(rkv::check_codec(integer(3, 32, false), 64, "k"), rkv::InputError);
  EXPECT_THROW(rkv::check_codec(integer(4, 24, false), 64, "k"), rkv::InputError);  // 24 does not divide 64
  EXPECT_THROW(rkv::check_codec(integer(2, 3, false), 63, "k"), rkv::InputError);   // 3 x 2 bits: not whole bytes
  EXPECT_THROW(rkv::check_codec(block(CodecFormat::q4_0), 48, "k"), rkv::InputError);
  CodecSpec k = kivi(2, 32, 0);
  k.symmetric = true;
  EXPECT_THROW(rkv::check_codec(k, 64, "k"), rkv::InputError);
  try {
    rkv::check_codec(integer(4, 24, false), 64, "compression.codec");
    FAIL();
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("compression.codec"), std::string::npos);
  }
  EXPECT_NO_THROW(rkv::check_codec(kivi(2, 32, 128), 64, "k"));
  EXPECT_EQ(kivi(2, 32, 128).label(), "kivi2-g32-r128");
  EXPECT_EQ(integer(4, 32, false).label(), "int4-asym-g32");
}

/// A uniform layer of H heads x n entries, d channels, entry (h, i) at position 10 h + i (so heads differ).
rkv::LayerKV layer_of(int64_t H, int64_t n, int64_t d, uint32_t seed) {
  rkv::LayerKV l = rkv::build_exact_layer(H, d, n, {}, true);
  const std::vector<float> k = random_rows(l.k.size(), seed), v = random_rows(l.v.size(), seed + 1);
  l.k = k;
  l.v = v;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < n; ++i) *l.pos_at(h, i) = static_cast<int32_t>(10 * h + i);
  return l;
}

TEST(PackedLayer, PacksAllButTheResidualAndUnpacksInOrder) {
  const int64_t H = 2, d = 32, n = 13;
  const CodecSpec spec = integer(8, 32, true, /*residual=*/3);
  rkv::LayerKV tail = layer_of(H, n, d, 1);
  const rkv::LayerKV original = tail;
  rkv::PackedLayer p = rkv::build_packed_layer(spec, H, d);
  rkv::pack_oldest(p, tail);
  EXPECT_EQ(p.entries(0), 10);
  EXPECT_EQ(tail.head_length(0), 3);
  EXPECT_EQ(*tail.pos_at(1, 0), 20);  // head 1's entries 10..12 stay float32, positions 20..22
  // Bytes by hand: per head 10 entries x (key row 34 + value row 34 + position 4) = 720; x 2 heads = 1440.
  EXPECT_EQ(p.bytes_in_use(), 1440u);
  EXPECT_EQ(tail.bytes_in_use(), 2u * 3u * (2u * 32u * 4u + 4u));
  rkv::LayerKV out;
  rkv::unpack_layer(p, tail, 2, out);
  EXPECT_EQ(out.length, n);
  EXPECT_EQ(out.capacity, n + 2);
  std::vector<float> row(static_cast<size_t>(d));
  std::vector<uint8_t> packed(rkv::codec_value_row_bytes(spec, d));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(*out.pos_at(h, i), *original.pos_at(h, i));
      const float* k0 = original.k_at(h, i);
      if (i < 10) {  // packed: equals decode(encode(row)); the tail: the float32 row itself
        rkv::encode_key_unit(spec, k0, d, packed.data());
        rkv::decode_key_unit(spec, packed.data(), d, row.data());
      } else {
        std::memcpy(row.data(), k0, static_cast<size_t>(d) * sizeof(float));
      }
      for (int64_t c = 0; c < d; ++c) EXPECT_EQ(out.k_at(h, i)[c], row[static_cast<size_t>(c)]);
    }
}

TEST(PackedLayer, KiviPacksWholeKeyGroupsOnly) {
  // residual 4, group 8: of 21 entries, floor((21 - 4) / 8) x 8 = 16 are packed, 5 stay float32.
  const int64_t H = 1, d = 16;
  rkv::LayerKV tail = layer_of(H, 21, d, 3);
  rkv::PackedLayer p = rkv::build_packed_layer(kivi(4, 8, 4), H, d);
  rkv::pack_oldest(p, tail);
  EXPECT_EQ(p.entries(0), 16);
  EXPECT_EQ(tail.head_length(0), 5);
  // Keys: 2 units x 16 channels x (4 + 8 x 4 / 8 = 8) = 256 bytes; values: 16 rows x 2 groups x 8 = 256; pos 64.
  EXPECT_EQ(p.bytes_in_use(), 256u + 256u + 64u);
  // Two more entries reach 7 < 4 + 8: nothing packs; eight more (13): one more unit packs.
  rkv::LayerKV more = layer_of(H, 8, d, 4);
  rkv::append_entries(tail, more, {0}, 2);
  rkv::pack_oldest(p, tail);
  EXPECT_EQ(p.entries(0), 16);
  rkv::append_entries(tail, more, {2}, 6);
  EXPECT_EQ(tail.head_length(0), 13);
  rkv::pack_oldest(p, tail);
  EXPECT_EQ(p.entries(0), 24);
  EXPECT_EQ(tail.head_length(0), 5);
}

TEST(PackedLayer, PerHeadCountsKeepTheirLayout) {
  // A per-head tail (AdaKV budgets) of 5 and 9 entries, residual 2: heads pack 3 and 7, keep 2 each (uniform tail),
  // and unpack back to the per-head layout 5 / 9.
  const int64_t d = 32;
  rkv::LayerKV full = layer_of(2, 9, d, 7);
  rkv::LayerKV tail = rkv::build_exact_layer(2, d, 9, {5, 9}, true);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < tail.head_length(h); ++i) {
      std::memcpy(tail.k_at(h, i), full.k_at(h, i), static_cast<size_t>(d) * sizeof(float));
      std::memcpy(tail.v_at(h, i), full.v_at(h, i), static_cast<size_t>(d) * sizeof(float));
      *tail.pos_at(h, i) = *full.pos_at(h, i);
    }
  rkv::PackedLayer p = rkv::build_packed_layer(integer(4, 32, false, 2), 2, d);
  rkv::pack_oldest(p, tail);
  EXPECT_EQ(p.entries(0), 3);
  EXPECT_EQ(p.entries(1), 7);
  EXPECT_FALSE(tail.per_head());
  EXPECT_EQ(tail.length, 2);
  rkv::LayerKV out;
  rkv::unpack_layer(p, tail, 0, out);
  ASSERT_TRUE(out.per_head());
  EXPECT_EQ(out.head_length(0), 5);
  EXPECT_EQ(out.head_length(1), 9);
  EXPECT_EQ(*out.pos_at(1, 8), 18);
  EXPECT_EQ(*out.pos_at(0, 4), 4);
}

TEST(PackedLayer, AnEmptyTailTakesPositionsWhenAppendedTo) {
  // residual 0: everything packs and the tail holds no entry (and so no position storage); the next decode entry
  // appended to it must still carry its position.
  const int64_t d = 32;
  rkv::LayerKV tail = layer_of(1, 4, d, 11);
  rkv::PackedLayer p = rkv::build_packed_layer(integer(8, 32, true), 1, d);
  rkv::pack_oldest(p, tail);
  EXPECT_EQ(tail.entries(), 0);
  rkv::LayerKV next = layer_of(1, 1, d, 12);
  *next.pos_at(0, 0) = 99;
  rkv::append_entries(tail, next, {0}, 1);
  ASSERT_TRUE(tail.has_positions());
  EXPECT_EQ(*tail.pos_at(0, 0), 99);
  rkv::pack_oldest(p, tail);
  EXPECT_EQ(p.heads[0].pos.back(), 99);
  EXPECT_THROW(rkv::append_entries(tail, next, {1}, 1), rkv::InputError);  // entries [1, 2) do not exist
}

}  // namespace

namespace {

TEST(LayerBits, FromTheProfileAtTheBytesOfUniformBits) {
  // int4 asymmetric g32, d = 64: bytes per entry e(2) = 2 x 2 x (4 + 8) + 4 = 52, e(4) = 84, e(8) = 2 x 2 x 36 + 4 = 148.
  EXPECT_DOUBLE_EQ(rkv::codec_entry_bytes(integer(2, 32, false), 64), 52.0);
  EXPECT_DOUBLE_EQ(rkv::codec_entry_bytes(integer(4, 32, false), 64), 84.0);
  EXPECT_DOUBLE_EQ(rkv::codec_entry_bytes(integer(8, 32, false), 64), 148.0);
  EXPECT_DOUBLE_EQ(rkv::codec_entry_bytes(CodecSpec{}, 64), 516.0);  // float32: 2 x 64 x 4 + 4
  EXPECT_DOUBLE_EQ(rkv::codec_entry_bytes(kivi(2, 32, 0), 64), 52.0);
  // Profile [0, 0.5, 1], ratio 8: m = [1, 8^0.5, 8], mean 3.943, targets 4 m / mean = [1.01, 2.87, 8.12]: floor to
  // levels [2, 2, 8]. Equal entries (10 each): 10 (52 + 52 + 148) = 2520 = 30 x 84, the uniform bytes: no raise fits.
  const CodecSpec c = integer(4, 32, false);
  EXPECT_EQ(rkv::allocate_layer_bits({0.0, 0.5, 1.0}, {10, 10, 10}, c, 64, 8.0), (std::vector<int>{2, 2, 8}));
  // Entries [10, 10, 5]: total 25 x 84 = 2100, spent 520 + 520 + 740 = 1780; raising layer 1 (target 2.87 over 2 is
  // the largest gap) to 4 costs 320 -> 2100, which fits exactly; layer 0's raise no longer does.
  EXPECT_EQ(rkv::allocate_layer_bits({0.0, 0.5, 1.0}, {10, 10, 5}, c, 64, 8.0), (std::vector<int>{2, 4, 8}));
  // A constant profile (or ratio 1) is uniform bits.
  EXPECT_EQ(rkv::allocate_layer_bits({3.0, 3.0}, {7, 9}, c, 64, 8.0), (std::vector<int>{4, 4}));
  EXPECT_EQ(rkv::allocate_layer_bits({0.0, 1.0}, {7, 9}, c, 64, 1.0), (std::vector<int>{4, 4}));
  EXPECT_THROW(rkv::allocate_layer_bits({0.0, 1.0}, {7}, c, 64, 8.0), rkv::InputError);
  EXPECT_THROW(rkv::allocate_layer_bits({0.0, NAN}, {7, 9}, c, 64, 8.0), rkv::InputError);
  EXPECT_THROW(rkv::allocate_layer_bits({0.0, 1.0}, {7, 9}, block(CodecFormat::q8_0), 64, 8.0), rkv::InputError);
}

TEST(LayerBits, NeverAboveTheUniformBytes) {
  // Random profiles and entry counts: the plan's bytes stay within uniform bits' bytes, and no single raise is left
  // that would still fit (the rounding leaves less than one raise unspent).
  std::mt19937 rng(3);
  const CodecSpec c = integer(4, 32, false);
  const double e[3] = {52, 84, 148};
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<double> s(12);
    std::vector<int64_t> n(12);
    for (size_t l = 0; l < s.size(); ++l) {
      s[l] = std::uniform_real_distribution<double>(-1, 1)(rng);
      n[l] = std::uniform_int_distribution<int64_t>(1, 500)(rng);
    }
    const std::vector<int> bits = rkv::allocate_layer_bits(s, n, c, 64, 6.0);
    double spent = 0, total = 0, cheapest_raise = 1e300;
    for (size_t l = 0; l < s.size(); ++l) {
      const int i = bits[l] == 2 ? 0 : bits[l] == 4 ? 1 : 2;
      spent += static_cast<double>(n[l]) * e[i];
      total += static_cast<double>(n[l]) * 84;
      if (i < 2) cheapest_raise = std::min(cheapest_raise, static_cast<double>(n[l]) * (e[i + 1] - e[i]));
    }
    EXPECT_LE(spent, total);
    EXPECT_GT(spent + cheapest_raise, total);
  }
}

}  // namespace
