// Test helper: a second, naive implementation of the decoder forward in double precision, written straight from
// the formulas (Hugging Face LlamaModel): full [T, T] causal attention per query head with the KV head repeated,
// rotate_half RoPE with angles pos * theta^(-2i/d) computed here, RMSNorm, SwiGLU, tied/untied LM head.
// `keep` (optional) lists, for the LAST query only, which earlier positions it may attend to (a compacted cache).
// `allowed` (optional) is the general mask: allowed(layer, kv_head, query t, key j) says whether query t may attend to
// key j < t of that layer and KV head (a cache compacted per layer and head; the query always sees itself).
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "model/model.hpp"

namespace rkv_test {

struct NaiveOutput {
  std::vector<double> logits;  ///< [T, V]
  std::vector<double> probs;   ///< attention probabilities of layer `probe_layer`: [H, T, T]
  std::vector<double> attn_out;  ///< o_proj output of layer `probe_layer`: [T, D]
  std::vector<std::vector<double>> keys_before_rope;  ///< per layer, the keys before RoPE: [T, H_kv, d]
};

inline NaiveOutput naive_forward(const rkv::Model& m, const std::vector<int32_t>& tokens, int64_t probe_layer = 0,
                                 const std::vector<int64_t>* keep = nullptr,
                                 const std::function<bool(int64_t, int64_t, int64_t, int64_t)>& allowed_mask = {}) {
  const auto& c = m.config;
  const int64_t T = static_cast<int64_t>(tokens.size()), D = c.d_model, H = c.n_heads, Hkv = c.n_kv_heads,
                d = c.head_dim, F = c.d_ff, V = c.vocab_size, G = H / Hkv;
  // inv_freq from the config (plain or scaled exactly as the loader computed it)
  const std::vector<double>& inv = m.rope_inv_freq;
  std::vector<double> x(static_cast<size_t>(T * D));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < D; ++i) x[t * D + i] = m.tok_embd[tokens[t] * D + i];
  auto rmsnorm = [&](const std::vector<double>& in, const std::vector<float>& w) {
    std::vector<double> out(in.size());
    for (int64_t t = 0; t < T; ++t) {
      double ss = 0;
      for (int64_t i = 0; i < D; ++i) ss += in[t * D + i] * in[t * D + i];
      const double s = 1.0 / std::sqrt(ss / D + c.rms_eps);
      for (int64_t i = 0; i < D; ++i) out[t * D + i] = in[t * D + i] * s * w[i];
    }
    return out;
  };
  auto matmul = [&](const std::vector<double>& in, int64_t rows, int64_t k, const std::vector<float>& W, int64_t out_n,
                    const std::vector<float>* bias) {
    std::vector<double> out(static_cast<size_t>(rows * out_n));
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t o = 0; o < out_n; ++o) {
        double s = bias && !bias->empty() ? (*bias)[o] : 0.0;
        for (int64_t i = 0; i < k; ++i) s += in[t * k + i] * W[o * k + i];
        out[t * out_n + o] = s;
      }
    return out;
  };
  auto rope = [&](std::vector<double>& v, int64_t heads) {
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < heads; ++h) {
        double* p = &v[(t * heads + h) * d];
        for (int64_t i = 0; i < d / 2; ++i) {
          const double a = static_cast<double>(t) * inv[i];
          const double x1 = p[i], x2 = p[i + d / 2];
          p[i] = x1 * std::cos(a) - x2 * std::sin(a);
          p[i + d / 2] = x2 * std::cos(a) + x1 * std::sin(a);
        }
      }
  };
  NaiveOutput out;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const auto& w = m.layers[l];
    const auto h = rmsnorm(x, w.attn_norm);
    auto q = matmul(h, T, D, w.wq, H * d, &w.bq);
    auto k = matmul(h, T, D, w.wk, Hkv * d, &w.bk);
    const auto v = matmul(h, T, D, w.wv, Hkv * d, &w.bv);
    out.keys_before_rope.push_back(k);
    rope(q, H);
    rope(k, Hkv);
    std::vector<double> a(static_cast<size_t>(T * H * d), 0.0);
    if (l == probe_layer) out.probs.assign(static_cast<size_t>(H * T * T), 0.0);
    for (int64_t hh = 0; hh < H; ++hh) {
      const int64_t g = hh / G;
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> s(static_cast<size_t>(t + 1), -INFINITY);
        double mx = -INFINITY;
        for (int64_t j = 0; j <= t; ++j) {
          bool allowed = true;
          if (keep && t == T - 1 && j < T - 1) {
            allowed = false;
            for (int64_t kk : *keep) allowed |= kk == j;
          }
          if (allowed_mask && j < t) allowed = allowed && allowed_mask(l, g, t, j);
          if (!allowed) continue;
          double dot = 0;
          for (int64_t i = 0; i < d; ++i) dot += q[(t * H + hh) * d + i] * k[(j * Hkv + g) * d + i];
          s[j] = dot / std::sqrt(static_cast<double>(d));
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (auto& e : s) { e = std::isinf(e) ? 0.0 : std::exp(e - mx); sum += e; }
        for (int64_t j = 0; j <= t; ++j) {
          const double p = s[j] / sum;
          if (l == probe_layer) out.probs[(hh * T + t) * T + j] = p;
          for (int64_t i = 0; i < d; ++i) a[(t * H + hh) * d + i] += p * v[(j * Hkv + g) * d + i];
        }
      }
    }
    const auto o = matmul(a, T, H * d, w.wo, D, nullptr);
    if (l == probe_layer) out.attn_out = o;
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    const auto h2 = rmsnorm(x, w.ffn_norm);
    auto gate = matmul(h2, T, D, w.w_gate, F, nullptr);
    const auto up = matmul(h2, T, D, w.w_up, F, nullptr);
    for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
    const auto down = matmul(gate, T, F, w.w_down, D, nullptr);
    for (size_t i = 0; i < x.size(); ++i) x[i] += down[i];
  }
  const auto xn = rmsnorm(x, m.output_norm);
  const std::vector<float>& lm = m.lm_head.empty() ? m.tok_embd : m.lm_head;
  out.logits = matmul(xn, T, D, lm, V, nullptr);
  return out;
}

/// max_t ( max_v |a[t,v] - b[t,v]| / max_v |b[t,v]| ): the per-position relative error used throughout the issue.
template <typename A, typename B>
double max_rel_err(const A& a, const B& b, int64_t rows, int64_t V) {
  double worst = 0;
  for (int64_t t = 0; t < rows; ++t) {
    double md = 0, mb = 0;
    for (int64_t v = 0; v < V; ++v) {
      md = std::max(md, std::abs(static_cast<double>(a[t * V + v]) - static_cast<double>(b[t * V + v])));
      mb = std::max(mb, std::abs(static_cast<double>(b[t * V + v])));
    }
    worst = std::max(worst, md / mb);
  }
  return worst;
}

}  // namespace rkv_test
