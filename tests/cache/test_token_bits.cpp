// Per-token KV precision (cache/token_bits.hpp) and the f16 format (cache/codec.hpp), values worked out by hand:
//  - f16 rows: hand-encoded bytes (1.0 = 0x3C00, -2.0 = 0xC000, 0.1 -> 0x2E66), and every element within half an
//    fp16 ulp of its value on random data of many magnitudes;
//  - class counts (cumulative floors) and the mean entry bytes of a mix, by hand;
//  - ranking: a hand-made score vector puts the protected and the top-scored entries in the 16-bit class, ties to
//    the earlier position;
//  - a mixed packed layer: bytes by hand, every entry decoded by its own class's codec, positions with the rows, and
//    attention over the unpacked layer equal to a double-precision attention over the hand-dequantized entries in
//    their original order;
//  - no classes (or the entry classes all 0) packs exactly what pack_oldest packs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cache/codec.hpp"
#include "cache/layer_bits.hpp"
#include "cache/packed_kv.hpp"
#include "cache/token_bits.hpp"
#include "core/errors.hpp"
#include "model/half.hpp"

namespace {

using rkv::CodecFormat;
using rkv::CodecSpec;

CodecSpec int_codec(int bits, std::vector<int> token_bits = {}, std::vector<double> token_shares = {}) {
  CodecSpec s;
  s.format = CodecFormat::integer;
  s.bits = bits;
  s.group = 32;
  s.token_bits = std::move(token_bits);
  s.token_shares = std::move(token_shares);
  return s;
}

CodecSpec f16_codec() {
  CodecSpec s;
  s.format = CodecFormat::f16;
  return s;
}

/// A layer of H heads x n entries, d channels, random rows; entry (h, i) at position 10 h + i.
rkv::LayerKV layer_of(int64_t H, int64_t n, int64_t d, uint32_t seed) {
  rkv::LayerKV l = rkv::build_exact_layer(H, d, n, {}, true);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (float& x : l.k) x = normal(rng);
  for (float& x : l.v) x = normal(rng);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < n; ++i) *l.pos_at(h, i) = static_cast<int32_t>(10 * h + i);
  return l;
}

TEST(F16Codec, HandEncodedBytes) {
  const int64_t d = 32;
  std::vector<float> row(d, 0.0f);
  row[0] = 1.0f;
  row[1] = -2.0f;
  row[2] = 0.1f;  // nearest fp16: 0x2E66 = 1638 / 16384 = 0.0999755859375
  std::vector<uint8_t> out(rkv::codec_value_row_bytes(f16_codec(), d));
  ASSERT_EQ(out.size(), 64u);  // 2 bytes per element, no scales
  rkv::encode_value_row(f16_codec(), row.data(), d, out.data());
  EXPECT_EQ(out[0], 0x00);
  EXPECT_EQ(out[1], 0x3C);
  EXPECT_EQ(out[2], 0x00);
  EXPECT_EQ(out[3], 0xC0);
  EXPECT_EQ(out[4], 0x66);
  EXPECT_EQ(out[5], 0x2E);
  std::vector<float> back(d);
  rkv::decode_value_row(f16_codec(), out.data(), d, back.data());
  EXPECT_EQ(back[2], 0.0999755859375f);
  EXPECT_EQ(rkv::codec_key_unit_bytes(f16_codec(), 64), 128u);
  // per entry and KV head: key 128 + value 128 + position 4
  EXPECT_EQ(rkv::codec_entry_bytes(f16_codec(), 64), 260.0);
  EXPECT_EQ(f16_codec().label(), "f16");
  EXPECT_NO_THROW(rkv::check_codec(f16_codec(), 48, "k"));  // any head dim
}

TEST(F16Codec, WithinHalfAnUlpOfFp16) {
  const int64_t d = 64;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-20, 15);
  std::vector<float> row(d), back(d);
  std::vector<uint8_t> out(rkv::codec_value_row_bytes(f16_codec(), d));
  for (int trial = 0; trial < 200; ++trial) {
    for (float& x : row) x = std::ldexp(mant(rng), expo(rng));
    rkv::encode_key_unit(f16_codec(), row.data(), d, out.data());
    rkv::decode_key_unit(f16_codec(), out.data(), d, back.data());
    for (int64_t i = 0; i < d; ++i) {
      const double x = row[static_cast<size_t>(i)];
      // fp16: 10 mantissa bits; binade 2^e with e >= -14 (below: subnormal spacing 2^-24)
      const int e = x == 0 ? -14 : std::max(-14, static_cast<int>(std::floor(std::log2(std::fabs(x)))));
      const double half_ulp = std::ldexp(1.0, e - 11);
      EXPECT_LE(std::fabs(x - back[static_cast<size_t>(i)]), half_ulp) << x;
    }
  }
}

