// A codec's layer on the CPU backend (Backend::encode_layer; cache/packed_kv.hpp), on a seeded synthetic model:
//  - decoding on a packed cache gives the logits of a float32 cache holding the same dequantized entries (each
//    decode entry quantized in place once it leaves the residual window, as the packed cache does), so the backend
//    really attends over the dequantized cache and really packs what decode appends;
//  - bytes() is packed data + scales + positions, worked out by hand; download_layer / layer_positions read a packed
//    layer; compaction, re-rotation, views and a second encode refuse it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>

#include "backend/backend.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "cache/codec.hpp"
#include "core/errors.hpp"
#include "model/synthetic_model.hpp"

namespace {

const rkv::Model& model() {  // d = 32: every codec packs it (blocks of 32)
  static const rkv::Model m = rkv::synthetic_model(rkv::synthetic_config("llama", 4, 2, 32, 2), 21);
  return m;
}

std::vector<int32_t> tokens(int64_t n, int64_t offset = 0) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    t[static_cast<size_t>(i)] = static_cast<int32_t>(((i + offset) * 37 + 11) % model().config.vocab_size);
  return t;
}

rkv::CodecSpec spec(rkv::CodecFormat f, int bits, int64_t group, bool symmetric, int64_t residual) {
  rkv::CodecSpec s;
  s.format = f;
  s.bits = bits;
  s.group = group;
  s.symmetric = symmetric;
  s.residual = residual;
  return s;
}

/// Replaces entries [from, to) of every KV head of every layer of a float32 cpu cache by decode(encode(entry)), key
/// units of `codec` at a time (`from` and `to` on unit boundaries).
void quantize_in_place(rkv::BackendCache& cache, const rkv::CodecSpec& codec, int64_t from, int64_t to) {
  rkv::KVCache& kv = rkv::cpu::cpu_cache(cache).kv;
  const int64_t q = rkv::codec_key_quantum(codec);
  for (rkv::LayerKV& l : kv.layers) {
    const int64_t d = l.head_dim;
    std::vector<uint8_t> kb(rkv::codec_key_unit_bytes(codec, d)), vb(rkv::codec_value_row_bytes(codec, d));
    for (int64_t h = 0; h < l.n_kv_heads; ++h) {
      for (int64_t u = from; u < to; u += q) {
        rkv::encode_key_unit(codec, l.k_at(h, u), d, kb.data());
        rkv::decode_key_unit(codec, kb.data(), d, l.k_at(h, u));
      }
      for (int64_t i = from; i < to; ++i) {
        rkv::encode_value_row(codec, l.v_at(h, i), d, vb.data());
        rkv::decode_value_row(codec, vb.data(), d, l.v_at(h, i));
      }
    }
  }
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

/// Prefill T tokens, encode, decode n tokens one at a time; the reference quantizes the same entries in place.
void expect_decode_matches_dequantized_reference(const rkv::CodecSpec& codec, int64_t T, int64_t n) {
  SCOPED_TRACE(codec.label());
  const auto backend = rkv::make_backend("cpu", model(), {});
  const rkv::PrefillResult pre = backend->prefill(tokens(T), {});
  const auto packed = backend->clone(*pre.cache);
  const auto reference = backend->clone(*pre.cache);
  for (int64_t l = 0; l < model().config.n_layers; ++l) backend->encode_layer(*packed, l, codec);
  const int64_t q = rkv::codec_key_quantum(codec);
  int64_t quantized = std::max<int64_t>(0, T - codec.residual) / q * q;
  quantize_in_place(*reference, codec, 0, quantized);
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<int32_t> next = tokens(1, T + i);
    const std::vector<float> a = backend->extend(*packed, next, T + i, rkv::LogitsFor::Last);
    const std::vector<float> b = backend->extend(*reference, next, T + i, rkv::LogitsFor::Last);
    EXPECT_LT(max_abs_diff(a, b), 1e-5) << "decode step " << i;
    const int64_t held = T + i + 1, now = std::max<int64_t>(0, held - codec.residual) / q * q;
    if (now > quantized) quantize_in_place(*reference, codec, quantized, now);  // what packing the tail did
    quantized = now;
    EXPECT_EQ(packed->length(0), held);
  }
  // And the packed cache's layers read back as the reference's entries.
  for (int64_t l = 0; l < model().config.n_layers; ++l) {
    const rkv::LayerKV x = backend->download_layer(*packed, l), y = backend->download_layer(*reference, l);
    EXPECT_LT(max_abs_diff(x.k, y.k), 1e-6);
    EXPECT_LT(max_abs_diff(x.v, y.v), 1e-6);
    EXPECT_EQ(x.pos, y.pos);
    EXPECT_EQ(backend->layer_positions(*packed, l), backend->layer_positions(*reference, l));
  }
}

