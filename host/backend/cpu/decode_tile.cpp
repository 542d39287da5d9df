#include "backend/cpu/decode_tile.hpp"

#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define RKV_HAVE_AVX2_DECODE 1
// No "fma": m + code * s must round twice, as the scalar reference does (GCC would otherwise contract it).
#define RKV_DECODE_AVX2 __attribute__((target("avx2,f16c")))
#endif

namespace rkv::cpu {

namespace {

bool avx2_decode() {
#ifdef RKV_HAVE_AVX2_DECODE
  static const bool ok = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  }();
  return ok;
#else
  return false;
#endif
}

#ifdef RKV_HAVE_AVX2_DECODE

RKV_DECODE_AVX2 inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

/// decode_integer_group (cache/codec.hpp) of `count` groups of n % 8 == 0 elements, group i's bytes at in + i * step
/// and its elements at x + i * x_step (contiguous): element j's code is bits [j b, (j + 1) b) of the payload, so 8
/// codes span b bytes and one variable right shift per lane extracts them.
template <int kBits, bool kSymmetric>
RKV_DECODE_AVX2 void integer_groups_avx2(const uint8_t* in, size_t step, int64_t count, int64_t n, float* x,
                                         int64_t x_step) {
  const __m256i offset = _mm256_set1_epi32(kSymmetric ? 1 << (kBits - 1) : 0);
  const __m256i mask = _mm256_set1_epi32((1 << kBits) - 1);
  const __m256i shifts = kBits == 4 ? _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)
                                    : _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
  for (int64_t i = 0; i < count; ++i, in += step, x += x_step) {
    const __m256 s = _mm256_set1_ps(half_at(in));
    const __m256 m = _mm256_set1_ps(kSymmetric ? 0.0f : half_at(in + 2));
    const uint8_t* payload = in + (kSymmetric ? 2 : 4);
    for (int64_t j = 0; j < n; j += 8) {
      __m256i codes;
      if constexpr (kBits == 8) {
        codes = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(payload + j)));
      } else {
        uint32_t w = 0;
        if constexpr (kBits == 4) {
          std::memcpy(&w, payload + j / 2, 4);
        } else {
          uint16_t w16;
          std::memcpy(&w16, payload + j / 4, 2);
          w = w16;
        }
        codes = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(w)), shifts), mask);
      }
      const __m256 y = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(codes, offset)), s);
      _mm256_storeu_ps(x + j, kSymmetric ? y : _mm256_add_ps(m, y));
    }
  }
}

/// The AVX2 decoder of `bits` and `symmetric` groups.
using GroupsDecoder = void (*)(const uint8_t*, size_t, int64_t, int64_t, float*, int64_t);
GroupsDecoder groups_decoder_avx2(int bits, bool symmetric) {
  switch (bits) {
    case 8: return symmetric ? integer_groups_avx2<8, true> : integer_groups_avx2<8, false>;
    case 4: return symmetric ? integer_groups_avx2<4, true> : integer_groups_avx2<4, false>;
    default: return symmetric ? integer_groups_avx2<2, true> : integer_groups_avx2<2, false>;
  }
}

/// IEEE half rows: x = the half's value (vcvtph2ps is exact).
RKV_DECODE_AVX2 void f16_row_avx2(const uint8_t* in, int64_t d, float* x) {
  int64_t j = 0;
  for (; j + 8 <= d; j += 8)
    _mm256_storeu_ps(x + j, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * j))));
  for (; j < d; ++j) x[j] = half_at(in + 2 * j);
}

/// llama.cpp's q8_0 blocks (fp16 d, int8 q[32]) of one row: x = q d (model/dequant.cpp dq_q8_0).
RKV_DECODE_AVX2 void q8_0_row_avx2(const uint8_t* in, int64_t d, float* x) {
  for (int64_t b = 0; b < d / 32; ++b, in += 34, x += 32) {
    const __m256 scale = _mm256_set1_ps(half_at(in));
    for (int j = 0; j < 32; j += 8) {
      const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + 2 + j)));
      _mm256_storeu_ps(x + j, _mm256_mul_ps(_mm256_cvtepi32_ps(q), scale));
    }
  }
}

