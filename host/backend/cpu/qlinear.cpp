#include "backend/cpu/qlinear.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cpu/blas.hpp"
#include "backend/cpu/threads.hpp"
#include "model/ggml_types.hpp"

namespace rkv::cpu {

namespace {

/// Weight rows per chunk of the thread split: enough work per chunk to amortize waking a thread.
constexpr int64_t kRowsPerChunk = 16;

/// One product of a group sharing an input: weight W into y[n, W.rows], with its kernel for activation blocks Act.
template <typename Act>
struct QuantProduct {
  const QuantMatrix* W;
  float* y;
  float (*dot)(const uint8_t* w, const Act* a, int64_t nb);
};

/// The activation scratch of weight_linear for blocks of type Act.
std::vector<BlockQ8Act>& act_scratch(QuantScratch& s, const BlockQ8Act*) { return s.act; }
std::vector<BlockQ16Act>& act_scratch(QuantScratch& s, const BlockQ16Act*) { return s.act16; }

/// Rows [r0, r1) of W (one product) dotted with the n activation rows act[n, nb]: y[i, r] = v (+ beta y[i, r]).
template <typename Act>
void product_rows(const QuantProduct<Act>& p, const Act* act, int64_t n, int64_t nb, float beta, int64_t r0,
                  int64_t r1) {
  const int64_t out = p.W->rows, rb = p.W->row_bytes();
  const auto dot = p.dot;
  const uint8_t* w = p.W->data + r0 * rb;
  for (int64_t r = r0; r < r1; ++r, w += rb) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = dot(w, act + i * nb, nb);
      float& dst = p.y[i * out + r];
      dst = beta == 0.0f ? v : v + beta * dst;
    }
  }
}

/// Quantized activations times quantized weights, for small n: x[n, cols] is quantized once (to int8 or int16
/// blocks: Act) and the rows of every product's weight are split over the threads in one dispatch (rows numbered
/// across the products in order).
template <typename Act>
void linear_quant_dot(const float* x, int64_t n, int64_t cols, const std::vector<QuantProduct<Act>>& products,
                      QuantScratch& s, float beta) {
  const int64_t nb = cols / 32;
  std::vector<Act>& scratch = act_scratch(s, static_cast<const Act*>(nullptr));
  if (static_cast<int64_t>(scratch.size()) < n * nb) scratch.resize(static_cast<size_t>(n * nb));
  const Act* act = scratch.data();
  for (int64_t i = 0; i < n; ++i) quantize_activations(x + i * cols, scratch.data() + i * nb, nb);
  int64_t total = 0;
  for (const QuantProduct<Act>& p : products) total += p.W->rows;
  parallel_for(total, kRowsPerChunk, [&](int64_t r0, int64_t r1) {
    int64_t first = 0;  // the first row of products[k]
    for (const QuantProduct<Act>& p : products) {
      const int64_t a = std::max(r0, first) - first, b = std::min(r1, first + p.W->rows) - first;
      if (a < b) product_rows(p, act, n, nb, beta, a, b);
      first += p.W->rows;
    }
  });
}

QuantDotFn dot_for(const QuantMatrix& W) {
  const QuantDotFn dot = quant_kernels().for_type(W.type);
  if (!dot) throw std::logic_error("no dot kernel for ggml type " + std::to_string(W.type));
  return dot;
}

QuantDot16Fn dot16_for(const QuantMatrix& W) {
  const QuantDot16Fn dot = quant_kernels().for_type16(W.type);
  if (!dot) throw std::logic_error("no int16-activation dot kernel for ggml type " + std::to_string(W.type));
  return dot;
}

/// sgemm against float32 tiles of the dequantized weight, for large n.
void linear_dequant_tiles(const float* x, int64_t n, const QuantMatrix& W, float* y, QuantScratch& s, float beta) {
  const int64_t in = W.cols, out = W.rows;
  const int64_t tile_rows = std::clamp<int64_t>(kDequantTileFloats / in, 1, out);
  if (static_cast<int64_t>(s.tile.size()) < tile_rows * in) s.tile.resize(static_cast<size_t>(tile_rows * in));
  float* tile = s.tile.data();
  const DequantFn dequant = quant_kernels().dequant_for_type(W.type);
  if (!dequant) throw std::logic_error("no dequantization kernel for ggml type " + std::to_string(W.type));
  for (int64_t r0 = 0; r0 < out; r0 += tile_rows) {
    const int64_t rows = std::min(tile_rows, out - r0);
    parallel_for(rows, kRowsPerChunk, [&](int64_t a, int64_t b) {
      for (int64_t r = a; r < b; ++r) dequant(W.row(r0 + r), tile + r * in, in / 32);
    });
    gemm_nt(n, rows, in, 1.0f, x, in, tile, in, beta, y + r0, out);
  }
}

}  // namespace

WeightRef weight_ref(const std::vector<float>& f32, const QuantMatrix& q, int64_t rows, int64_t cols) {
  if (!q.empty()) return {nullptr, &q, q.rows, q.cols};
  return {f32.data(), nullptr, rows, cols};
}

void weight_linear(const float* x, int64_t n, const WeightRef& W, float* y, QuantScratch& scratch, float beta,
                   ActivationPrecision precision) {
  if (n <= 0) return;
  if (!W.q) {
    linear(x, n, W.cols, W.f32, W.rows, y, beta);
  } else if (n > kQuantDotMaxRows) {
    linear_dequant_tiles(x, n, *W.q, y, scratch, beta);
  } else if (precision == ActivationPrecision::int16) {
    linear_quant_dot<BlockQ16Act>(x, n, W.cols, {{W.q, y, dot16_for(*W.q)}}, scratch, beta);
  } else {
    linear_quant_dot<BlockQ8Act>(x, n, W.cols, {{W.q, y, dot_for(*W.q)}}, scratch, beta);
  }
}

void weight_linear_group(const float* x, int64_t n, std::initializer_list<std::pair<WeightRef, float*>> products,
                         QuantScratch& scratch) {
  bool together = n > 0 && n <= kQuantDotMaxRows;
  for (const auto& [W, y] : products) together = together && W.q && W.cols == products.begin()->first.cols;
  if (!together) {
    for (const auto& [W, y] : products) weight_linear(x, n, W, y, scratch);
    return;
  }
  std::vector<QuantProduct<BlockQ8Act>> group;
  for (const auto& [W, y] : products) group.push_back({W.q, y, dot_for(*W.q)});
  linear_quant_dot(x, n, products.begin()->first.cols, group, scratch, 0.0f);
}

void weight_row(const WeightRef& W, int64_t r, float* out) {
  if (W.q) {
    dequantize_matrix_row(*W.q, r, out);
  } else {
    std::memcpy(out, W.f32 + r * W.cols, static_cast<size_t>(W.cols) * sizeof(float));
  }
}

}  // namespace rkv::cpu
