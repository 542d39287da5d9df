#include "model/dequant.hpp"

#include <cstring>
#include <string>

#include "core/errors.hpp"
#include "model/ggml_types.hpp"
#include "model/half.hpp"

namespace rkv {

const int8_t kIq4NlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

namespace {

float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_fp32(h);
}

void dq_f32(const uint8_t* x, float* y, int64_t n) { std::memcpy(y, x, static_cast<size_t>(n) * 4); }

void dq_f16(const uint8_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = half_at(x + 2 * i);
}

void dq_bf16(const uint8_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t b;
    std::memcpy(&b, x + 2 * i, 2);
    y[i] = bf16_to_fp32(b);
  }
}

// Q8_0: 34 bytes = d (2) + qs[32].
void dq_q8_0(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 34, y += 32) {
    const float d = half_at(x);
    const int8_t* qs = reinterpret_cast<const int8_t*>(x + 2);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(qs[j]) * d;
  }
}

// Q4_0: 18 bytes = d (2) + qs[16].
void dq_q4_0(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 18, y += 32) {
    const float d = half_at(x);
    const uint8_t* qs = x + 2;
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
      y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
    }
  }
}

// Q4_1: 20 bytes = d (2) + m (2) + qs[16].
void dq_q4_1(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 20, y += 32) {
    const float d = half_at(x), m = half_at(x + 2);
    const uint8_t* qs = x + 4;
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
      y[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
    }
  }
}

// Q5_0: 22 bytes = d (2) + qh (4) + qs[16]. Bit j of qh is the 5th bit of element j (j < 32).
void dq_q5_0(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 22, y += 32) {
    const float d = half_at(x);
    uint32_t qh;
    std::memcpy(&qh, x + 2, 4);
    const uint8_t* qs = x + 6;
    for (int j = 0; j < 16; ++j) {
      const int h0 = static_cast<int>((qh >> j) & 1u) << 4;
      const int h1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
      y[j] = static_cast<float>(((qs[j] & 0x0F) | h0) - 16) * d;
      y[j + 16] = static_cast<float>(((qs[j] >> 4) | h1) - 16) * d;
    }
  }
}

// Q5_1: 24 bytes = d (2) + m (2) + qh (4) + qs[16].
void dq_q5_1(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 24, y += 32) {
    const float d = half_at(x), m = half_at(x + 2);
    uint32_t qh;
    std::memcpy(&qh, x + 4, 4);
    const uint8_t* qs = x + 8;
    for (int j = 0; j < 16; ++j) {
      const int h0 = static_cast<int>((qh >> j) & 1u) << 4;
      const int h1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
      y[j] = static_cast<float>((qs[j] & 0x0F) | h0) * d + m;
      y[j + 16] = static_cast<float>((qs[j] >> 4) | h1) * d + m;
    }
  }
}

// IQ4_NL: 18 bytes = d (2) + qs[16]; levels from kIq4NlValues.
void dq_iq4_nl(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 18, y += 32) {
    const float d = half_at(x);
    const uint8_t* qs = x + 2;
    for (int j = 0; j < 16; ++j) {
      y[j] = d * static_cast<float>(kIq4NlValues[qs[j] & 0x0F]);
      y[j + 16] = d * static_cast<float>(kIq4NlValues[qs[j] >> 4]);
    }
  }
}

