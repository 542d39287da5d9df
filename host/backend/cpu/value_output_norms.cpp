#include "backend/cpu/value_output_norms.hpp"

#include <algorithm>
#include <cmath>

#include "backend/cpu/blas.hpp"

namespace rkv::cpu {

namespace {
constexpr int64_t kRowBlock = 256;  // entries per product: the scratch is kRowBlock x D floats
}  // namespace

std::vector<float> value_output_norms(const LayerKV& layer, const WeightRef& wo, int64_t n_heads) {
  const int64_t T = layer.length, d = layer.head_dim, D = wo.rows, Hd = n_heads * d;
  const int64_t G = n_heads / layer.n_kv_heads;
  std::vector<float> dense;  // W_o [D, H d] in float32 when the backend holds it in ggml blocks
  const float* W = wo.f32;
  if (!W) {
    dense.resize(static_cast<size_t>(D * Hd));
    for (int64_t c = 0; c < D; ++c) weight_row(wo, c, dense.data() + c * Hd);
    W = dense.data();
  }
  std::vector<float> norms(static_cast<size_t>(n_heads * T));
  std::vector<float> y(static_cast<size_t>(std::min(T, kRowBlock) * D));  // head h's outputs of one row block
  for (int64_t h = 0; h < n_heads; ++h) {
    const float* v = layer.v.data() + (h / G) * layer.capacity * d;  // v[g(h), 0, 0]
    for (int64_t j0 = 0; j0 < T; j0 += kRowBlock) {
      const int64_t m = std::min(kRowBlock, T - j0);
      // y[r, c] = sum_i v[g, j0 + r, i] W_o[c, h d + i]: the head's columns of W_o are B[D, d] with row stride H d.
      gemm_nt(m, D, d, 1.0f, v + j0 * d, d, W + h * d, Hd, 0.0f, y.data(), D);
      for (int64_t r = 0; r < m; ++r) {
        double l1 = 0.0;
        for (int64_t c = 0; c < D; ++c) l1 += std::fabs(static_cast<double>(y[static_cast<size_t>(r * D + c)]));
        norms[static_cast<size_t>(h * T + j0 + r)] = static_cast<float>(l1);
      }
    }
  }
  return norms;
}

}  // namespace rkv::cpu
