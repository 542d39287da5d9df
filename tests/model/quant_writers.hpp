// Test helper: float32 rows to ggml blocks, written from llama.cpp's reference quantizers (ggml-quants.c
// quantize_row_q8_0_ref, quantize_row_q4_0_ref, quantize_row_q4_1_ref), so tests can write quantized GGUF files.
// Not part of the library.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "model/half.hpp"
#include "model/quant_matrix.hpp"

namespace rkv_test {

inline void put_half(std::vector<uint8_t>& out, float x) {
  const uint16_t h = rkv::fp32_to_fp16(x);
  out.push_back(static_cast<uint8_t>(h & 0xFF));
  out.push_back(static_cast<uint8_t>(h >> 8));
}

/// Q4_0: d = max / -8 where max is the value of largest magnitude (with its sign), q = min(15, (int)(x / d + 8.5)).
inline void q4_0_block(const float* x, std::vector<uint8_t>& out) {
  float amax = 0, max = 0;
  for (int j = 0; j < 32; ++j)
    if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), max = x[j];
  const float d = max / -8, id = d != 0 ? 1 / d : 0;
  put_half(out, d);
  for (int j = 0; j < 16; ++j) {
    const int a = std::min(15, static_cast<int>(x[j] * id + 8.5f)), b = std::min(15, static_cast<int>(x[j + 16] * id + 8.5f));
    out.push_back(static_cast<uint8_t>(a | (b << 4)));
  }
}

/// Q4_1: d = (max - min) / 15, m = min, q = min(15, (int)((x - min) / d + 0.5)).
inline void q4_1_block(const float* x, std::vector<uint8_t>& out) {
  const float mn = *std::min_element(x, x + 32), mx = *std::max_element(x, x + 32);
  const float d = (mx - mn) / 15, id = d != 0 ? 1 / d : 0;
  put_half(out, d);
  put_half(out, mn);
  for (int j = 0; j < 16; ++j) {
    const int a = std::min(15, static_cast<int>((x[j] - mn) * id + 0.5f));
    const int b = std::min(15, static_cast<int>((x[j + 16] - mn) * id + 0.5f));
    out.push_back(static_cast<uint8_t>(a | (b << 4)));
  }
}

/// `v` (a multiple of 32 values) as ggml type `type`: 0 (F32), 1 (F16), 2 (Q4_0), 3 (Q4_1) or 8 (Q8_0).
inline std::vector<uint8_t> to_ggml_bytes(const std::vector<float>& v, uint32_t type) {
  std::vector<uint8_t> out;
  if (type == 0) {
    out.resize(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
  } else if (type == 1) {
    for (float x : v) put_half(out, x);
  } else if (type == 8) {
    out.resize(v.size() / 32 * 34);
    rkv::quantize_row_q8_0(v.data(), out.data(), static_cast<int64_t>(v.size()));
  } else if (type == 2 || type == 3) {
    for (size_t b = 0; b < v.size(); b += 32) (type == 2 ? q4_0_block : q4_1_block)(v.data() + b, out);
  } else {
    throw std::invalid_argument("to_ggml_bytes: unsupported type");
  }
  return out;
}

}  // namespace rkv_test
