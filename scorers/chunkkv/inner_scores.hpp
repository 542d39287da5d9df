// Per-position inner scores e[g, j] of kvpress's SnapKVPress and KnormPress, for the scorers that wrap them as kvpress
// does (chunkkv: ChunkKVPress, criticalkv: CriticalKVPress). Header-only; each wrapping plugin compiles its own copy.
//
// Source: kvpress 0.5.5, kvpress/presses/snapkv_press.py and knorm_press.py. With w = the window, k = the kernel and
// A the host's window attention (the sum over the last w prompt queries, [H, T]):
//   snapkv: m[h, j] = (1 / w) sum_{t = T-w}^{T-1} A[h, t, j]   for j < T - w      (window attention / w)
//           e[g, j] = mean over the G heads h of group g of avgpool_k(m[h, .])[j]  (zero padding counted, as torch's
//                     F.avg_pool1d with padding k / 2)
//           e[g, j] = max_{g', j' < T - w} e[g', j'] + 1   for the window j >= T - w (1 when the window is all of T)
//   knorm:  e[g, j] = -||K[g, j]||_2
#pragma once
#include <ripplekv/sdk.hpp>

#include <algorithm>
#include <cmath>
#include <string>

namespace rkv_inner {

/// kvpress SnapKVPress.score into e [H_kv, T] from in.window_attention float32 [H, T] (CPU). `who` names the plugin
/// in errors. Throws rkv::sdk::Error(INVALID_ARGUMENT) when the window attention is missing, misshaped, or not over
/// min(window, T) queries. Thread rule: pure (no state).
inline void kvpress_snapkv(const rkv_scorer_inputs& in, float* e, int64_t n_heads, int64_t n_kv_heads, int64_t T,
                           int64_t window, int64_t kernel, const std::string& who) {
  if (in.window < 1 || in.window > std::min(window, T))
    throw rkv::sdk::Error(RKV_ERROR_INVALID_ARGUMENT, who + ": window attention over " + std::to_string(in.window) +
                                                          " queries, expected min(window, T) = " +
                                                          std::to_string(std::min(window, T)));
  rkv::sdk::require_tensor(in.window_attention, "window_attention", kDLFloat, 32, {n_heads, T});
  const float* a = rkv::sdk::tensor_data<const float>(in.window_attention);
  const int64_t w = in.window, nk = T - w, G = n_heads / n_kv_heads, pad = kernel / 2;
  float mx = 0.0f;
  for (int64_t g = 0; g < n_kv_heads; ++g)
    for (int64_t j = 0; j < nk; ++j) {
      float over_group = 0.0f;
      for (int64_t c = 0; c < G; ++c) {
        const float* row = a + (g * G + c) * T;
        float sum = 0.0f;
        for (int64_t i = std::max<int64_t>(0, j - pad); i <= std::min(nk - 1, j + pad); ++i)
          sum += row[i] / static_cast<float>(w);
        over_group += sum / static_cast<float>(kernel);
      }
      const float s = over_group / static_cast<float>(G);
      e[g * T + j] = s;
      mx = (g == 0 && j == 0) ? s : std::max(mx, s);
    }
  for (int64_t g = 0; g < n_kv_heads; ++g)
    for (int64_t j = nk; j < T; ++j) e[g * T + j] = nk > 0 ? mx + 1.0f : 1.0f;
}

/// kvpress KnormPress.score into e [H_kv, T] from in.keys float32 [H_kv, T, d] (CPU): minus each key's L2 norm
/// (summed in double). Throws rkv::sdk::Error(INVALID_ARGUMENT) when the keys are missing or misshaped.
inline void knorm(const rkv_scorer_inputs& in, float* e, int64_t n_kv_heads, int64_t T, int64_t head_dim) {
  rkv::sdk::require_tensor(in.keys, "keys", kDLFloat, 32, {n_kv_heads, T, head_dim});
  const float* K = rkv::sdk::tensor_data<const float>(in.keys);
  for (int64_t i = 0; i < n_kv_heads * T; ++i) {
    double ss = 0.0;
    for (int64_t c = 0; c < head_dim; ++c) ss += static_cast<double>(K[i * head_dim + c]) * K[i * head_dim + c];
    e[i] = static_cast<float>(-std::sqrt(ss));
  }
}

}  // namespace rkv_inner
