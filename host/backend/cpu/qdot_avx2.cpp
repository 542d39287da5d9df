// The AVX2 kernel set of backend/cpu/qdot.hpp (after llama.cpp ggml-cpu/arch/x86/quants.c: bytes_from_nibbles_32,
// mul_sum_i8_pairs_float, mul_sum_us8_pairs_float). Compiled for every x86-64 build with per-function target
// attributes; only called after the CPU was checked for AVX2, FMA and F16C.
#include "backend/cpu/qdot.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include <cstddef>
#include <cstring>

#define RKV_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace rkv::cpu {

namespace {

RKV_AVX2 inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

RKV_AVX2 inline float hsum(__m256 x) {
  __m128 r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

/// 16 bytes of nibble pairs -> 32 bytes 0..15: elements 0..15 the low nibbles, 16..31 the high ones.
RKV_AVX2 inline __m256i nibbles_32(const uint8_t* q) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  const __m256i b = _mm256_insertf128_si256(_mm256_castsi128_si256(t), _mm_srli_epi16(t, 4), 1);
  return _mm256_and_si256(b, _mm256_set1_epi8(0x0F));
}

/// Sums of products of unsigned u and signed s bytes, 4 adjacent pairs per lane, as 8 floats. Exact for the inputs
/// used here: a 16-bit partial (two products) is at most 2 * 128 * 127 = 32512 < 2^15 (u = |x| <= 128, |s| <= 127).
RKV_AVX2 inline __m256 sum_us8(__m256i u, __m256i s) {
  const __m256i p16 = _mm256_maddubs_epi16(u, s);
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

/// The same for two signed byte vectors (|x| * sign(y, x) = x * y).
RKV_AVX2 inline __m256 sum_i8(__m256i x, __m256i y) { return sum_us8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x)); }

RKV_AVX2 inline __m256i load32(const void* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Each kernel keeps two accumulators (even and odd blocks) so consecutive blocks' FMAs do not wait on each other's
// latency; the two are added at the end.

/// Q8_0 block b's contribution: (dw * da) * sum(qw * qa) as 8 partial lanes, added to acc.
RKV_AVX2 inline __m256 q8_0_block(const uint8_t* w, const BlockQ8Act& a, __m256 acc) {
  const __m256 d = _mm256_set1_ps(half_at(w) * a.d);
  return _mm256_fmadd_ps(d, sum_i8(load32(w + 2), load32(a.qs)), acc);
}

RKV_AVX2 inline __m256 q4_0_block(const uint8_t* w, const BlockQ8Act& a, __m256 acc) {
  const __m256 d = _mm256_set1_ps(half_at(w) * a.d);
  const __m256i qw = _mm256_sub_epi8(nibbles_32(w + 2), _mm256_set1_epi8(8));
  return _mm256_fmadd_ps(d, sum_i8(qw, load32(a.qs)), acc);
}

/// Q4_1 block: dw da sum(nib qa) added to acc (8 partial lanes) and mw s to lane 1 of `mins`. The block's d and m
/// (two adjacent fp16) are converted together and multiplied by the activation block's adjacent (d, s) in one step,
/// so the min term costs one vector add instead of a scalar chain.
RKV_AVX2 inline void q4_1_block(const uint8_t* w, const BlockQ8Act& a, __m256& acc, __m128& mins) {
  int32_t dm_bits;
  std::memcpy(&dm_bits, w, 4);
  const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(dm_bits));                                   // (dw, mw, 0, 0)
  const __m128 ds = _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(&a.d)));  // (da, s, 0, 0)
  const __m128 prod = _mm_mul_ps(dm, ds);                                                       // (dw da, mw s)
  acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(prod), sum_us8(nibbles_32(w + 4), load32(a.qs)), acc);
  mins = _mm_add_ps(mins, prod);
}

/// sum over blocks of Block(weight block, activation block), in two independent accumulator chains; Act is the int8
/// (BlockQ8Act) or int16 (BlockQ16Act) activation block.
template <int kBytes, typename Act, __m256 (*Block)(const uint8_t*, const Act&, __m256)>
RKV_AVX2 inline float two_chain_dot(const uint8_t* w, const Act* a, int64_t nb) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    acc0 = Block(w + b * kBytes, a[b], acc0);
    acc1 = Block(w + (b + 1) * kBytes, a[b + 1], acc1);
  }
  if (b < nb) acc0 = Block(w + b * kBytes, a[b], acc0);
  return hsum(_mm256_add_ps(acc0, acc1));
}

RKV_AVX2 float avx2_q8_0(const uint8_t* w, const BlockQ8Act* a, int64_t nb) { return two_chain_dot<34, BlockQ8Act, q8_0_block>(w, a, nb); }

