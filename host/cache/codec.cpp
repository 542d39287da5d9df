#include "cache/codec.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <vector>

#include "core/errors.hpp"
#include "model/dequant.hpp"
#include "model/ggml_types.hpp"
#include "model/half.hpp"
#include "model/quant_matrix.hpp"

namespace rkv {
namespace {

constexpr int64_t kBlock = 32;  // llama.cpp's QK8_0 = QK4_0

/// The neighbouring fp16 value above (up) or below h's value. fp16 is sign-magnitude: a step away from zero adds one
/// to the magnitude bits, a step toward zero subtracts one; from a zero the step crosses to the smallest subnormal.
uint16_t fp16_step(uint16_t h, bool up) {
  const bool negative = (h & 0x8000u) != 0;
  if ((h & 0x7FFFu) == 0) return up ? uint16_t{0x0001} : uint16_t{0x8001};
  return static_cast<uint16_t>(up != negative ? h + 1 : h - 1);
}

/// The fp16 value nearest `x` on the side that keeps `x` inside the quantization range: at or above x (up = true,
/// for scales) or at or below it (up = false, for minima).
uint16_t fp16_toward(float x, bool up) {
  const uint16_t h = fp32_to_fp16(x);
  const float r = fp16_to_fp32(h);
  return (up ? r < x : r > x) ? fp16_step(h, up) : h;
}

void put_code(uint8_t* payload, int64_t j, int bits, uint32_t code) {
  const int64_t bit = j * bits;
  payload[bit / 8] |= static_cast<uint8_t>(code << (bit % 8));
}

uint32_t get_code(const uint8_t* payload, int64_t j, int bits) {
  const int64_t bit = j * bits;
  return (payload[bit / 8] >> (bit % 8)) & ((1u << bits) - 1u);
}

void store_fp16(uint8_t* out, uint16_t h) { std::memcpy(out, &h, 2); }
float load_fp16(const uint8_t* in) {
  uint16_t h;
  std::memcpy(&h, in, 2);
  return fp16_to_fp32(h);
}

/// CodecSpec::token_bits and token_shares: format int, one share per class, strictly decreasing bits in {16, 8, 4}
/// above the base bits, shares in (0, 1] summing to at most 1 (runner/plan/compression_sections.cpp reads them with the same rules).
void check_token_classes(const CodecSpec& spec, const std::string& where) {
  if (spec.format != CodecFormat::integer)
    throw InputError(where + ": token_bits need format \"int\" (got \"" + codec_format_name(spec.format) + "\")");
  if (spec.token_shares.size() != spec.token_bits.size())
    throw InputError(where + ": " + std::to_string(spec.token_bits.size()) + " token_bits but " +
                     std::to_string(spec.token_shares.size()) + " token_shares");
  double sum = 0;
  for (size_t c = 0; c < spec.token_bits.size(); ++c) {
    const int b = spec.token_bits[c];
    if ((b != 16 && b != 8 && b != 4) || b <= spec.bits || (c > 0 && b >= spec.token_bits[c - 1]))
      throw InputError(where + ": token_bits must be strictly decreasing values of 16, 8, 4 above bits = " +
                       std::to_string(spec.bits) + " (got " + std::to_string(b) + ")");
    if (!(spec.token_shares[c] > 0.0 && spec.token_shares[c] <= 1.0))
      throw InputError(where + ": token_shares must lie in (0, 1]");
    sum += spec.token_shares[c];
  }
  if (sum > 1.0 + 1e-12) throw InputError(where + ": token_shares sum to more than 1");
}

}  // namespace

std::string codec_format_name(CodecFormat format) {
  switch (format) {
    case CodecFormat::none: return "none";
    case CodecFormat::integer: return "int";
    case CodecFormat::kivi: return "kivi";
    case CodecFormat::q8_0: return "q8_0";
    case CodecFormat::q4_0: return "q4_0";
    case CodecFormat::f16: return "f16";
  }
  return "none";
}

CodecFormat parse_codec_format(const std::string& name, const std::string& where) {
  for (CodecFormat f : {CodecFormat::none, CodecFormat::integer, CodecFormat::kivi, CodecFormat::q8_0, CodecFormat::q4_0,
                        CodecFormat::f16})
    if (codec_format_name(f) == name) return f;
  throw InputError(where + ": unknown codec format \"" + name +
                   "\" (expected \"none\", \"int\", \"kivi\", \"q8_0\", \"q4_0\" or \"f16\")");
}

std::string CodecSpec::label() const {
  std::string s;
  switch (format) {
    case CodecFormat::none: return "f32";
    case CodecFormat::integer:
      s = "int" + std::to_string(bits) + (symmetric ? "-sym" : "-asym") + "-g" + std::to_string(group);
      break;
    case CodecFormat::kivi: s = "kivi" + std::to_string(bits) + "-g" + std::to_string(group); break;
    case CodecFormat::q8_0: s = "q8_0"; break;
    case CodecFormat::q4_0: s = "q4_0"; break;
    case CodecFormat::f16: s = "f16"; break;
  }
  if (residual > 0) s += "-r" + std::to_string(residual);
  if (layer_bits == "profile") {
    std::ostringstream r;
    r << bits_ratio;
    s += "-profile" + r.str();
  }
  for (size_t c = 0; c < token_bits.size() && c < token_shares.size(); ++c) {
    std::ostringstream r;
    r << "+" << token_bits[c] << "x" << token_shares[c];
    s += r.str();
  }
  return s;
}

nlohmann::json CodecSpec::to_json() const {
  nlohmann::json j = {{"format", codec_format_name(format)}};
  if (format == CodecFormat::none) return j;
  if (format == CodecFormat::integer || format == CodecFormat::kivi) {
    j["bits"] = bits;
    j["group"] = group;
  }
  if (format == CodecFormat::integer) j["symmetric"] = symmetric;
  j["residual"] = residual;
  if (format == CodecFormat::integer || format == CodecFormat::kivi) {
    j["layer_bits"] = layer_bits;
    if (layer_bits == "profile") j["bits_ratio"] = bits_ratio;
  }
  if (mixed()) {
    j["token_bits"] = token_bits;
    j["token_shares"] = token_shares;
  }
  return j;
}

void check_codec(const CodecSpec& spec, int64_t head_dim, const std::string& where) {
  if (spec.residual < 0 || spec.residual > (int64_t{1} << 24))
    throw InputError(where + ": residual " + std::to_string(spec.residual) + " is outside [0, 16777216]");
  if (spec.format == CodecFormat::none) return;
  if (spec.mixed()) check_token_classes(spec, where);
  if (spec.format == CodecFormat::f16) return;
  if (spec.format == CodecFormat::q8_0 || spec.format == CodecFormat::q4_0) {
    if (head_dim % kBlock != 0)
      throw InputError(where + ": " + codec_format_name(spec.format) + " packs blocks of 32 channels, but the head dim " +
                       std::to_string(head_dim) + " is not a multiple of 32");
    return;
  }
  if (spec.bits != 2 && spec.bits != 4 && spec.bits != 8)
    throw InputError(where + ": bits " + std::to_string(spec.bits) + " is not 2, 4 or 8");
  if (spec.group < 1 || spec.group > 4096)
    throw InputError(where + ": group " + std::to_string(spec.group) + " is outside [1, 4096]");
  if (spec.group * spec.bits % 8 != 0)
    throw InputError(where + ": group " + std::to_string(spec.group) + " x " + std::to_string(spec.bits) +
                     " bits is not a whole number of bytes");
  if (head_dim % spec.group != 0)
    throw InputError(where + ": group " + std::to_string(spec.group) + " does not divide the head dim " +
                     std::to_string(head_dim));
  if (spec.format == CodecFormat::kivi && spec.symmetric)
    throw InputError(where + ": kivi is asymmetric (symmetric = true applies to format \"int\" only)");
}

size_t integer_group_bytes(int64_t n, int bits, bool symmetric) {
  return (symmetric ? 2 : 4) + static_cast<size_t>(n * bits / 8);
}

void encode_integer_group(const float* x, int64_t stride, int64_t n, int bits, bool symmetric, uint8_t* out) {
  uint8_t* payload = out + (symmetric ? 2 : 4);
  std::memset(payload, 0, static_cast<size_t>(n * bits / 8));
  if (symmetric) {
    const int qmax = (1 << (bits - 1)) - 1;
    float amax = 0.0f;
    for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i * stride]));
    const uint16_t sh = fp16_toward(amax / static_cast<float>(qmax), true);
    store_fp16(out, sh);
    const float s = fp16_to_fp32(sh);
    for (int64_t i = 0; i < n; ++i) {
      const long q = s > 0.0f ? std::lround(x[i * stride] / s) : 0;
      put_code(payload, i, bits, static_cast<uint32_t>(std::clamp<long>(q, -qmax, qmax) + (1 << (bits - 1))));
    }
    return;
  }
  const int levels = (1 << bits) - 1;
  float lo = x[0], hi = x[0];
  for (int64_t i = 1; i < n; ++i) {
    lo = std::min(lo, x[i * stride]);
    hi = std::max(hi, x[i * stride]);
  }
  const uint16_t mh = fp16_toward(lo, false);
  const float m = fp16_to_fp32(mh);
  const uint16_t sh = fp16_toward((hi - m) / static_cast<float>(levels), true);
  const float s = fp16_to_fp32(sh);
  store_fp16(out, sh);
  store_fp16(out + 2, mh);
  for (int64_t i = 0; i < n; ++i) {
    const long q = s > 0.0f ? std::lround((x[i * stride] - m) / s) : 0;
    put_code(payload, i, bits, static_cast<uint32_t>(std::clamp<long>(q, 0, levels)));
  }
}