TEST(CodecBackend, DecodeOnAPackedCacheEqualsTheDequantizedFloatCache) {
  expect_decode_matches_dequantized_reference(spec(rkv::CodecFormat::integer, 8, 32, true, 0), 40, 5);
  expect_decode_matches_dequantized_reference(spec(rkv::CodecFormat::integer, 4, 16, false, 3), 40, 5);
  expect_decode_matches_dequantized_reference(spec(rkv::CodecFormat::q4_0, 4, 32, false, 0), 40, 4);
  // KIVI: keys in units of 16 entries, residual 8: 32 of 40 packed; the 17th decode entry completes a new unit.
  expect_decode_matches_dequantized_reference(spec(rkv::CodecFormat::kivi, 2, 16, false, 8), 40, 18);
}

TEST(CodecBackend, BytesArePackedDataScalesAndPositions) {
  const auto backend = rkv::make_backend("cpu", model(), {});
  const rkv::PrefillResult pre = backend->prefill(tokens(40), {});
  // float32: 2 layers x 2 KV heads x 40 entries x (2 x 32 x 4 + 4) = 41,600 bytes.
  EXPECT_EQ(pre.cache->bytes(), 41600u);
  auto c = backend->clone(*pre.cache);
  // int8 symmetric, groups of 32: a row is 2 + 32 = 34 bytes; per entry 34 + 34 + 4 = 72; 160 entries: 11,520.
  for (int64_t l = 0; l < 2; ++l) backend->encode_layer(*c, l, spec(rkv::CodecFormat::integer, 8, 32, true, 0));
  EXPECT_EQ(c->bytes(), 11520u);
  EXPECT_EQ(c->bytes_in_use(), 11520u);
  EXPECT_EQ(c->head_length(1, 1), 40);
  // q4_0 with a residual of 8: 32 packed entries x (18 + 18 + 4) + 8 float32 entries x 260, per head and layer.
  auto r = backend->clone(*pre.cache);
  for (int64_t l = 0; l < 2; ++l) backend->encode_layer(*r, l, spec(rkv::CodecFormat::q4_0, 4, 32, false, 8));
  EXPECT_EQ(r->bytes(), 4u * (32u * 40u + 8u * 260u));
}

/// decode(encode(entry)) in place for entry i of KV head h of `layer` with `codec`'s key unit of one entry.
void quantize_entry(rkv::LayerKV& layer, int64_t h, int64_t i, const rkv::CodecSpec& codec) {
  const int64_t d = layer.head_dim;
  std::vector<uint8_t> b(rkv::codec_key_unit_bytes(codec, d) + rkv::codec_value_row_bytes(codec, d));
  rkv::encode_key_unit(codec, layer.k_at(h, i), d, b.data());
  rkv::decode_key_unit(codec, b.data(), d, layer.k_at(h, i));
  rkv::encode_value_row(codec, layer.v_at(h, i), d, b.data());
  rkv::decode_value_row(codec, b.data(), d, layer.v_at(h, i));
}

TEST(CodecBackend, TokenClassesDecodeAsTheirDequantizedFloatCache) {
  // int2 (asymmetric, groups of 16) with classes at 16 bits (f16) and 8 bits, residual 4, T = 30: entry i < 26 of
  // every head at 16 bits when i % 7 == 0 (0, 7, 14, 21), at 8 bits when i % 7 == 3 (3, 10, 17, 24), else 2 bits.
  // The reference is a float32 cache holding each entry decode(encode(entry)) by its class's codec, in the original
  // order: decode on the packed cache (whose unpacked order is classes first) gives its logits, and the entries
  // decode appends are packed at 2 bits as they leave the residual window.
  rkv::CodecSpec codec = spec(rkv::CodecFormat::integer, 2, 16, false, 4);
  codec.token_bits = {16, 8};
  codec.token_shares = {0.15, 0.15};
  const int64_t T = 30, R = 4, L = model().config.n_layers, H = model().config.n_kv_heads;
  const auto backend = rkv::make_backend("cpu", model(), {});
  const rkv::PrefillResult pre = backend->prefill(tokens(T), {});
  const auto packed = backend->clone(*pre.cache);
  const auto reference = backend->clone(*pre.cache);
  std::vector<uint8_t> classes;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < T; ++i)
      classes.push_back(static_cast<uint8_t>(i >= T - R ? 0 : i % 7 == 0 ? 1 : i % 7 == 3 ? 2 : 0));
  rkv::CodecSpec f16 = codec, int8 = codec;
  f16.format = rkv::CodecFormat::f16;
  int8.bits = 8;
  for (int64_t l = 0; l < L; ++l) {
    backend->encode_layer_classes(*packed, l, codec, classes);
    rkv::LayerKV& ref = rkv::cpu::cpu_cache(*reference).kv.layers[static_cast<size_t>(l)];
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T - R; ++i) {
        const uint8_t c = classes[static_cast<size_t>(h * T + i)];
        quantize_entry(ref, h, i, c == 1 ? f16 : c == 2 ? int8 : codec);
      }
  }
  // Bytes by hand, per layer and KV head: 4 x f16 (64 + 64 + 4 = 132) + 4 x int8 (2 x (4 + 16) x 2 + 4 = 84) + 18 x
  // int2 (2 x (4 + 4) x 2 + 4 = 36) + 4 float32 (260) = 528 + 336 + 648 + 1040 = 2552; x 2 heads x 2 layers.
  EXPECT_EQ(packed->bytes(), 4u * 2552u);
  EXPECT_EQ(packed->head_length(1, 1), T);
  for (int64_t s = 0; s < 6; ++s) {
    const std::vector<int32_t> next = tokens(1, T + s);
    const std::vector<float> a = backend->extend(*packed, next, T + s, rkv::LogitsFor::Last);
    const std::vector<float> b = backend->extend(*reference, next, T + s, rkv::LogitsFor::Last);
    EXPECT_LT(max_abs_diff(a, b), 1e-5) << "decode step " << s;
    const int64_t leaving = T + s + 1 - R - 1;  // the entry that just left the residual window: packed at 2 bits
    for (rkv::LayerKV& ref : rkv::cpu::cpu_cache(*reference).kv.layers)
      for (int64_t h = 0; h < H; ++h) quantize_entry(ref, h, leaving, codec);
  }
  // positions: per head the 16-bit entries, the 8-bit ones, then the 2-bit ones in order, then the tail
  const std::vector<int32_t> pos = backend->layer_positions(*packed, 0);
  ASSERT_EQ(pos.size(), static_cast<size_t>(H * (T + 6)));
  EXPECT_EQ(std::vector<int32_t>(pos.begin(), pos.begin() + 9), (std::vector<int32_t>{0, 7, 14, 21, 3, 10, 17, 24, 1}));
  // a class vector of the wrong length is refused, and the layer stays encodable
  const auto other = backend->clone(*pre.cache);
  EXPECT_THROW(backend->encode_layer_classes(*other, 0, codec, std::vector<uint8_t>(3, 0)), rkv::InputError);
  EXPECT_NO_THROW(backend->encode_layer_classes(*other, 0, codec, classes));
}