// Scale and min of sub-block j (0..7) from the 12 packed bytes of Q4_K/Q5_K (get_scale_min_k4 in ggml-quants.c):
// j < 4: 6 low bits of q[j] and q[j+4]; j >= 4: low nibble / high nibble of q[j+4] plus the top 2 bits of q[j-4] /
// q[j] as bits 4-5.
void scale_min_k4(int j, const uint8_t* q, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q4_K: 144 bytes = d (2) + dmin (2) + scales[12] + qs[128]. Each group of 64 elements uses 32 bytes of qs: low
// nibbles give the first 32 elements (sub-block 2g), high nibbles the next 32 (sub-block 2g+1).
void dq_q4_k(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 144) {
    const float d = half_at(x), dmin = half_at(x + 2);
    const uint8_t* scales = x + 4;
    const uint8_t* q = x + 16;
    for (int g = 0; g < 4; ++g, q += 32) {
      int sc, m;
      scale_min_k4(2 * g, scales, sc, m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      scale_min_k4(2 * g + 1, scales, sc, m);
      const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0x0F) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

// Q5_K: 176 bytes = d (2) + dmin (2) + scales[12] + qh[32] + qs[128]. As Q4_K; the 5th bit of element l of
// sub-block s is bit s of qh[l].
void dq_q5_k(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 176) {
    const float d = half_at(x), dmin = half_at(x + 2);
    const uint8_t* scales = x + 4;
    const uint8_t* qh = x + 16;
    const uint8_t* ql = x + 48;
    for (int g = 0; g < 4; ++g, ql += 32) {
      int sc, m;
      scale_min_k4(2 * g, scales, sc, m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      scale_min_k4(2 * g + 1, scales, sc, m);
      const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
      const uint8_t u1 = static_cast<uint8_t>(1u << (2 * g)), u2 = static_cast<uint8_t>(2u << (2 * g));
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>((ql[l] & 0x0F) + ((qh[l] & u1) ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
    }
  }
}

// Q6_K: 210 bytes = ql[128] + qh[64] + scales[16] (int8) + d (2). Two halves of 128 elements; in each, element
// l (0..31) of the four 32-runs takes its low 4 bits from ql and its 2 high bits from qh[l] bits 0-1, 2-3, 4-5, 6-7.
void dq_q6_k(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 210) {
    const uint8_t* ql = x;
    const uint8_t* qh = x + 128;
    const int8_t* sc = reinterpret_cast<const int8_t*>(x + 192);
    const float d = half_at(x + 208);
    for (int half = 0; half < 2; ++half, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
    }
  }
}

}  // namespace

bool can_dequantize(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::IQ4_NL:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K: return true;
    default: return false;
  }
}

void dequantize_row(uint32_t type, const uint8_t* src, float* dst, int64_t n) {
  const GgmlTypeInfo* info = ggml_type_info(type);
  if (!info || !can_dequantize(type)) {
    throw InputError("cannot dequantize tensors of ggml type " + ggml_type_name(type) +
                     " (supported: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q4_K, q5_K, q6_K)");
  }
  if (n < 0 || n % info->block_size != 0) {
    throw InputError("dequantize " + std::string(info->name) + ": " + std::to_string(n) +
                     " elements is not a multiple of the block size " + std::to_string(info->block_size));
  }
  if (n == 0) return;  // an empty tensor: dst may be null (an empty vector's data()), and memcpy forbids that
  const int64_t nb = n / info->block_size;
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::F32: dq_f32(src, dst, n); break;
    case GgmlType::F16: dq_f16(src, dst, n); break;
    case GgmlType::BF16: dq_bf16(src, dst, n); break;
    case GgmlType::Q8_0: dq_q8_0(src, dst, nb); break;
    case GgmlType::Q4_0: dq_q4_0(src, dst, nb); break;
    case GgmlType::Q4_1: dq_q4_1(src, dst, nb); break;
    case GgmlType::Q5_0: dq_q5_0(src, dst, nb); break;
    case GgmlType::Q5_1: dq_q5_1(src, dst, nb); break;
    case GgmlType::IQ4_NL: dq_iq4_nl(src, dst, nb); break;
    case GgmlType::Q4_K: dq_q4_k(src, dst, nb); break;
    case GgmlType::Q5_K: dq_q5_k(src, dst, nb); break;
    case GgmlType::Q6_K: dq_q6_k(src, dst, nb); break;
    default: break;  // excluded above
  }
}

}  // namespace rkv