RKV_AVX2 float avx2_q4_0(const uint8_t* w, const BlockQ8Act* a, int64_t nb) { return two_chain_dot<18, BlockQ8Act, q4_0_block>(w, a, nb); }

RKV_AVX2 float avx2_q4_1(const uint8_t* w, const BlockQ8Act* a, int64_t nb) {
  static_assert(offsetof(BlockQ8Act, s) == offsetof(BlockQ8Act, d) + 4, "q4_1_block loads (d, s) as one pair");
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m128 mins0 = _mm_setzero_ps(), mins1 = _mm_setzero_ps();
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    q4_1_block(w + b * 20, a[b], acc0, mins0);
    q4_1_block(w + (b + 1) * 20, a[b + 1], acc1, mins1);
  }
  if (b < nb) q4_1_block(w + b * 20, a[b], acc0, mins0);
  const __m128 mins = _mm_add_ps(mins0, mins1);
  return hsum(_mm256_add_ps(acc0, acc1)) + _mm_cvtss_f32(_mm_shuffle_ps(mins, mins, 1));
}

// int16 activations (the LM head's): a block's 32 weights widened to two vectors of 16 int16 (elements 0..15 and
// 16..31) and multiplied with the 32 int16 activations by madd (pairs summed in int32; a lane's 4 products stay
// below 4 * 128 * 32767 < 2^31).

/// 8 int32 partial sums of w_lo * qa[0..15] + w_hi * qa[16..31], as floats.
RKV_AVX2 inline __m256 sum_i16(__m256i w_lo, __m256i w_hi, const int16_t* qa) {
  const __m256i p = _mm256_add_epi32(_mm256_madd_epi16(w_lo, load32(qa)), _mm256_madd_epi16(w_hi, load32(qa + 16)));
  return _mm256_cvtepi32_ps(p);
}

RKV_AVX2 inline __m128i load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

RKV_AVX2 inline __m256 q8_0_block16(const uint8_t* w, const BlockQ16Act& a, __m256 acc) {
  const __m256 d = _mm256_set1_ps(half_at(w) * a.d);
  const __m256i lo = _mm256_cvtepi8_epi16(load16(w + 2)), hi = _mm256_cvtepi8_epi16(load16(w + 18));
  return _mm256_fmadd_ps(d, sum_i16(lo, hi, a.qs), acc);
}

/// The 32 nibbles of a Q4 block as int16 minus `offset` (8 for Q4_0, 0 for Q4_1): low nibbles, then high ones.
RKV_AVX2 inline void nibbles_i16(const uint8_t* q, int offset, __m256i* lo, __m256i* hi) {
  const __m128i t = load16(q), mask = _mm_set1_epi8(0x0F);
  const __m256i off = _mm256_set1_epi16(static_cast<int16_t>(offset));
  *lo = _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_and_si128(t, mask)), off);
  *hi = _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(t, 4), mask)), off);
}

RKV_AVX2 inline __m256 q4_0_block16(const uint8_t* w, const BlockQ16Act& a, __m256 acc) {
  __m256i lo, hi;
  nibbles_i16(w + 2, 8, &lo, &hi);
  return _mm256_fmadd_ps(_mm256_set1_ps(half_at(w) * a.d), sum_i16(lo, hi, a.qs), acc);
}

RKV_AVX2 float avx2_dot16_q8_0(const uint8_t* w, const BlockQ16Act* a, int64_t nb) {
  return two_chain_dot<34, BlockQ16Act, q8_0_block16>(w, a, nb);
}

RKV_AVX2 float avx2_dot16_q4_0(const uint8_t* w, const BlockQ16Act* a, int64_t nb) {
  return two_chain_dot<18, BlockQ16Act, q4_0_block16>(w, a, nb);
}

/// As avx2_q4_1 (the min term collected in lane 1 of `mins`) with int16 activations.
RKV_AVX2 float avx2_dot16_q4_1(const uint8_t* w, const BlockQ16Act* a, int64_t nb) {
  static_assert(offsetof(BlockQ16Act, s) == offsetof(BlockQ16Act, d) + 4, "(d, s) is loaded as one pair");
  __m256 acc = _mm256_setzero_ps();
  __m128 mins = _mm_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, w += 20) {
    int32_t dm_bits;
    std::memcpy(&dm_bits, w, 4);
    const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(dm_bits));
    const __m128 prod = _mm_mul_ps(dm, _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(&a[b].d))));
    __m256i lo, hi;
    nibbles_i16(w + 4, 0, &lo, &hi);
    acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(prod), sum_i16(lo, hi, a[b].qs), acc);
    mins = _mm_add_ps(mins, prod);
  }
  return hsum(acc) + _mm_cvtss_f32(_mm_shuffle_ps(mins, mins, 1));
}

