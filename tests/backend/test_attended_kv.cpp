// Attention over a packed layer's codes (backend/cpu/attended_kv.hpp) against attention over the float32 copy
// unpack_layer writes (cache/packed_kv.hpp) -- the path the CPU backend took before the codes were read in place, and
// the one test_codec_backend checks against a float32 cache of dequantized entries. For every codec (int 2/4/8
// symmetric and asymmetric, two group sizes, KIVI with a residual, q8_0, q4_0, f16), GQA groups of 1, 2 and 4, tails
// of 0 to a key unit of entries, a decode row (the flash-decoding pieces of 512 crossing the packed/tail boundary) and
// chunks of 5 and 70 rows, per-head (AdaKV) lengths, token precision classes, a sliding-window layer, and the
// probability and attention-mass hooks: the outputs agree within 1e-5 of the largest output (float summation order
// is the only difference: tile-sized sgemm calls instead of one).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/attended_kv.hpp"
#include "backend/cpu/attention.hpp"
#include "backend/cpu/decode_tile.hpp"
#include "cache/codec.hpp"
#include "cache/packed_kv.hpp"
#include "core/errors.hpp"
#include "model/synthetic_model.hpp"

namespace {

using rkv::CodecFormat;
using rkv::CodecSpec;

CodecSpec spec(CodecFormat f, int bits = 4, int64_t group = 32, bool symmetric = false, int64_t residual = 0) {
  CodecSpec s;
  s.format = f;
  s.bits = bits;
  s.group = group;
  s.symmetric = symmetric;
  s.residual = residual;
  return s;
}

/// Every codec the cache packs with, at head dim 64.
std::vector<CodecSpec> all_codecs() {
  std::vector<CodecSpec> out;
  for (int bits : {2, 4, 8})
    for (bool sym : {true, false})
      for (int64_t group : {16, 64}) out.push_back(spec(CodecFormat::integer, bits, group, sym, 0));
  out.push_back(spec(CodecFormat::integer, 4, 32, false, 7));  // a residual that is no whole unit
  out.push_back(spec(CodecFormat::kivi, 2, 32, false, 20));
  out.push_back(spec(CodecFormat::kivi, 4, 16, false, 0));
  out.push_back(spec(CodecFormat::kivi, 8, 32, false, 5));
  out.push_back(spec(CodecFormat::q8_0));
  out.push_back(spec(CodecFormat::q4_0));
  out.push_back(spec(CodecFormat::f16));
  return out;
}

/// A layer of `lengths[h]` entries per KV head (uniform when all are equal), normal keys and values, positions that
/// ascend with gaps (a compacted cache): entry i of head h sits at 3 i + h.
rkv::LayerKV random_layer(int64_t d, const std::vector<int64_t>& lengths, uint32_t seed) {
  const int64_t Hkv = static_cast<int64_t>(lengths.size());
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  const bool uniform = std::all_of(lengths.begin(), lengths.end(), [&](int64_t n) { return n == longest; });
  rkv::LayerKV l = rkv::build_exact_layer(Hkv, d, longest, uniform ? std::vector<int64_t>{} : lengths, true);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& x : l.k) x = normal(rng);
  for (float& x : l.v) x = normal(rng);
  for (int64_t h = 0; h < Hkv; ++h)
    for (int64_t i = 0; i < l.head_length(h); ++i) *l.pos_at(h, i) = static_cast<int32_t>(3 * i + h);
  return l;
}

/// Appends n new entries to every head of `tail` (as a forward does before attending), at positions after every
/// stored one: position 3 * (longest + i) + 7 for new row i. Returns the new rows' positions.
std::vector<int64_t> append_new_rows(rkv::LayerKV& tail, int64_t n, int64_t longest, uint32_t seed) {
  const rkv::LayerKV fresh = random_layer(tail.head_dim, std::vector<int64_t>(static_cast<size_t>(tail.n_kv_heads), n),
                                          seed);
  std::vector<int64_t> positions(static_cast<size_t>(n));
  rkv::LayerKV rows = fresh;
  for (int64_t i = 0; i < n; ++i) {
    positions[static_cast<size_t>(i)] = 3 * (longest + i) + 7;
    for (int64_t h = 0; h < tail.n_kv_heads; ++h) *rows.pos_at(h, i) = static_cast<int32_t>(3 * (longest + i) + 7);
  }
  rkv::append_entries(tail, rows, std::vector<int64_t>(static_cast<size_t>(tail.n_kv_heads), 0), n);
  return positions;
}

