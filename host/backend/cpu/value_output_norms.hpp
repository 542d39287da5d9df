// The L1 norm of each cached value as each attention head's o_proj writes it into the residual stream: the weight
// CriticalKV, CriticalAdaKV, DefensiveKV and LAVa put on an entry's attention score (Backend::value_output_norms).
//
// Source: Feng et al., "Identify Critical KV Cache in LLM Inference from an Output Perturbation Perspective" (2025,
// arXiv 2502.03805); the formula as kvpress computes it (kvpress/presses/criticalkv_press.py, CriticalKVPress.vwl1norm,
// before its mean over the GQA group):
//   n[h, j] = sum_c | sum_i W_o[c, h d + i] v[g(h), j, i] |,   g(h) = h / G,  c < d_model,  i < d.
//
// Thread rules: a pure function of its arguments; OpenBLAS runs the products on the backend's threads.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/cpu/qlinear.hpp"
#include "cache/kv_cache.hpp"

namespace rkv::cpu {

/// n[h, j] above for every query head h < n_heads and entry j < layer.length of a uniform float32 layer ([H_kv,
/// capacity, d] values). wo: the layer's o_proj [D, n_heads d], float32 or ggml blocks (dequantized here, one layer
/// at a time). Returns float32 [n_heads, length]: each head's products in float32 (sgemm over row blocks of at most
/// 256 entries, so the scratch is 256 x D floats), each L1 sum in double. Memory: the dense W_o when it is quantized
/// (D x H d floats) plus the scratch. The caller checks the layout (not per head) and n_heads % n_kv_heads == 0.
std::vector<float> value_output_norms(const LayerKV& layer, const WeightRef& wo, int64_t n_heads);

}  // namespace rkv::cpu
