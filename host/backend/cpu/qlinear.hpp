// Linear layers on weights held either in float32 or in ggml blocks (model/quant_matrix.hpp): the one entry point
// the forward pass uses for every matrix product with a weight.
//
// Quantized weights, by batch size n (rows of x):
// - n <= kQuantDotMaxRows (decode, small batches): each row of x is quantized per block of 32 to int8
//   (backend/cpu/qdot.hpp), and every weight row is dotted with every quantized row by the SIMD kernels, the weight
//   rows split over the backend's threads. Memory traffic is the weights' own bytes (Q4_1: 5 bits per weight).
// - larger n (prefill): the weight is dequantized to float32 in tiles of rows (at most kDequantTileFloats values),
//   each tile multiplied with OpenBLAS sgemm; x stays float32, so prefill keeps sgemm's speed and exactness against
//   the dequantized weights.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "backend/cpu/qdot.hpp"
#include "model/quant_matrix.hpp"

namespace rkv::cpu {

/// Largest batch computed with quantized activations (see above).
constexpr int64_t kQuantDotMaxRows = 4;
/// Largest float32 tile of a dequantized weight (4 MiB).
constexpr int64_t kDequantTileFloats = int64_t{1} << 20;

/// A weight matrix [rows = out, cols = in]: float32 row-major (`f32`) or ggml blocks (`q`); exactly one is set.
struct WeightRef {
  const float* f32 = nullptr;
  const QuantMatrix* q = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
};

/// The weight a model field holds: `q` when it is not empty, else the float vector (rows x cols).
WeightRef weight_ref(const std::vector<float>& f32, const QuantMatrix& q, int64_t rows, int64_t cols);

/// Scratch of weight_linear (one per concurrent caller; grown on demand).
struct QuantScratch {
  std::vector<BlockQ8Act> act;
  std::vector<BlockQ16Act> act16;
  std::vector<float> tile;
};

/// How finely the decode path quantizes activations per block of 32: `int8` (llama.cpp's Q8 activations; error at
/// most max|x| / 254 per value) or `int16` (error at most max|x| / 65534 per value, at about the int8 kernels' cost:
/// the weights' bytes dominate). The LM head uses `int16`: its logits feed argmax directly, and int8 activations
/// move SmolLM2's logits by up to ~0.3 nats, enough to flip close greedy choices.
enum class ActivationPrecision { int8, int16 };

/// y[n, W.rows] = x[n, W.cols] W^T + beta * y (beta = 0: y is only written). float32 in and out. W.cols must be a
/// multiple of 32 for a quantized W. Uses the backend's threads (backend/cpu/threads.hpp); deterministic for a fixed
/// thread count (each output is computed by one thread in a fixed order).
void weight_linear(const float* x, int64_t n, const WeightRef& W, float* y, QuantScratch& scratch, float beta = 0.0f,
                   ActivationPrecision precision = ActivationPrecision::int8);

/// y_k[n, W_k.rows] = x[n, in] W_k^T for every (W_k, y_k) of `products` (all W_k of input width in; y_k only
/// written): the Q, K, V projections or the gate and up projections of one input. When every W_k is quantized and
/// n <= kQuantDotMaxRows, x is quantized once and all the weights' rows are split over the threads in one dispatch
/// (one wake-up of the pool instead of one per matrix); otherwise the same as a weight_linear call per product.
void weight_linear_group(const float* x, int64_t n, std::initializer_list<std::pair<WeightRef, float*>> products,
                         QuantScratch& scratch);

/// out[W.cols] = row r of W in float32 (for embedding lookups).
void weight_row(const WeightRef& W, int64_t r, float* out);

}  // namespace rkv::cpu