/// llama.cpp's q4_0 blocks (fp16 d, u8 q[16]: low nibbles elements 0..15, high 16..31) of one row: x = (q - 8) d
/// (model/dequant.cpp dq_q4_0).
RKV_DECODE_AVX2 void q4_0_row_avx2(const uint8_t* in, int64_t d, float* x) {
  const __m256i eight = _mm256_set1_epi32(8), nibble = _mm256_set1_epi32(15);
  for (int64_t b = 0; b < d / 32; ++b, in += 18, x += 32) {
    const __m256 scale = _mm256_set1_ps(half_at(in));
    for (int j = 0; j < 16; j += 8) {
      const __m256i q = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + 2 + j)));
      const __m256i lo = _mm256_sub_epi32(_mm256_and_si256(q, nibble), eight);
      const __m256i hi = _mm256_sub_epi32(_mm256_srli_epi32(q, 4), eight);
      _mm256_storeu_ps(x + j, _mm256_mul_ps(_mm256_cvtepi32_ps(lo), scale));
      _mm256_storeu_ps(x + 16 + j, _mm256_mul_ps(_mm256_cvtepi32_ps(hi), scale));
    }
  }
}

#endif

/// Decodes `count` integer groups of n elements (group i's bytes at in + i * step, its elements contiguous at
/// x + i * x_step): the AVX2 decoder when n % 8 == 0 and the CPU has it, else cache/codec.hpp's decode_integer_group.
void integer_groups(const uint8_t* in, size_t step, int64_t count, int64_t n, int bits, bool symmetric, float* x,
                    int64_t x_step) {
#ifdef RKV_HAVE_AVX2_DECODE
  if (n % 8 == 0 && avx2_decode()) return groups_decoder_avx2(bits, symmetric)(in, step, count, n, x, x_step);
#endif
  for (int64_t i = 0; i < count; ++i) decode_integer_group(in + i * step, n, bits, symmetric, x + i * x_step, 1);
}

}  // namespace

void decode_value_rows(const CodecSpec& codec, const uint8_t* in, int64_t rows, int64_t d, float* out) {
  const size_t row_bytes = codec_value_row_bytes(codec, d);
  switch (codec.format) {
    case CodecFormat::integer:
    case CodecFormat::kivi: {
      const bool sym = codec.format == CodecFormat::integer && codec.symmetric;
      const size_t gb = integer_group_bytes(codec.group, codec.bits, sym);
      // A row's groups are consecutive and so are the rows: rows x d / group groups, each `gb` bytes on.
      integer_groups(in, gb, rows * (d / codec.group), codec.group, codec.bits, sym, out, codec.group);
      return;
    }
    case CodecFormat::f16:
    case CodecFormat::q8_0:
    case CodecFormat::q4_0:
#ifdef RKV_HAVE_AVX2_DECODE
      if (avx2_decode()) {
        auto* row = codec.format == CodecFormat::f16    ? f16_row_avx2
                    : codec.format == CodecFormat::q8_0 ? q8_0_row_avx2
                                                        : q4_0_row_avx2;
        for (int64_t r = 0; r < rows; ++r) row(in + r * row_bytes, d, out + r * d);
        return;
      }
#endif
      break;
    default: break;
  }
  for (int64_t r = 0; r < rows; ++r) decode_value_row(codec, in + r * row_bytes, d, out + r * d);
}

void decode_kivi_keys_by_channel(const CodecSpec& codec, const uint8_t* in, int64_t units, int64_t d, float* out,
                                 int64_t ld) {
  const size_t gb = integer_group_bytes(codec.group, codec.bits, false);
  const size_t unit_bytes = codec_key_unit_bytes(codec, d);
  for (int64_t u = 0; u < units; ++u)  // channel c's group of unit u: row c of the output, columns u * group on
    integer_groups(in + u * unit_bytes, gb, d, codec.group, codec.bits, false, out + u * codec.group, ld);
}

const char* decode_tile_kernels() { return avx2_decode() ? "avx2" : "scalar"; }

}  // namespace rkv::cpu
