#include "model/quant_matrix.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/errors.hpp"
#include "model/dequant.hpp"
#include "model/ggml_types.hpp"
#include "model/half.hpp"

namespace rkv {

namespace {

constexpr uint32_t kQ8_0 = static_cast<uint32_t>(GgmlType::Q8_0);
constexpr int64_t kBlock = 32;

}  // namespace

const char* weight_storage_name(WeightStorage w) { return w == WeightStorage::f32 ? "f32" : "quantized"; }

int64_t QuantMatrix::row_bytes() const { return cols / kBlock * ggml_type_info(type)->type_size; }

bool is_native_quant_type(uint32_t type) {
  return type == kQ8_0 || type == static_cast<uint32_t>(GgmlType::Q4_0) ||
         type == static_cast<uint32_t>(GgmlType::Q4_1);
}

bool can_quantize_matrix(uint32_t type) {
  return is_native_quant_type(type) || (type != static_cast<uint32_t>(GgmlType::F32) && can_dequantize(type));
}

void quantize_row_q8_0(const float* x, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / kBlock; ++b, x += kBlock, dst += 34) {
    float amax = 0.0f;
    for (int64_t j = 0; j < kBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t dh = fp32_to_fp16(d);
    std::memcpy(dst, &dh, 2);
    for (int64_t j = 0; j < kBlock; ++j) dst[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::lround(x[j] * id)));
  }
}

QuantMatrix to_quant_matrix(uint32_t type, const uint8_t* src, int64_t rows, int64_t cols,
                            std::shared_ptr<const void> keep) {
  if (!can_quantize_matrix(type)) {
    throw InputError("cannot keep a matrix of type " + ggml_type_name(type) + " quantized");
  }
  if (cols <= 0 || cols % kBlock != 0) {
    throw InputError("cannot keep a matrix with " + std::to_string(cols) + " columns quantized (not a multiple of 32)");
  }
  QuantMatrix m;
  m.rows = rows;
  m.cols = cols;
  if (is_native_quant_type(type)) {
    m.type = type;
    m.data = src;
    m.keep = std::move(keep);
    return m;
  }
  m.type = kQ8_0;
  const GgmlTypeInfo* in = ggml_type_info(type);
  const int64_t in_row = cols / in->block_size * in->type_size;
  auto bytes = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(rows * m.row_bytes()));
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(type, src + r * in_row, row.data(), cols);
    quantize_row_q8_0(row.data(), bytes->data() + r * m.row_bytes(), cols);
  }
  m.data = bytes->data();
  m.keep = std::move(bytes);
  return m;
}

QuantMatrix unpermute_qk_rows(const QuantMatrix& w, int64_t n_heads, int64_t head_dim) {
  const int64_t half = head_dim / 2, rb = w.row_bytes();
  auto bytes = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(w.rows * rb));
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t j = 0; j < half; ++j) {
      for (int64_t s = 0; s < 2; ++s) {  // GGUF row h*d + 2j + s holds HF row h*d + s*d/2 + j (model.hpp)
        std::memcpy(bytes->data() + (h * head_dim + s * half + j) * rb, w.row(h * head_dim + 2 * j + s),
                    static_cast<size_t>(rb));
      }
    }
  }
  QuantMatrix out = w;
  out.data = bytes->data();
  out.keep = std::move(bytes);
  return out;
}

void dequantize_matrix_row(const QuantMatrix& w, int64_t r, float* out) { dequantize_row(w.type, w.row(r), out, w.cols); }

}  // namespace rkv
