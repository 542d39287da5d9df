// Non-causal chunked attention scorer (the attention part of Compactor), z-normalized over the layer.
//
// Source: kvpress 0.5.5, kvpress/presses/non_causal_attention_press.py (NonCausalAttnPress); Chari & Van Durme,
// "Compactor: Calibrated Query-Agnostic KV Cache Compression with Approximate Leverage Scores" (2025, arXiv
// 2507.08143). With chunk size c, the prompt cut into chunks [ic, (i+1)c), Q the post-RoPE queries of all T prompt
// positions and K the cached post-RoPE keys:
//
//   a[h, j]  = sum_{t in chunk(j)} softmax_{j' in chunk(j)}( Q[h, t] . K[g(h), j'] )[j]   (NOT scaled by 1/sqrt(d),
//              non-causal inside the chunk, nothing across chunks)
//   b[g, j]  = mean over the G heads h of group g of a[h, j],   times ||V[g, j]||_2
//   p[g, j]  = avgpool_3(b[g, .])[j]                  (kernel 3, zero padding counted in the divisor, as torch)
//   s[g, j]  = (p[g, j] - mean(p)) / max(std(p), 1e-6)  mean and unbiased std over ALL H_kv x T entries (kvpress's
//              comment says head-wise; its code normalizes the whole layer, and so does this port)
//
// When T is not a multiple of c kvpress pads the last chunk with zero queries and zero keys and masks the padded key
// logits with -1e-9 (not -inf) and the padded query rows with 0: the padded keys still take softmax mass (logit
// about 0) and every padded query row spreads 1/c over the chunk's c columns, adding (c - R)/c to each real key of a
// last chunk of R real positions. This port reproduces that, to match kvpress's scores.
//
// Needs the queries of every prompt position: it asks for RKV_STAT_WINDOW_QUERIES with a window of `max_tokens`
// positions (default 8192, SmolLM2's context), which the host clamps to T ([H, T, d] floats per layer, 2.4 MB at
// T = 1024 on SmolLM2); a longer prompt is refused with an error naming the param. (The plugin ABI has no "all
// prompt queries" statistic yet; a window as long as the prompt is that.) Prefill only. Dots in double; softmax in
// double; rounded once to float32. Checked against kvpress on tests/fixtures/kvpress.
#include <ripplekv/sdk.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "non_causal_scores.hpp"

namespace {

using rkv::sdk::Error;
using rkv::sdk::Param;

class NonCausalAttention final : public rkv::sdk::Scorer {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.scorer.non_causal_attention", RKV_KIND_SCORER, "1.0.0",
                                "NonCausalAttn: chunked non-causal attention x ||v||, pooled and z-normalized")
        .param(Param::Int("chunk_size", 256, "chunk length c in positions of the non-causal attention")
                   .min(1)
                   .max(1 << 16))
        .param(Param::Int("max_tokens", 8192,
                          "longest prompt scored, in tokens: the queries of this many last positions are requested")
                   .min(1)
                   .max(1 << 20));
  }

  NonCausalAttention(const rkv::sdk::Params& p, const rkv::sdk::Host& host)
      : chunk_(p.get_int("chunk_size")), max_tokens_(p.get_int("max_tokens")), host_(host) {}

  rkv_scorer_requirements requirements(const rkv_attention_shape& shape) override {
    if (shape.n_heads < 1 || shape.n_kv_heads < 1 || shape.n_heads % shape.n_kv_heads != 0)
      throw Error(RKV_ERROR_INVALID_ARGUMENT,
                  "non_causal_attention: n_heads must be a positive multiple of n_kv_heads");
    n_heads_ = shape.n_heads;
    head_dim_ = shape.head_dim;
    rkv_scorer_requirements r{};
    r.stats = RKV_STAT_KEYS | RKV_STAT_VALUES | RKV_STAT_WINDOW_QUERIES;
    r.window = max_tokens_;
    return r;
  }

  /// scores [H_kv, T] float32 from keys, values float32 [H_kv, T, d] and window_queries float32 [H, T, d] (all
  /// prompt queries; CPU, borrowed for the call). Throws Error(INVALID_ARGUMENT) for missing or misshaped inputs or
  /// non-finite scores, Error(CANCELLED) when the host asks to stop. Thread rule: never called concurrently on one
  /// instance.
  void score(const rkv_scorer_inputs& in, float* scores, int64_t n_kv_heads, int64_t T,
             rkv::sdk::Diagnostics&) override {
    if (n_heads_ < 1) throw Error(RKV_ERROR_INVALID_ARGUMENT, "non_causal_attention: score() before requirements()");
    const int64_t d = head_dim_, H = n_heads_;
    if (T > max_tokens_)
      throw Error(RKV_ERROR_INVALID_ARGUMENT, "non_causal_attention: a prompt of " + std::to_string(T) +
                                                  " tokens is longer than max_tokens = " + std::to_string(max_tokens_) +
                                                  " (raise [scorer.non_causal_attention] max_tokens)");
    if (in.window != T)
      throw Error(RKV_ERROR_INVALID_ARGUMENT, "non_causal_attention: needs the queries of all T = " +
                                                  std::to_string(T) + " prompt positions, got " +
                                                  std::to_string(in.window) + " (prefill only)");
    rkv::sdk::require_tensor(in.keys, "keys", kDLFloat, 32, {n_kv_heads, T, d});
    rkv::sdk::require_tensor(in.values, "values", kDLFloat, 32, {n_kv_heads, T, d});
    rkv::sdk::require_tensor(in.window_queries, "window_queries", kDLFloat, 32, {H, T, d});
    const float* K = rkv::sdk::tensor_data<const float>(in.keys);
    const float* V = rkv::sdk::tensor_data<const float>(in.values);
    const float* Q = rkv::sdk::tensor_data<const float>(in.window_queries);

    const std::vector<double> z = rkv_non_causal::non_causal_z_scores(
        Q, K, V, H, n_kv_heads, T, d, 0, T, chunk_, [this] { host_.throw_if_cancelled(); });
    for (size_t i = 0; i < z.size(); ++i) {
      const float s = static_cast<float>(z[i]);
      if (!std::isfinite(s))
        throw Error(RKV_ERROR_INVALID_ARGUMENT, "non_causal_attention: non-finite score at index " + std::to_string(i) +
                                                    " (non-finite keys, values or queries?)");
      scores[i] = s;
    }
  }

 private:
  int64_t chunk_, max_tokens_;
  rkv::sdk::Host host_;
  int64_t n_heads_ = 0, head_dim_ = 0;
};

}  // namespace

RKV_PLUGIN(NonCausalAttention)