struct Outputs {
  std::vector<float> out, mass;
  std::vector<std::vector<float>> probs;  ///< on_attention_probs rows, in call order
  std::vector<int64_t> first;
};

Outputs run_attention(const rkv::ModelConfig& c, int64_t layer, const std::vector<float>& qg, int64_t n,
                      const rkv::cpu::AttendedKV& kv, const std::vector<int64_t>& positions, bool hooks) {
  Outputs r;
  rkv::cpu::Workspace ws;
  rkv::cpu::LayerHooks h;
  if (hooks) {
    h.attention_mass = &r.mass;
    h.on_attention_probs = [&](int64_t, int64_t, const float* p, int64_t len) { r.probs.emplace_back(p, p + len); };
  }
  r.first = rkv::cpu::window_starts(c, layer, kv, positions.data(), n);
  r.out.assign(static_cast<size_t>(n * c.n_heads * c.head_dim), 0.0f);
  rkv::cpu::attention(c, qg.data(), n, kv, r.first, r.out.data(), ws, hooks ? &h : nullptr);
  return r;
}

/// max |a - b| <= 1e-5 max |b| (+ a float32 ulp of slack for all-zero rows).
void expect_close(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  float scale = 0.0f, diff = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::fabs(b[i]));
    diff = std::max(diff, std::fabs(a[i] - b[i]));
  }
  EXPECT_LE(diff, 1e-5f * scale + 1e-7f) << what << ": max |diff| " << diff << " of max |ref| " << scale;
}

struct Case {
  int64_t H, Hkv;
  std::vector<int64_t> lengths;  ///< entries per KV head before packing
  int64_t n;                     ///< new rows
};

/// Packs a random layer with `codec` (and the class codecs for the entries entry_class marks), appends n rows, and
/// checks attention over the codes against attention over unpack_layer's copy.
void check_case(const CodecSpec& codec, const Case& k, const std::vector<CodecSpec>& classes = {},
                const std::vector<uint8_t>& entry_class = {}, bool sliding = false, bool hooks = false) {
  const int64_t d = 64;
  rkv::ModelConfig c = rkv::synthetic_config(sliding ? "gemma3" : "llama", k.H, k.Hkv, d, 3);
  if (sliding) c.sliding_window = 60;  // layer 0 slides: the window reaches back into the packed entries
  const std::string what = codec.label() + " H=" + std::to_string(k.H) + " Hkv=" + std::to_string(k.Hkv) +
                           " n=" + std::to_string(k.n) + " longest=" +
                           std::to_string(*std::max_element(k.lengths.begin(), k.lengths.end())) +
                           (classes.empty() ? "" : " classes") + (sliding ? " sliding" : "") + (hooks ? " hooks" : "");
  rkv::LayerKV tail = random_layer(d, k.lengths, 11);
  rkv::PackedLayer packed = rkv::build_packed_layer(codec, k.Hkv, d);
  if (classes.empty()) {
    rkv::pack_oldest(packed, tail);
  } else {
    rkv::pack_classes(packed, tail, classes, entry_class);
  }
  ASSERT_TRUE(packed.packed()) << what;
  const int64_t longest = *std::max_element(k.lengths.begin(), k.lengths.end());
  const std::vector<int64_t> positions = append_new_rows(tail, k.n, longest, 12);
  rkv::LayerKV whole;
  rkv::unpack_layer(packed, tail, 0, whole);

  std::mt19937 rng(13);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> qg(static_cast<size_t>(k.Hkv * k.n * (k.H / k.Hkv) * d));
  for (float& x : qg) x = normal(rng);

  const rkv::cpu::AttendedKV codes(tail, &packed);
  ASSERT_EQ(codes.longest(), whole.length) << what;
  ASSERT_EQ(codes.entries(), whole.entries()) << what;
  const Outputs got = run_attention(c, 0, qg, k.n, codes, positions, hooks);
  const Outputs want = run_attention(c, 0, qg, k.n, rkv::cpu::AttendedKV(whole), positions, hooks);
  EXPECT_EQ(got.first, want.first) << what;
  expect_close(got.out, want.out, what);
  expect_close(got.mass, want.mass, what + " attention mass");
  ASSERT_EQ(got.probs.size(), want.probs.size()) << what;
  for (size_t i = 0; i < got.probs.size(); ++i) expect_close(got.probs[i], want.probs[i], what + " probs");
}

