// Dequantization of ggml tensor rows to float32.
//
// Block layouts and formulas follow llama.cpp ggml/src/ggml-common.h (block_* structs) and ggml/src/ggml-quants.c
// (dequantize_row_*). All multi-byte fields are little-endian; `d`, `m`, `dmin` are fp16.
//   Q8_0   {d; int8 qs[32]}                                  y[j] = d*qs[j]
//   Q4_0   {d; u8 qs[16]}                                    y[j] = d*((qs[j]&15)-8), y[j+16] = d*((qs[j]>>4)-8)
//   Q4_1   {d; m; u8 qs[16]}                                 y[j] = d*(qs[j]&15)+m,   y[j+16] = d*(qs[j]>>4)+m
//   Q5_0   {d; u8 qh[4]; u8 qs[16]}  5th bit of element j in bit j of qh (u32); y = d*(q-16)
//   Q5_1   {d; m; u8 qh[4]; u8 qs[16]}                       y = d*q + m
//   IQ4_NL {d; u8 qs[16]}                                    y[j] = d*kvalues_iq4nl[qs[j]&15], y[j+16] = ...[qs[j]>>4]
//   Q4_K   {d; dmin; u8 scales[12]; u8 qs[128]}  8 sub-blocks of 32 with 6-bit scale sc and min m:
//          y = d*sc*q - dmin*m
//   Q5_K   {d; dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}  as Q4_K with a 5th bit from qh
//   Q6_K   {u8 ql[128]; u8 qh[64]; int8 scales[16]; d}  16 sub-blocks of 16: y = d*scales[s]*(q-32)
#pragma once
#include <cstdint>

namespace rkv {

/// Whether `dequantize_row` supports ggml type id `type` (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q4_K,
/// Q5_K, Q6_K).
bool can_dequantize(uint32_t type);

/// Dequantizes `n` consecutive elements of ggml type `type` stored at `src` into `dst` (float32, n values).
/// `n` must be a multiple of the type's block size and `src` must hold n / block_size * type_size bytes (no
/// alignment needed). Throws rkv::InputError for an unsupported type or a bad `n`. Thread-safe, pure.
void dequantize_row(uint32_t type, const uint8_t* src, float* dst, int64_t n);

/// The 16 non-linear levels of IQ4_NL (kvalues_iq4nl in ggml-common.h).
extern const int8_t kIq4NlValues[16];

}  // namespace rkv
