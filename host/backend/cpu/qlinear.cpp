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

/// One product of a group sharing an input: weight W into y[n, W.rows], with its kernel.
struct QuantProduct {
  const QuantMatrix* W;
  float* y;
  QuantDotFn dot;
  QuantDot2Fn dot2 = nullptr;  ///< a fused two-level kernel for W's type, when there is one
};

/// One weight row (blocks at w) dotted with one activation row a: nb blocks, or with two levels a and a + nb.
float row_dot(const QuantProduct& p, const uint8_t* w, const BlockQ8Act* a, int64_t nb, bool two_level) {
  if (!two_level) return p.dot(w, a, nb);
  return p.dot2 ? p.dot2(w, a, a + nb, nb) : p.dot(w, a, nb) + p.dot(w, a + nb, nb);
}

/// Quantized activations times quantized weights, for small n: x[n, cols] is quantized once and the rows of every
/// product's weight are split over the threads in one dispatch (rows numbered across the products in order). With
/// `two_level`, each row is quantized twice (the value, then what the first level left over:
/// quantize_activations_residual) and the two dots are added.
void linear_quant_dot(const float* x, int64_t n, int64_t cols, const std::vector<QuantProduct>& products,
                      QuantScratch& s, float beta, bool two_level) {
  const int64_t nb = cols / 32, levels = two_level ? 2 : 1;
  if (static_cast<int64_t>(s.act.size()) < levels * n * nb) s.act.resize(static_cast<size_t>(levels * n * nb));
  BlockQ8Act* act = s.act.data();
  for (int64_t i = 0; i < n; ++i) {
    quantize_activations(x + i * cols, act + i * levels * nb, nb);
    if (two_level) quantize_activations_residual(x + i * cols, act + i * levels * nb, act + (i * levels + 1) * nb, nb);
  }
  int64_t total = 0;
  for (const QuantProduct& p : products) total += p.W->rows;
  parallel_for(total, kRowsPerChunk, [&](int64_t r0, int64_t r1) {
    int64_t first = 0;  // the first row of products[k]
    for (const QuantProduct& p : products) {
      const int64_t out = p.W->rows, rb = p.W->row_bytes();
      for (int64_t r = std::max(r0, first) - first; r < std::min(r1, first + out) - first; ++r) {
        const uint8_t* w = p.W->data + r * rb;
        for (int64_t i = 0; i < n; ++i) {
          const float v = row_dot(p, w, act + i * levels * nb, nb, two_level);
          float& dst = p.y[i * out + r];
          dst = beta == 0.0f ? v : v + beta * dst;
        }
      }
      first += out;
    }
  });
}

QuantDotFn dot_for(const QuantMatrix& W) {
  const QuantDotFn dot = quant_kernels().for_type(W.type);
  if (!dot) throw std::logic_error("no dot kernel for ggml type " + std::to_string(W.type));
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
                   ActivationLevels levels) {
  if (n <= 0) return;
  if (!W.q) {
    linear(x, n, W.cols, W.f32, W.rows, y, beta);
  } else if (n <= kQuantDotMaxRows) {
    const QuantDot2Fn dot2 = W.q->type == static_cast<uint32_t>(GgmlType::Q8_0) ? quant_kernels().dot2_q8_0 : nullptr;
    linear_quant_dot(x, n, W.cols, {{W.q, y, dot_for(*W.q), dot2}}, scratch, beta, levels == ActivationLevels::two);
  } else {
    linear_dequant_tiles(x, n, *W.q, y, scratch, beta);
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
  std::vector<QuantProduct> group;
  for (const auto& [W, y] : products) group.push_back({W.q, y, dot_for(*W.q)});
  linear_quant_dot(x, n, products.begin()->first.cols, group, scratch, 0.0f, false);
}

void weight_row(const WeightRef& W, int64_t r, float* out) {
  if (W.q) {
    dequantize_matrix_row(*W.q, r, out);
  } else {
    std::memcpy(out, W.f32 + r * W.cols, static_cast<size_t>(W.cols) * sizeof(float));
  }
}

}  // namespace rkv::cpu