TEST(CodecBackend, NoTokenClassesIsTheUniformCodecBitForBit) {
  // encode_layer_classes with all entries at the base bits, or an empty class vector, stores what encode_layer stores:
  // the same bytes and the same logits, bit for bit.
  const rkv::CodecSpec uniform = spec(rkv::CodecFormat::integer, 4, 32, false, 2);
  rkv::CodecSpec mixed = uniform;
  mixed.token_bits = {8};
  mixed.token_shares = {0.25};
  const auto backend = rkv::make_backend("cpu", model(), {});
  const rkv::PrefillResult pre = backend->prefill(tokens(24), {});
  const auto a = backend->clone(*pre.cache), b = backend->clone(*pre.cache), c = backend->clone(*pre.cache);
  for (int64_t l = 0; l < model().config.n_layers; ++l) {
    backend->encode_layer(*a, l, uniform);
    backend->encode_layer_classes(*b, l, uniform, {});
    backend->encode_layer_classes(*c, l, mixed, std::vector<uint8_t>(2 * 24, 0));
  }
  EXPECT_EQ(b->bytes(), a->bytes());
  EXPECT_EQ(c->bytes(), a->bytes());
  for (int64_t s = 0; s < 3; ++s) {
    const std::vector<int32_t> next = tokens(1, 24 + s);
    const std::vector<float> la = backend->extend(*a, next, 24 + s, rkv::LogitsFor::Last);
    EXPECT_EQ(backend->extend(*b, next, 24 + s, rkv::LogitsFor::Last), la);
    EXPECT_EQ(backend->extend(*c, next, 24 + s, rkv::LogitsFor::Last), la);
  }
}

TEST(CodecBackend, APackedLayerRefusesWhatNeedsFloatEntries) {
  const auto backend = rkv::make_backend("cpu", model(), {});
  const rkv::PrefillResult pre = backend->prefill(tokens(20), {});
  auto c = backend->clone(*pre.cache);
  const rkv::CodecSpec codec = spec(rkv::CodecFormat::integer, 4, 32, false, 0);
  backend->encode_layer(*c, 0, codec);
  rkv::Selection sel;
  sel.layer = 0;
  sel.n_kv_heads = 2;
  sel.prefix_tokens = 20;
  sel.budget = sel.kept = 1;
  sel.positions = {0, 0};
  EXPECT_THROW(backend->compact_layer(*c, 0, sel), rkv::InputError);
  EXPECT_THROW(backend->rerotate_layer(*c, 0), rkv::InputError);
  EXPECT_THROW(backend->layer_view(*c, 0, false), rkv::InputError);
  EXPECT_THROW(backend->encode_layer(*c, 0, codec), rkv::InputError);
  EXPECT_NO_THROW(backend->compact_layer(*c, 1, sel));  // layer 1 is still float32
  rkv::CodecSpec bad = codec;
  bad.group = 24;  // does not divide 32
  EXPECT_THROW(backend->encode_layer(*c, 1, bad), rkv::InputError);
}

}  // namespace