void decode_integer_group(const uint8_t* in, int64_t n, int bits, bool symmetric, float* x, int64_t stride) {
  const float s = load_fp16(in);
  if (symmetric) {
    const int offset = 1 << (bits - 1);
    for (int64_t i = 0; i < n; ++i)
      x[i * stride] = static_cast<float>(static_cast<int>(get_code(in + 2, i, bits)) - offset) * s;
    return;
  }
  const float m = load_fp16(in + 2);
  for (int64_t i = 0; i < n; ++i) x[i * stride] = m + static_cast<float>(get_code(in + 4, i, bits)) * s;
}

void quantize_row_q4_0(const float* x, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / kBlock; ++b, x += kBlock, dst += 18) {
    float amax = 0.0f, max = 0.0f;
    for (int64_t j = 0; j < kBlock; ++j)
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_fp16(dst, fp32_to_fp16(d));
    for (int64_t j = 0; j < kBlock / 2; ++j) {
      const auto lo = static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f))));
      const auto hi = static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f))));
      dst[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

int64_t codec_key_quantum(const CodecSpec& spec) { return spec.format == CodecFormat::kivi ? spec.group : 1; }

size_t codec_value_row_bytes(const CodecSpec& spec, int64_t head_dim) {
  switch (spec.format) {
    case CodecFormat::none: return static_cast<size_t>(head_dim) * sizeof(float);
    case CodecFormat::integer:
    case CodecFormat::kivi:
      return static_cast<size_t>(head_dim / spec.group) *
             integer_group_bytes(spec.group, spec.bits, spec.format == CodecFormat::integer && spec.symmetric);
    case CodecFormat::q8_0: return static_cast<size_t>(head_dim / kBlock) * 34;
    case CodecFormat::q4_0: return static_cast<size_t>(head_dim / kBlock) * 18;
    case CodecFormat::f16: return static_cast<size_t>(head_dim) * 2;
  }
  return 0;
}

size_t codec_key_unit_bytes(const CodecSpec& spec, int64_t head_dim) {
  if (spec.format == CodecFormat::kivi)  // one asymmetric group of `group` entries per channel
    return static_cast<size_t>(head_dim) * integer_group_bytes(spec.group, spec.bits, false);
  return codec_value_row_bytes(spec, head_dim);
}

void encode_value_row(const CodecSpec& spec, const float* values, int64_t head_dim, uint8_t* out) {
  switch (spec.format) {
    case CodecFormat::none: std::memcpy(out, values, static_cast<size_t>(head_dim) * sizeof(float)); return;
    case CodecFormat::integer:
    case CodecFormat::kivi: {
      const bool sym = spec.format == CodecFormat::integer && spec.symmetric;
      const size_t gb = integer_group_bytes(spec.group, spec.bits, sym);
      for (int64_t g = 0; g < head_dim / spec.group; ++g)
        encode_integer_group(values + g * spec.group, 1, spec.group, spec.bits, sym, out + static_cast<size_t>(g) * gb);
      return;
    }
    case CodecFormat::q8_0: quantize_row_q8_0(values, out, head_dim); return;
    case CodecFormat::q4_0: quantize_row_q4_0(values, out, head_dim); return;
    case CodecFormat::f16:
      for (int64_t i = 0; i < head_dim; ++i) store_fp16(out + 2 * i, fp32_to_fp16(values[i]));
      return;
  }
}

void decode_value_row(const CodecSpec& spec, const uint8_t* in, int64_t head_dim, float* values) {
  switch (spec.format) {
    case CodecFormat::none: std::memcpy(values, in, static_cast<size_t>(head_dim) * sizeof(float)); return;
    case CodecFormat::integer:
    case CodecFormat::kivi: {
      const bool sym = spec.format == CodecFormat::integer && spec.symmetric;
      const size_t gb = integer_group_bytes(spec.group, spec.bits, sym);
      for (int64_t g = 0; g < head_dim / spec.group; ++g)
        decode_integer_group(in + static_cast<size_t>(g) * gb, spec.group, spec.bits, sym, values + g * spec.group, 1);
      return;
    }
    case CodecFormat::q8_0: dequantize_row(static_cast<uint32_t>(GgmlType::Q8_0), in, values, head_dim); return;
    case CodecFormat::q4_0: dequantize_row(static_cast<uint32_t>(GgmlType::Q4_0), in, values, head_dim); return;
    case CodecFormat::f16:
      for (int64_t i = 0; i < head_dim; ++i) values[i] = load_fp16(in + 2 * i);
      return;
  }
}

void encode_key_unit(const CodecSpec& spec, const float* keys, int64_t head_dim, uint8_t* out) {
  if (spec.format != CodecFormat::kivi) {
    encode_value_row(spec, keys, head_dim, out);
    return;
  }
  const size_t gb = integer_group_bytes(spec.group, spec.bits, false);
  for (int64_t c = 0; c < head_dim; ++c)  // channel c of the group's entries: stride head_dim
    encode_integer_group(keys + c, head_dim, spec.group, spec.bits, false, out + static_cast<size_t>(c) * gb);
}

void decode_key_unit(const CodecSpec& spec, const uint8_t* in, int64_t head_dim, float* keys) {
  if (spec.format != CodecFormat::kivi) {
    decode_value_row(spec, in, head_dim, keys);
    return;
  }
  const size_t gb = integer_group_bytes(spec.group, spec.bits, false);
  for (int64_t c = 0; c < head_dim; ++c)
    decode_integer_group(in + static_cast<size_t>(c) * gb, spec.group, spec.bits, false, keys + c, head_dim);
}

}  // namespace rkv