TEST(TokenBits, ClassCountsAndMeanEntryBytesByHand) {
  // cumulative floors: 0.1 x 20 = 2; 0.35 x 20 = 7 -> 5 more
  EXPECT_EQ(rkv::token_class_counts({0.1, 0.25}, 20), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(rkv::token_class_counts({0.05, 0.15}, 19), (std::vector<int64_t>{0, 3}));  // floor 0.95, floor 3.8
  EXPECT_EQ(rkv::token_class_counts({0.5, 0.5}, 7), (std::vector<int64_t>{3, 4}));
  // d = 32, int4 asym g32: row 4 + 16 = 20, entry 20 + 20 + 4 = 44; int8 asym: 36 + 36 + 4 = 76; f16: 64 + 64 + 4 =
  // 132. Mix 16x0.1 + 8x0.25: 44 + 0.1 x 88 + 0.25 x 32 = 60.8.
  EXPECT_NEAR(rkv::mixed_entry_bytes(int_codec(4, {16, 8}, {0.1, 0.25}), 32), 60.8, 1e-12);
  EXPECT_EQ(rkv::mixed_entry_bytes(int_codec(4), 32), 44.0);
  EXPECT_EQ(rkv::token_class_codec(int_codec(4), 16).format, CodecFormat::f16);
  EXPECT_EQ(rkv::token_class_codec(int_codec(2), 8).bits, 8);
  EXPECT_EQ(int_codec(4, {16, 8}, {0.05, 0.15}).label(), "int4-asym-g32+16x0.05+8x0.15");
}

TEST(TokenBits, TheProtectedAndTopScoredEntriesGetTheTopClass) {
  // T = 10; kept positions 0 2 3 5 7 9; position 0 protected (a sink). Scores: 2 -> 0.9, 5 and 7 -> 0.8 (a tie),
  // 3 -> 0.2, 0 -> 0.1, 9 -> 0.05. Eviction's order: 0 (protected), 2, 5, 7 (tie: earlier first), 3, 9.
  const std::vector<float> scores = {0.1f, 0.0f, 0.9f, 0.2f, 0.0f, 0.8f, 0.0f, 0.8f, 0.0f, 0.05f};
  const std::vector<int32_t> positions = {0, 2, 3, 5, 7, 9};
  // shares 0.34, 0.17 of 6: N_1 = floor(2.04) = 2, N_2 = floor(3.06) = 3
  EXPECT_EQ(rkv::rank_token_classes(scores.data(), 10, positions.data(), 6, {0}, {0.34, 0.17}),
            (std::vector<uint8_t>{1, 1, 0, 2, 0, 0}));
  // without the protection, position 0 ranks fifth (0.1 > 0.05 only)
  EXPECT_EQ(rkv::rank_token_classes(scores.data(), 10, positions.data(), 6, {}, {0.34, 0.17}),
            (std::vector<uint8_t>{0, 1, 0, 1, 2, 0}));
  // only the first m = 4 entries are packed (the rest a residual): ranked among themselves
  EXPECT_EQ(rkv::rank_token_classes(scores.data(), 10, positions.data(), 4, {}, {0.25}),
            (std::vector<uint8_t>{0, 1, 0, 0}));
  const std::vector<int32_t> bad = {0, 12};
  EXPECT_THROW(rkv::rank_token_classes(scores.data(), 10, bad.data(), 2, {}, {0.5}), rkv::InputError);
}

TEST(TokenBits, MixedLayerBytesByHandAndEachEntryByItsClass) {
  const int64_t H = 2, d = 32, n = 20;
  const CodecSpec codec = int_codec(4, {16, 8}, {0.1, 0.25});
  rkv::LayerKV tail = layer_of(H, n, d, 3);
  const rkv::LayerKV original = tail;
  // head 0: entries 4, 9 at 16 bits, 0..4 of the odd ones at 8; head 1: the last two at 16, the first five at 8
  std::vector<uint8_t> cls(static_cast<size_t>(H * n), 0);
  cls[4] = cls[9] = 1;
  for (int i : {1, 3, 5, 7, 11}) cls[static_cast<size_t>(i)] = 2;
  cls[20 + 18] = cls[20 + 19] = 1;
  for (int i = 0; i < 5; ++i) cls[static_cast<size_t>(20 + i)] = 2;
  rkv::PackedLayer p = rkv::build_packed_layer(codec, H, d);
  rkv::pack_classes(p, tail, rkv::token_class_codecs(codec), cls);
  EXPECT_EQ(tail.entries(), 0);  // residual 0: everything packed
  EXPECT_EQ(p.entries(0), n);
  // per head 2 x 132 + 5 x 76 + 13 x 44 = 1216 bytes; 2 heads: 2432
  EXPECT_EQ(p.bytes_in_use(), 2432u);
  ASSERT_EQ(p.classes.size(), 2u);
  EXPECT_EQ(p.classes[0].heads[0].entries, 2);
  EXPECT_EQ(p.classes[1].heads[1].entries, 5);
  rkv::LayerKV out;
  rkv::unpack_layer(p, tail, 0, out);
  // head 0 in unpack order: class 1 (4, 9), class 2 (1, 3, 5, 7, 11), then base in order
  const std::vector<int32_t> head0 = {4, 9, 1, 3, 5, 7, 11, 0, 2, 6, 8, 10, 12, 13, 14, 15, 16, 17, 18, 19};
  std::vector<uint8_t> buf(256);
  std::vector<float> want(static_cast<size_t>(d));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t j = 0; j < n; ++j) {
      const int32_t pos = *out.pos_at(h, j);
      if (h == 0) EXPECT_EQ(pos, head0[static_cast<size_t>(j)]);
      const int64_t i = pos - 10 * h;  // the entry's index in the original layer
      const uint8_t c = cls[static_cast<size_t>(h * n + i)];
      const CodecSpec spec = c == 0 ? codec : rkv::token_class_codec(codec, codec.token_bits[c - 1u]);
      rkv::encode_value_row(spec, original.v_at(h, i), d, buf.data());
      rkv::decode_value_row(spec, buf.data(), d, want.data());
      for (int64_t x = 0; x < d; ++x) EXPECT_EQ(out.v_at(h, j)[x], want[static_cast<size_t>(x)]);
      rkv::encode_key_unit(spec, original.k_at(h, i), d, buf.data());
      rkv::decode_key_unit(spec, buf.data(), d, want.data());
      for (int64_t x = 0; x < d; ++x) EXPECT_EQ(out.k_at(h, j)[x], want[static_cast<size_t>(x)]);
    }
  // a wrong-length class vector or a class with no codec is refused before anything moves
  rkv::LayerKV t2 = layer_of(H, n, d, 3);
  rkv::PackedLayer p2 = rkv::build_packed_layer(codec, H, d);
  EXPECT_THROW(rkv::pack_classes(p2, t2, rkv::token_class_codecs(codec), std::vector<uint8_t>(5, 0)), rkv::InputError);
  std::vector<uint8_t> three(static_cast<size_t>(H * n), 3);
  EXPECT_THROW(rkv::pack_classes(p2, t2, rkv::token_class_codecs(codec), three), rkv::InputError);
  EXPECT_EQ(t2.entries(), H * n);
}