TEST(DecodeTile, BitIdenticalToTheCodecsOwnDecoders) {
  // decode_tile's 8-wide decoders against cache/codec.hpp's scalar decode_value_row / decode_key_unit, bit for bit,
  // on rows with outliers and exact zeros; groups of 2 and 4 take the scalar path inside decode_value_rows.
  std::vector<CodecSpec> codecs = all_codecs();
  codecs.push_back(spec(CodecFormat::integer, 2, 4, true));
  codecs.push_back(spec(CodecFormat::integer, 4, 2, false));
  const int64_t d = 64, rows = 64;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows * d));
  for (size_t i = 0; i < x.size(); ++i) x[i] = i % 97 == 0 ? 40.0f * normal(rng) : (i % 13 == 0 ? 0.0f : normal(rng));
  for (const CodecSpec& c : codecs) {
    SCOPED_TRACE(c.label());
    const size_t rb = rkv::codec_value_row_bytes(c, d), ub = rkv::codec_key_unit_bytes(c, d);
    const int64_t quantum = rkv::codec_key_quantum(c), units = rows / quantum;
    std::vector<uint8_t> vcodes(rb * rows), kcodes(ub * static_cast<size_t>(units));
    for (int64_t r = 0; r < rows; ++r) rkv::encode_value_row(c, x.data() + r * d, d, vcodes.data() + r * rb);
    for (int64_t u = 0; u < units; ++u)
      rkv::encode_key_unit(c, x.data() + u * quantum * d, d, kcodes.data() + u * ub);
    std::vector<float> want(x.size()), got(x.size());
    for (int64_t r = 0; r < rows; ++r) rkv::decode_value_row(c, vcodes.data() + r * rb, d, want.data() + r * d);
    rkv::cpu::decode_value_rows(c, vcodes.data(), rows, d, got.data());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << "value rows";
    for (int64_t u = 0; u < units; ++u) rkv::decode_key_unit(c, kcodes.data() + u * ub, d, want.data() + u * quantum * d);
    if (c.format == CodecFormat::kivi) {
      const int64_t ld = rows + 3;  // a leading dimension beyond the entries
      std::vector<float> by_channel(static_cast<size_t>(d * ld), -1.0f);
      rkv::cpu::decode_kivi_keys_by_channel(c, kcodes.data(), units, d, by_channel.data(), ld);
      for (int64_t e = 0; e < rows; ++e)
        for (int64_t ch = 0; ch < d; ++ch)
          ASSERT_EQ(by_channel[static_cast<size_t>(ch * ld + e)], want[static_cast<size_t>(e * d + ch)]) << e << "," << ch;
    } else {
      rkv::cpu::decode_value_rows(c, kcodes.data(), rows, d, got.data());
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << "keys";
    }
  }
}

TEST(AttendedKV, EveryCodecMatchesTheUnpackedCopyOnDecodeAndChunks) {
  for (const CodecSpec& codec : all_codecs())
    for (const Case& k : {Case{4, 2, {700, 700}, 1}, Case{4, 4, {131, 131, 131, 131}, 5}, Case{8, 2, {96, 96}, 70}})
      check_case(codec, k);
}

TEST(AttendedKV, TailsFromEmptyToAWholeUnit) {
  // KIVI 4-bit, group 16, residual 0: of L entries, floor(L / 16) x 16 are packed; L = 64 .. 80 leaves 0 .. 15 in
  // the tail (plus the new row), and L = 80 a whole unit packed on top.
  for (int64_t L = 64; L <= 80; ++L) {
    check_case(spec(CodecFormat::kivi, 4, 16), Case{4, 2, {L, L}, 1});
    check_case(spec(CodecFormat::integer, 8, 32, true), Case{4, 2, {L, L}, 3});
  }
}

