// Dequantization of packed KV entries on the device (cache/codec.hpp is the format's definition and the host
// encoder; this is its decode side, element for element as rkv::decode_key_unit / rkv::decode_value_row).
#pragma once
#include "backend/cuda/kernels/common.cuh"

namespace rkv::RKV_CUDA_NS::kernels {

namespace {

constexpr int kCodecThreads = 256;

/// IEEE fp16 bits -> float (exact; subnormals included).
__device__ __forceinline__ float fp16_bits_to_f32(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
  if (exp == 0) {  // zero or subnormal: mant x 2^-24
    const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (exp == 31) return __uint_as_float(sign | 0x7F800000u | (mant << 13));
  return __uint_as_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

__device__ __forceinline__ float load_fp16(const uint8_t* p) {
  return fp16_bits_to_f32(static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8));
}

/// Element j of an integer group at `g` (scale, [minimum,] codes; cache/codec.hpp).
__device__ __forceinline__ float integer_element(const uint8_t* g, int64_t j, int bits, bool symmetric) {
  const uint8_t* payload = g + (symmetric ? 2 : 4);
  const int64_t bit = j * bits;
  const uint32_t code = (payload[bit / 8] >> (bit % 8)) & ((1u << bits) - 1u);
  const float s = load_fp16(g);
  if (symmetric) return __fmul_rn(static_cast<float>(static_cast<int>(code) - (1 << (bits - 1))), s);
  return __fadd_rn(load_fp16(g + 2), __fmul_rn(static_cast<float>(code), s));
}

/// Element (row r, channel c) of n packed rows: a thread per element, grid-stride.
template <class T>
__global__ void __launch_bounds__(kCodecThreads)
    dequantize_kv_kernel(CodecLayout layout, bool keys, const uint8_t* src, int64_t n, T* dst) {
  const int64_t d = layout.head_dim, count = n * d;
  const int64_t G = layout.group;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < count;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / d, c = e - r * d;
    float x = 0.0f;
    if (layout.format == kCodecKivi && keys) {  // key unit r / G, channel c: one group of G entries
      const int64_t gb = 4 + G * layout.bits / 8, unit = r / G;
      x = integer_element(src + (unit * d + c) * gb, r - unit * G, layout.bits, false);
    } else if (layout.format == kCodecInteger || layout.format == kCodecKivi) {  // per token, groups of G channels
      const bool sym = layout.format == kCodecInteger && layout.symmetric;
      const int64_t gb = (sym ? 2 : 4) + G * layout.bits / 8, row_bytes = (d / G) * gb;
      x = integer_element(src + r * row_bytes + (c / G) * gb, c % G, layout.bits, sym);
    } else if (layout.format == kCodecF16) {  // IEEE binary16 per element
      x = load_fp16(src + (r * d + c) * 2);
    } else if (layout.format == kCodecQ8_0) {  // {fp16 d; int8 q[32]}
      const uint8_t* b = src + r * (d / 32) * 34 + (c / 32) * 34;
      x = __fmul_rn(static_cast<float>(static_cast<int8_t>(b[2 + c % 32])), load_fp16(b));
    } else {  // q4_0 {fp16 d; u8 q[16]}: low nibbles hold elements 0..15, high nibbles 16..31
      const uint8_t* b = src + r * (d / 32) * 18 + (c / 32) * 18;
      const int j = static_cast<int>(c % 32);
      const int q = j < 16 ? (b[2 + j] & 0x0F) : (b[2 + j - 16] >> 4);
      x = __fmul_rn(static_cast<float>(q - 8), load_fp16(b));
    }
    dst[e] = from_f32<T>(x);
  }
}

}  // namespace

cudaError_t dequantize_kv(DType t, const CodecLayout& layout, bool keys, const uint8_t* src, int64_t n, void* dst,
                          cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (layout.head_dim <= 0 || layout.group <= 0) return cudaErrorInvalidValue;
  const unsigned grid = stride_blocks(n * layout.head_dim, kCodecThreads);
  if (t == DType::F32) {
    auto k = dequantize_kv_kernel<float>;
    RKV_LAUNCH(k, grid, kCodecThreads, 0, stream, layout, keys, src, n, static_cast<float*>(dst));
  } else {
    auto k = dequantize_kv_kernel<bf16>;
    RKV_LAUNCH(k, grid, kCodecThreads, 0, stream, layout, keys, src, n, static_cast<bf16*>(dst));
  }
  return cudaGetLastError();
}

}  // namespace rkv::RKV_CUDA_NS::kernels
