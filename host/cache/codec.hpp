// KV codecs: how a cache entry's key and value rows are stored as packed integers plus scales, and read back as
// float32 on use (README decision "KV precision: codecs").
//
// A codec is a closed family of layouts parameterised by a CodecSpec, not a plugin kind: it runs on every attention
// read of a quantized layer, on every backend, so it lives beside the cache it packs (cache/packed_kv.hpp).
//
// Formats (d = head dim; every scale and zero point is an IEEE fp16, as KIVI and llama.cpp store them):
//  integer  per token, groups of `group` consecutive channels of one row; b = bits in {2, 4, 8}:
//           symmetric:  s = ceil16(max|x| / qmax), qmax = 2^(b-1) - 1, q = clamp(round(x / s), -qmax, qmax),
//                       x' = q s;                         group bytes = 2 + group b / 8
//           asymmetric: m = floor16(min x), s = ceil16((max x - m) / (2^b - 1)), q = clamp(round((x - m) / s),
//                       0, 2^b - 1), x' = m + q s;        group bytes = 4 + group b / 8
//           ceil16 / floor16 round to the fp16 value on the safe side, so no element is clamped and round-to-nearest
//           gives |x - x'| <= s / 2 for every element (half a step of the stored scale; plus float rounding).
//  kivi     KIVI (Liu et al. 2024, "KIVI: A Tuning-Free Asymmetric 2bit Quantization for KV Cache", Sec. 3.2-3.3):
//           keys per channel -- each channel of `group` consecutive entries is one asymmetric group -- and values per
//           token (asymmetric groups of `group` channels); the newest `residual` entries of each KV head stay in
//           float32. Keys are packed `group` entries at a time, so a key unit is [group, d]: d x (4 + group b / 8)
//           bytes.
//  q8_0     llama.cpp's block of 32: {fp16 d; int8 q[32]} = 34 bytes, d = max|x| / 127, q = round(x / d)
//           (ggml-quants.c quantize_row_q8_0_ref).
//  q4_0     llama.cpp's block of 32: {fp16 d; u8 q[16]} = 18 bytes, d = x_amax / -8 (x_amax: the element of largest
//           magnitude, signed), q = min(15, trunc(x / d + 8.5)), x' = (q - 8) d, low nibbles hold elements 0..15,
//           high nibbles 16..31 (ggml-quants.c quantize_row_q4_0_ref).
//  f16      IEEE binary16 per element, round to nearest even, no scales: 2 d bytes per row; |x - x'| <= half an
//           fp16 ulp of x (the 16-bit class of per-token precision, cache/token_bits.hpp; also a format of its own).
// Bits are packed little-endian: element j of a group occupies bits [j b, (j + 1) b) of the group's payload; the
// symmetric codes are stored offset by 2^(b-1).
//
// Thread rules: pure functions, reentrant.
#pragma once
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace rkv {

enum class CodecFormat { none, integer, kivi, q8_0, q4_0, f16 };

/// A codec as a cell configures it ([compression.codec]).
struct CodecSpec {
  CodecFormat format = CodecFormat::none;
  int bits = 4;            ///< integer, kivi: 2, 4 or 8
  int64_t group = 32;      ///< integer: channels per scale; kivi: entries per key group and channels per value group
  bool symmetric = false;  ///< integer only (kivi is asymmetric, q8_0 / q4_0 symmetric by construction)
  int64_t residual = 0;    ///< newest entries of every KV head kept in float32 (KIVI's residual length R)
  /// int, kivi: "uniform" (every layer at `bits`) or "profile" (cache/layer_bits.hpp: bits per layer from the
  /// cell's sensitivity profile, at the bytes of uniform `bits`)
  std::string layer_bits = "uniform";
  double bits_ratio = 4.0;  ///< layer_bits = "profile": the most sensitive layer's target bits over the least's
  /// int only: per-token precision classes (cache/token_bits.hpp; README "KV precision: per-token bits"). Per KV
  /// head, the entries a layer packs, ranked as its eviction ranked them, give their first token_shares[0] to
  /// token_bits[0] bits, the next token_shares[1] to token_bits[1], ...; the rest (and every entry decode packs
  /// later) stay at `bits`. Strictly decreasing bits in {16, 8, 4} above `bits` (16: f16), shares in (0, 1] summing
  /// to at most 1; empty: one precision.
  std::vector<int> token_bits;
  std::vector<double> token_shares;  ///< one per token_bits entry

  bool none() const { return format == CodecFormat::none; }
  /// True when the codec stores some entries at other precisions (token_bits not empty).
  bool mixed() const { return !token_bits.empty(); }
  /// A short name for labels and records: "f32", "int4-asym-g32", "kivi2-g32-r128", "q8_0", "q4_0", "f16" (with
  /// "-rN" for a residual window, and "+16x0.05+8x0.15" for token classes: bits x share, top class first).
  std::string label() const;
  /// {"format": ..., "bits": ..., "group": ..., "symmetric": ..., "residual": ...} (only the keys the format uses;
  /// "token_bits" and "token_shares" when mixed).
  nlohmann::json to_json() const;
};

/// The format named `name` ("none", "int", "kivi", "q8_0", "q4_0", "f16"). Throws rkv::InputError naming `where`
/// otherwise.
CodecFormat parse_codec_format(const std::string& name, const std::string& where);
/// The TOML name of a format ("none", "int", "kivi", "q8_0", "q4_0", "f16").
std::string codec_format_name(CodecFormat format);

/// Checks that `spec` can pack rows of `head_dim` channels: bits in {2, 4, 8}; group in [1, 4096], dividing
/// head_dim (integer, and kivi's value groups) with group x bits a whole number of bytes; head_dim a multiple of 32
/// (q8_0, q4_0); residual in [0, 2^24]; token classes as CodecSpec::token_bits says (format int only). Throws
/// rkv::InputError naming `where` (a config key or a layer).
void check_codec(const CodecSpec& spec, int64_t head_dim, const std::string& where);

/// Entries packed together in a key unit: `group` for kivi (its keys are grouped along tokens), 1 otherwise.
int64_t codec_key_quantum(const CodecSpec& spec);
/// Bytes of one packed key unit (codec_key_quantum entries of d channels).
size_t codec_key_unit_bytes(const CodecSpec& spec, int64_t head_dim);
/// Bytes of one packed value row (one entry of d channels).
size_t codec_value_row_bytes(const CodecSpec& spec, int64_t head_dim);

/// Packs one key unit: `keys` float32 [codec_key_quantum, head_dim] row-major into codec_key_unit_bytes bytes at
/// `out`. The spec must have passed check_codec.
void encode_key_unit(const CodecSpec& spec, const float* keys, int64_t head_dim, uint8_t* out);
/// Unpacks one key unit into float32 [codec_key_quantum, head_dim].
void decode_key_unit(const CodecSpec& spec, const uint8_t* in, int64_t head_dim, float* keys);
/// Packs one value row float32 [head_dim] into codec_value_row_bytes bytes at `out`.
void encode_value_row(const CodecSpec& spec, const float* values, int64_t head_dim, uint8_t* out);
/// Unpacks one value row into float32 [head_dim].
void decode_value_row(const CodecSpec& spec, const uint8_t* in, int64_t head_dim, float* values);

/// One integer group: `n` elements x[i * stride] (i < n; n b a multiple of 8) packed into integer_group_bytes(n, b,
/// symmetric) bytes at `out` as the formats above say; decode_integer_group writes them back at the same stride.
size_t integer_group_bytes(int64_t n, int bits, bool symmetric);
void encode_integer_group(const float* x, int64_t stride, int64_t n, int bits, bool symmetric, uint8_t* out);
void decode_integer_group(const uint8_t* in, int64_t n, int bits, bool symmetric, float* x, int64_t stride);

/// llama.cpp's q4_0 quantization of `n` floats (a multiple of 32) into n / 32 blocks of 18 bytes
/// (ggml-quants.c quantize_row_q4_0_ref). model/dequant.hpp dequantize_row reads them back.
void quantize_row_q4_0(const float* x, uint8_t* dst, int64_t n);

}  // namespace rkv