TEST(AttendedKV, PerHeadLengths) {
  // AdaKV-style budgets: the heads hold 37, 300 and 5 entries; residual 3 leaves the same tail in each.
  for (const CodecSpec& codec : {spec(CodecFormat::integer, 4, 32, false, 3), spec(CodecFormat::q4_0),
                                 spec(CodecFormat::kivi, 2, 16, false, 3)}) {
    check_case(codec, Case{6, 3, {37, 300, 5}, 1});
    check_case(codec, Case{6, 3, {37, 300, 5}, 9});
  }
}

TEST(AttendedKV, TokenPrecisionClasses) {
  // int4 base with a 16-bit (f16) and an 8-bit class: every 7th entry f16, every 5th (not 7th) int8. The classes are
  // numbered first (top first), then the base codec's entries, then the tail: as unpack_layer numbers them.
  const int64_t L = 200;
  std::vector<uint8_t> entry_class(static_cast<size_t>(2 * L), 0);
  for (size_t i = 0; i < entry_class.size(); ++i) entry_class[i] = i % 7 == 0 ? 1 : (i % 5 == 0 ? 2 : 0);
  CodecSpec base = spec(CodecFormat::integer, 4, 32, false, 4);
  const std::vector<CodecSpec> classes = {spec(CodecFormat::f16), spec(CodecFormat::integer, 8, 32)};
  check_case(base, Case{4, 2, {L, L}, 1}, classes, entry_class);
  check_case(base, Case{4, 2, {L, L}, 6}, classes, entry_class, false, true);
}

TEST(AttendedKV, SlidingWindowReachesIntoThePackedEntries) {
  // Window 60 over positions 3 i: the visible range starts 20 entries back, inside the packed part (288 or all 300
  // entries) for a decode row and the early rows of a 70-row chunk, so window_starts' binary search reads packed
  // positions.
  for (const CodecSpec& codec : {spec(CodecFormat::integer, 2, 16, true, 0), spec(CodecFormat::kivi, 4, 16, false, 8)}) {
    check_case(codec, Case{4, 1, {300}, 1}, {}, {}, true);
    check_case(codec, Case{4, 1, {300}, 70}, {}, {}, true);
  }
}

TEST(AttendedKV, ProbabilityAndAttentionMassHooks) {
  for (const CodecSpec& codec : {spec(CodecFormat::q8_0), spec(CodecFormat::kivi, 2, 32, false, 10)}) {
    check_case(codec, Case{4, 2, {150, 150}, 1}, {}, {}, false, true);
    check_case(codec, Case{4, 2, {150, 150}, 70}, {}, {}, false, true);
  }
}

TEST(AttendedKV, FloatLayerAndGeometryChecks) {
  const int64_t d = 64;
  rkv::LayerKV tail = random_layer(d, {10, 10}, 3);
  const rkv::cpu::AttendedKV plain(tail);
  EXPECT_FALSE(plain.packed());
  EXPECT_EQ(plain.longest(), 10);
  EXPECT_EQ(plain.entries(), 20);
  EXPECT_EQ(plain.position(1, 4), 13);  // 3 i + h
  rkv::PackedLayer empty = rkv::build_packed_layer(spec(CodecFormat::q8_0), 2, d);
  EXPECT_EQ(rkv::cpu::AttendedKV(tail, &empty).head_length(0), 10);  // nothing packed yet: the tail alone
  rkv::PackedLayer wrong = rkv::build_packed_layer(spec(CodecFormat::q8_0), 3, d);
  rkv::LayerKV three = random_layer(d, {64, 64, 64}, 4);
  rkv::pack_oldest(wrong, three);
  EXPECT_THROW(rkv::cpu::AttendedKV(tail, &wrong), rkv::InputError);  // 3 packed KV heads, a tail of 2
  rkv::LayerKV no_positions = tail;
  no_positions.pos.clear();
  EXPECT_THROW(rkv::cpu::AttendedKV(no_positions).position(0, 0), rkv::InputError);
}

}  // namespace