/// The quantization of backend/cpu/qdot.hpp (qdot.cpp quantize_blocks), 8 values at a time: the same max, the same
/// float products x * id, the same rounding (to nearest even) and clamp, so the same blocks bit for bit. Fills
/// q[4] (the 32 values as int32, in order) and returns (d, s).
template <int kMax>
RKV_AVX2 inline void quantize_block(const float* x, __m256i q[4], float* d, float* s) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 v[4], amax = _mm256_setzero_ps();
  for (int k = 0; k < 4; ++k) {
    v[k] = _mm256_loadu_ps(x + 8 * k);
    amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[k]));
  }
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  const float max = _mm_cvtss_f32(m);
  *d = max / static_cast<float>(kMax);
  const __m256 id = _mm256_set1_ps(max > 0.0f ? static_cast<float>(kMax) / max : 0.0f);
  const __m256i hi = _mm256_set1_epi32(kMax), lo = _mm256_set1_epi32(-kMax);
  __m256i sum = _mm256_setzero_si256();
  for (int k = 0; k < 4; ++k) {
    const __m256 r = _mm256_round_ps(_mm256_mul_ps(v[k], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    q[k] = _mm256_max_epi32(lo, _mm256_min_epi32(hi, _mm256_cvtps_epi32(r)));
    sum = _mm256_add_epi32(sum, q[k]);
  }
  __m128i t = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
  *s = *d * static_cast<float>(_mm_cvtsi128_si32(t));
}

RKV_AVX2 void avx2_quantize(const float* x, BlockQ8Act* out, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 32) {
    __m256i q[4];
    quantize_block<127>(x, q, &out[b].d, &out[b].s);
    // packs interleave the 128-bit lanes; the permutation puts the 32 values back in order.
    const __m256i p8 = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].qs),
                        _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  }
}

RKV_AVX2 void avx2_quantize16(const float* x, BlockQ16Act* out, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 32) {
    __m256i q[4];
    quantize_block<32767>(x, q, &out[b].d, &out[b].s);
    for (int k = 0; k < 2; ++k)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].qs + 16 * k),
                          _mm256_permute4x64_epi64(_mm256_packs_epi32(q[2 * k], q[2 * k + 1]), 0xD8));
  }
}

/// Stores 32 int8 values (as 4 x 8 lanes) times d, plus m when `with_min` (a multiply then an add, not an FMA: the
/// same two roundings as the scalar dequantization, so both give the same floats).
template <bool kWithMin>
RKV_AVX2 inline void store_scaled(__m256i q, bool is_signed, float d, float m, float* out) {
  const __m256 dv = _mm256_set1_ps(d), mv = _mm256_set1_ps(m);
  const __m128i halves[2] = {_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1)};
  for (int h = 0; h < 2; ++h) {
    for (int e = 0; e < 2; ++e) {
      const __m128i eight = e == 0 ? halves[h] : _mm_srli_si128(halves[h], 8);
      const __m256i i32 = is_signed ? _mm256_cvtepi8_epi32(eight) : _mm256_cvtepu8_epi32(eight);
      __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(i32), dv);
      if (kWithMin) v = _mm256_add_ps(v, mv);
      _mm256_storeu_ps(out + h * 16 + e * 8, v);
    }
  }
}

RKV_AVX2 void avx2_dequant_q8_0(const uint8_t* w, float* out, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, w += 34, out += 32) store_scaled<false>(load32(w + 2), true, half_at(w), 0.0f, out);
}

RKV_AVX2 void avx2_dequant_q4_0(const uint8_t* w, float* out, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, w += 18, out += 32)
    store_scaled<false>(_mm256_sub_epi8(nibbles_32(w + 2), _mm256_set1_epi8(8)), true, half_at(w), 0.0f, out);
}

RKV_AVX2 void avx2_dequant_q4_1(const uint8_t* w, float* out, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, w += 20, out += 32) store_scaled<true>(nibbles_32(w + 4), false, half_at(w), half_at(w + 2), out);
}

}  // namespace

const QuantKernels* avx2_quant_kernels() {
  static const QuantKernels k{"avx2",          avx2_quantize,     avx2_quantize16,
                              avx2_q8_0,         avx2_q4_0,         avx2_q4_1,
                              avx2_dot16_q8_0, avx2_dot16_q4_0,   avx2_dot16_q4_1,   avx2_dequant_q8_0,
                              avx2_dequant_q4_0, avx2_dequant_q4_1};
  __builtin_cpu_init();
  const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  return ok ? &k : nullptr;
}

}  // namespace rkv::cpu

#else

namespace rkv::cpu {
const QuantKernels* avx2_quant_kernels() { return nullptr; }
}  // namespace rkv::cpu

#endif