/// softmax(q K^T / sqrt(d)) V in double over the rows [n, d] of one head.
std::vector<double> attend(const std::vector<double>& q, const std::vector<std::vector<double>>& k,
                           const std::vector<std::vector<double>>& v) {
  const size_t d = q.size();
  std::vector<double> s(k.size());
  double top = -1e300;
  for (size_t i = 0; i < k.size(); ++i) {
    s[i] = 0;
    for (size_t c = 0; c < d; ++c) s[i] += q[c] * k[i][c];
    s[i] /= std::sqrt(static_cast<double>(d));
    top = std::max(top, s[i]);
  }
  double z = 0;
  for (double& x : s) z += (x = std::exp(x - top));
  std::vector<double> o(d, 0.0);
  for (size_t i = 0; i < k.size(); ++i)
    for (size_t c = 0; c < d; ++c) o[c] += s[i] / z * v[i][c];
  return o;
}

TEST(TokenBits, AttentionOverTheMixedLayerEqualsTheHandDequantizedEntries) {
  const int64_t H = 1, d = 32, n = 24;
  const CodecSpec codec = int_codec(2, {16, 8, 4}, {0.125, 0.125, 0.25});
  rkv::LayerKV tail = layer_of(H, n, d, 11);
  const rkv::LayerKV original = tail;
  std::vector<uint8_t> cls(static_cast<size_t>(n), 0);  // 3 at 16 bits, 3 at 8, 6 at 4, 12 at 2: spread over the head
  for (int i = 0; i < n; ++i) cls[static_cast<size_t>(i)] = static_cast<uint8_t>(i % 8 == 0 ? 1 : i % 8 == 1 ? 2 : i % 8 < 4 ? 3 : 0);
  rkv::PackedLayer p = rkv::build_packed_layer(codec, H, d);
  rkv::pack_classes(p, tail, rkv::token_class_codecs(codec), cls);
  rkv::LayerKV out;
  rkv::unpack_layer(p, tail, 0, out);
  // the reference: each entry dequantized by hand with its class's codec, in the original order
  std::vector<std::vector<double>> rk, rv, uk, uv;
  std::vector<uint8_t> buf(256);
  std::vector<float> row(static_cast<size_t>(d));
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t c = cls[static_cast<size_t>(i)];
    const CodecSpec spec = c == 0 ? codec : rkv::token_class_codec(codec, codec.token_bits[c - 1u]);
    rkv::encode_key_unit(spec, original.k_at(0, i), d, buf.data());
    rkv::decode_key_unit(spec, buf.data(), d, row.data());
    rk.emplace_back(row.begin(), row.end());
    rkv::encode_value_row(spec, original.v_at(0, i), d, buf.data());
    rkv::decode_value_row(spec, buf.data(), d, row.data());
    rv.emplace_back(row.begin(), row.end());
    uk.emplace_back(out.k_at(0, i), out.k_at(0, i) + d);
    uv.emplace_back(out.v_at(0, i), out.v_at(0, i) + d);
  }
  std::mt19937 rng(5);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> q(static_cast<size_t>(d));
  for (double& x : q) x = normal(rng);
  const std::vector<double> a = attend(q, uk, uv), b = attend(q, rk, rv);
  for (int64_t c = 0; c < d; ++c) EXPECT_NEAR(a[static_cast<size_t>(c)], b[static_cast<size_t>(c)], 1e-12);
  // and the 16-bit entries are much closer to the float32 rows than the 2-bit ones
  EXPECT_LT(std::fabs(rk[0][0] - original.k_at(0, 0)[0]), std::ldexp(1.0, -8));
}

