// Weight matrices kept in a ggml block format (the CPU backend's fast path, `model.weights = "quantized"`).
//
// A QuantMatrix is row-major [rows, cols]: each row is cols / 32 blocks of one of the three formats the CPU kernels
// compute on directly (layouts from llama.cpp ggml/src/ggml-common.h, block_q8_0 / block_q4_0 / block_q4_1; `d`, `m`
// are little-endian fp16):
//   Q8_0  34 bytes {d; int8 qs[32]}        w[j] = d * qs[j]
//   Q4_0  18 bytes {d; u8 qs[16]}          w[j] = d * ((qs[j] & 15) - 8),  w[j + 16] = d * ((qs[j] >> 4) - 8)
//   Q4_1  20 bytes {d; m; u8 qs[16]}       w[j] = d * (qs[j] & 15) + m,    w[j + 16] = d * (qs[j] >> 4) + m
// GGUF tensors of those types are used as stored (a view into the mapped file, no copy); every other quantized or
// half-precision type (Q5_0, Q5_1, IQ4_NL, Q4_K, Q5_K, Q6_K, F16, BF16) is dequantized and requantized to Q8_0 at
// load (llama.cpp's quantize_row_q8_0_ref: d = max|w| / 127 per block of 32, q = round(w / d)).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

namespace rkv {

/// Which weights a model holds (config key `model.weights`).
enum class WeightStorage {
  quantized,  ///< GGUF matrices in Q8_0 / Q4_0 / Q4_1 blocks (QuantMatrix); the CPU backend's fast path
  f32,        ///< every weight dequantized to float32 at load: the exact oracle (and what the CUDA backend needs)
};

/// "quantized" or "f32".
const char* weight_storage_name(WeightStorage w);

/// A [rows, cols] matrix in ggml blocks. Copyable (copies share the bytes); immutable after load; const access is
/// thread-safe. `data` points into `keep` (the mapped GGUF file or an owned buffer), which keeps the bytes alive.
struct QuantMatrix {
  uint32_t type = 0;  ///< ggml type id: 8 (Q8_0), 2 (Q4_0) or 3 (Q4_1)
  int64_t rows = 0;
  int64_t cols = 0;   ///< a multiple of 32
  const uint8_t* data = nullptr;
  std::shared_ptr<const void> keep;

  bool empty() const { return rows == 0; }
  /// Bytes of one row: cols / 32 * (34, 18 or 20).
  int64_t row_bytes() const;
  /// The blocks of row r (r in [0, rows)).
  const uint8_t* row(int64_t r) const { return data + r * row_bytes(); }
};

/// Whether the CPU kernels compute on ggml type `type` directly (Q8_0, Q4_0, Q4_1).
bool is_native_quant_type(uint32_t type);

/// Whether `to_quant_matrix` takes type `type`: a native type, or one that can be dequantized (model/dequant.hpp)
/// other than F32 (F32 matrices stay float32 on every path).
bool can_quantize_matrix(uint32_t type);

/// The matrix [rows, cols] stored as ggml type `type` at `src` (rows * cols elements, n / block_size * type_size
/// bytes): a view when the type is native (`keep` must own `src`), else a Q8_0 copy. cols must be a multiple of 32.
/// Throws rkv::InputError for a type can_quantize_matrix() refuses or a bad cols.
QuantMatrix to_quant_matrix(uint32_t type, const uint8_t* src, int64_t rows, int64_t cols,
                            std::shared_ptr<const void> keep);

/// Quantizes n floats (n a multiple of 32) to Q8_0 blocks at `dst` (n / 32 * 34 bytes), as llama.cpp's
/// quantize_row_q8_0_ref: per block d = max|x| / 127 (stored as fp16), q = round(x / d) (0 when d = 0).
void quantize_row_q8_0(const float* x, uint8_t* dst, int64_t n);

/// `w` with its rows reordered as unpermute_qk_rows (model.hpp) reorders a float matrix: a copy that owns its bytes.
QuantMatrix unpermute_qk_rows(const QuantMatrix& w, int64_t n_heads, int64_t head_dim);

/// Row r of `w` dequantized to float32 cols values at `out`.
void dequantize_matrix_row(const QuantMatrix& w, int64_t r, float* out);

}  // namespace rkv
