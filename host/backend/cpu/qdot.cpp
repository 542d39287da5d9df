#include "backend/cpu/qdot.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "model/dequant.hpp"
#include "model/ggml_types.hpp"
#include "model/half.hpp"

namespace rkv::cpu {

namespace {

float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_fp32(h);
}

// Each kernel is a template over the activation block (BlockQ8Act or BlockQ16Act): the same sums, exact in int32.

template <typename Act>
float scalar_q8_0(const uint8_t* w, const Act* a, int64_t nb) {
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b, w += 34) {
    const int8_t* qw = reinterpret_cast<const int8_t*>(w + 2);
    int32_t acc = 0;
    for (int j = 0; j < 32; ++j) acc += qw[j] * a[b].qs[j];
    sum += half_at(w) * a[b].d * static_cast<float>(acc);
  }
  return sum;
}

template <typename Act>
float scalar_q4_0(const uint8_t* w, const Act* a, int64_t nb) {
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b, w += 18) {
    const uint8_t* qs = w + 2;
    int32_t acc = 0;
    for (int j = 0; j < 16; ++j) acc += ((qs[j] & 0x0F) - 8) * a[b].qs[j] + ((qs[j] >> 4) - 8) * a[b].qs[j + 16];
    sum += half_at(w) * a[b].d * static_cast<float>(acc);
  }
  return sum;
}

template <typename Act>
float scalar_q4_1(const uint8_t* w, const Act* a, int64_t nb) {
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b, w += 20) {
    const uint8_t* qs = w + 4;
    int32_t acc = 0;
    for (int j = 0; j < 16; ++j) acc += (qs[j] & 0x0F) * a[b].qs[j] + (qs[j] >> 4) * a[b].qs[j + 16];
    sum += half_at(w) * a[b].d * static_cast<float>(acc) + half_at(w + 2) * a[b].s;
  }
  return sum;
}

/// Per block of 32: d = max|x| / kMax, q = nearbyint(x / d) clamped to [-kMax, kMax], s = d * sum(q).
template <int kMax, typename Act>
void quantize_blocks(const float* x, Act* out, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / static_cast<float>(kMax);
    const float id = amax > 0.0f ? static_cast<float>(kMax) / amax : 0.0f;
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int q = static_cast<int>(std::nearbyint(x[j] * id));
      out[b].qs[j] = static_cast<std::remove_reference_t<decltype(out[b].qs[j])>>(std::clamp(q, -kMax, kMax));
      sum += out[b].qs[j];
    }
    out[b].d = d;
    out[b].s = d * static_cast<float>(sum);
  }
}

void scalar_dequant_q8_0(const uint8_t* w, float* out, int64_t nb) { dequantize_row(8, w, out, nb * 32); }
void scalar_dequant_q4_0(const uint8_t* w, float* out, int64_t nb) { dequantize_row(2, w, out, nb * 32); }
void scalar_dequant_q4_1(const uint8_t* w, float* out, int64_t nb) { dequantize_row(3, w, out, nb * 32); }

}  // namespace

void quantize_activations(const float* x, BlockQ8Act* out, int64_t nb) { quant_kernels().quantize(x, out, nb); }

void quantize_activations(const float* x, BlockQ16Act* out, int64_t nb) { quant_kernels().quantize16(x, out, nb); }

QuantDotFn QuantKernels::for_type(uint32_t type) const {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::Q8_0: return dot_q8_0;
    case GgmlType::Q4_0: return dot_q4_0;
    case GgmlType::Q4_1: return dot_q4_1;
    default: return nullptr;
  }
}

QuantDot16Fn QuantKernels::for_type16(uint32_t type) const {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::Q8_0: return dot16_q8_0;
    case GgmlType::Q4_0: return dot16_q4_0;
    case GgmlType::Q4_1: return dot16_q4_1;
    default: return nullptr;
  }
}

DequantFn QuantKernels::dequant_for_type(uint32_t type) const {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::Q8_0: return dequant_q8_0;
    case GgmlType::Q4_0: return dequant_q4_0;
    case GgmlType::Q4_1: return dequant_q4_1;
    default: return nullptr;
  }
}

const QuantKernels& scalar_quant_kernels() {
  static const QuantKernels k{"scalar",
                              quantize_blocks<127, BlockQ8Act>,
                              quantize_blocks<32767, BlockQ16Act>,
                              scalar_q8_0<BlockQ8Act>,
                              scalar_q4_0<BlockQ8Act>,
                              scalar_q4_1<BlockQ8Act>,
                              scalar_q8_0<BlockQ16Act>,
                              scalar_q4_0<BlockQ16Act>,
                              scalar_q4_1<BlockQ16Act>,
                              scalar_dequant_q8_0,
                              scalar_dequant_q4_0,
                              scalar_dequant_q4_1};
  return k;
}

const QuantKernels& quant_kernels() {
  static const QuantKernels* best = avx2_quant_kernels();
  return best ? *best : scalar_quant_kernels();
}

}  // namespace rkv::cpu