TEST(TokenBits, NoClassesPacksWhatPackOldestPacks) {
  const int64_t H = 2, d = 32, n = 9;
  CodecSpec codec = int_codec(4);
  codec.residual = 2;
  rkv::LayerKV a = layer_of(H, n, d, 9), b = a, c = a;
  rkv::PackedLayer pa = rkv::build_packed_layer(codec, H, d), pb = pa, pc = pa;
  rkv::pack_oldest(pa, a);
  rkv::pack_classes(pb, b, {}, {});
  rkv::pack_classes(pc, c, rkv::token_class_codecs(int_codec(4, {8}, {0.5})), std::vector<uint8_t>(H * n, 0));
  for (rkv::PackedLayer* p : {&pb, &pc}) {
    EXPECT_EQ(p->bytes_in_use(), pa.bytes_in_use());
    for (int64_t h = 0; h < H; ++h) {
      EXPECT_EQ(p->heads[static_cast<size_t>(h)].k, pa.heads[static_cast<size_t>(h)].k);
      EXPECT_EQ(p->heads[static_cast<size_t>(h)].v, pa.heads[static_cast<size_t>(h)].v);
      EXPECT_EQ(p->heads[static_cast<size_t>(h)].pos, pa.heads[static_cast<size_t>(h)].pos);
    }
  }
  EXPECT_EQ(b.k, a.k);
  EXPECT_EQ(c.k, a.k);
  EXPECT_EQ(c.pos, a.pos);
}

TEST(TokenBits, CheckCodecRefusesBadClasses) {
  EXPECT_NO_THROW(rkv::check_codec(int_codec(4, {16, 8}, {0.05, 0.15}), 64, "k"));
  EXPECT_THROW(rkv::check_codec(int_codec(4, {8, 16}, {0.05, 0.15}), 64, "k"), rkv::InputError);  // not decreasing
  EXPECT_THROW(rkv::check_codec(int_codec(8, {8}, {0.1}), 64, "k"), rkv::InputError);             // not above bits
  EXPECT_THROW(rkv::check_codec(int_codec(4, {16}, {0.6, 0.1}), 64, "k"), rkv::InputError);       // lengths
  EXPECT_THROW(rkv::check_codec(int_codec(2, {16, 8}, {0.6, 0.5}), 64, "k"), rkv::InputError);    // sum > 1
  CodecSpec q = int_codec(4, {16}, {0.1});
  q.format = CodecFormat::q4_0;
  EXPECT_THROW(rkv::check_codec(q, 64, "k"), rkv::InputError);  // int only
}

}  // namespace
