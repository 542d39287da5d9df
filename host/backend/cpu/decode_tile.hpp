// Decoding a run of packed KV entries (cache/codec.hpp) into a float32 tile for the attention products
// (attended_kv.hpp). The floats are those cache/codec.hpp's decode_value_row / decode_key_unit write, bit for bit --
// the reference the tests compare against -- computed 8 at a time with AVX2 and F16C where the CPU has them (checked
// once at run time, as qdot does): integer groups unpack their 2/4/8-bit codes with one variable shift per 8 codes
// (x = (code - 2^(b-1)) s, or m + code s: a multiply then an add, never fused, as the scalar code rounds), f16 rows
// convert with vcvtph2ps. q8_0 and q4_0 rows use the model's block dequantizer (model/dequant.hpp).
//
// Thread rules: pure functions, reentrant.
#pragma once
#include <cstdint>

#include "cache/codec.hpp"

namespace rkv::cpu {

/// Value rows [0, rows) of a packed head -- `rows` consecutive rows of codec_value_row_bytes(codec, d) bytes from
/// `in` -- as float32 out[rows, d] (row stride d). Also decodes key units of every codec but kivi (a key unit is then
/// one row in the value layout). codec: passed check_codec for d, format not none.
void decode_value_rows(const CodecSpec& codec, const uint8_t* in, int64_t rows, int64_t d, float* out);

/// KIVI key units [0, units) of a packed head (codec_key_unit_bytes(codec, d) bytes each from `in`; a unit is `group`
/// entries, one asymmetric group per channel) transposed: out[c * ld + u * group + e] = channel c of entry e of unit u,
/// for c < d (channel-major, so the scores are one sgemm Q K^T with K^T = out). ld >= units * group.
void decode_kivi_keys_by_channel(const CodecSpec& codec, const uint8_t* in, int64_t units, int64_t d, float* out,
                                 int64_t ld);

/// "avx2" when the 8-wide decoders run on this CPU, else "scalar" (for bench labels).
const char* decode_tile_kernels();

}  // namespace rkv::cpu
