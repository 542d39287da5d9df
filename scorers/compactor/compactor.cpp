// Compactor scorer: sketched leverage of the pre-RoPE keys blended with non-causal chunked attention.
//
// Source: kvpress 0.5.5, kvpress/presses/compactor_press.py (CompactorPress); Chari & Van Durme, "Compactor:
// Calibrated Query-Agnostic KV Cache Compression with Approximate Leverage Scores" (2025, arXiv 2507.08143). With
// a = min(sink_size_start, T) leading and b = min(sink_size_end, T - a) trailing positions protected, on the n = T - a
// - b positions in between (both parts see only those positions, the chunks starting at position a):
//
//   l[g, j]  = leverage z-scores of the pre-RoPE keys (../leverage/leverage_scores.hpp; kvpress LeverageScorePress)
//   c[g, j]  = non-causal chunked attention z-scores (../non_causal_attention/non_causal_scores.hpp; NonCausalAttnPress)
//   s[g, j]  = blending l[g, j] + c[g, j]
//   s[g, j]  = max over the layer's blended scores,  j < a or j >= T - b   (kvpress's padding; also protected here)
//
// Needs the post-RoPE queries of every prompt position (RKV_STAT_WINDOW_QUERIES over `max_tokens`, as
// non_causal_attention) and the pre-RoPE keys (RKV_STAT_PRE_ROPE_KEYS). Prefill only.
// Conventions: (1) kvpress's blending defaults to its compression_ratio (the share removed), which a ripplekv scorer
// is not told (the budget is applied after scoring): here `blending` is a param (default 0.35, kvpress's fallback);
// blending = 1 - budget.fraction reproduces kvpress's default at that budget. (2) The sketch is a function of `seed`
// (torch.randn after torch.manual_seed(seed)), as in the leverage scorer. Checked against kvpress on
// tests/fixtures/kvpress.
#include <ripplekv/sdk.hpp>

#include <algorithm>
#include <cmath>
#include <exception>
#include <string>
#include <vector>

#include "../leverage/leverage_scores.hpp"
#include "../non_causal_attention/non_causal_scores.hpp"

namespace {

using rkv::sdk::Error;
using rkv::sdk::Param;

class Compactor final : public rkv::sdk::Scorer {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.scorer.compactor", RKV_KIND_SCORER, "1.0.0",
                                "Compactor: blending x leverage of pre-RoPE keys + non-causal chunked attention")
        .param(Param::Int("sink_size_start", 8, "leading positions protected").min(0).max(1 << 20))
        .param(Param::Int("sink_size_end", 4, "trailing positions protected").min(0).max(1 << 20))
        .param(Param::Int("chunk_size", 256, "chunk length c in positions of the non-causal attention").min(1).max(1 << 16))
        .param(Param::Int("sketch_dimension", 48,
                          "k, columns of the Gaussian sketch Phi [d, k]; at most 256 (the Cholesky of the [k, k] Gram "
                          "matrix costs O(k^3) per KV head and layer)")
                   .min(1)
                   .max(256))
        .param(Param::Float("blending", 0.35,
                            "weight of the leverage z-scores (kvpress's default: its compression_ratio = 1 - fraction)")
                   .min(0.0)
                   .max(1e6))
        .param(Param::Int("seed", 0, "sketch seed: Phi is torch.randn after torch.manual_seed(seed) (low 32 bits)")
                   .min(0)
                   .max(4294967295.0))
        .param(Param::Bool("per_layer", false, "false: every layer uses the same sketch; true: layer l uses seed + l"))
        .param(Param::Int("max_tokens", 8192,
                          "longest prompt scored, in tokens: the queries of this many last positions are requested")
                   .min(1)
                   .max(1 << 20));
  }

  Compactor(const rkv::sdk::Params& p, const rkv::sdk::Host& host)
      : start_(p.get_int("sink_size_start")),
        end_(p.get_int("sink_size_end")),
        chunk_(p.get_int("chunk_size")),
        k_(p.get_int("sketch_dimension")),
        blending_(p.get_float("blending")),
        seed_(static_cast<uint32_t>(p.get_int("seed"))),
        per_layer_(p.get_bool("per_layer")),
        max_tokens_(p.get_int("max_tokens")),
        host_(host) {}

  rkv_scorer_requirements requirements(const rkv_attention_shape& shape) override {
    if (shape.n_heads < 1 || shape.n_kv_heads < 1 || shape.n_heads % shape.n_kv_heads != 0)
      throw Error(RKV_ERROR_INVALID_ARGUMENT, "compactor: n_heads must be a positive multiple of n_kv_heads");
    n_heads_ = shape.n_heads;
    head_dim_ = shape.head_dim;
    rkv_scorer_requirements r{};
    r.stats = RKV_STAT_KEYS | RKV_STAT_VALUES | RKV_STAT_WINDOW_QUERIES | RKV_STAT_PRE_ROPE_KEYS;
    r.window = max_tokens_;
    r.sinks = start_;
    r.recent = end_;
    return r;
  }

  /// scores [H_kv, T] float32 from keys, values, pre_rope_keys float32 [H_kv, T, d] and window_queries float32
  /// [H, T, d] (all prompt queries; CPU, borrowed). Throws Error(UNSUPPORTED) on a host before ABI minor 4,
  /// Error(INVALID_ARGUMENT) for a prompt longer than max_tokens, misshaped inputs or non-finite scores,
  /// Error(CANCELLED) when the host asks to stop. Thread rule: never called concurrently on one instance.
  void score(const rkv_scorer_inputs& in, float* scores, int64_t n_kv_heads, int64_t T,
             rkv::sdk::Diagnostics&) override {
    if (n_heads_ < 1) throw Error(RKV_ERROR_INVALID_ARGUMENT, "compactor: score() before requirements()");
    const int64_t d = head_dim_, H = n_heads_;
    if (T > max_tokens_)
      throw Error(RKV_ERROR_INVALID_ARGUMENT, "compactor: a prompt of " + std::to_string(T) +
                                                  " tokens is longer than max_tokens = " + std::to_string(max_tokens_) +
                                                  " (raise [scorer.compactor] max_tokens)");
    if (in.window != T)
      throw Error(RKV_ERROR_INVALID_ARGUMENT, "compactor: needs the queries of all T = " + std::to_string(T) +
                                                  " prompt positions, got " + std::to_string(in.window) +
                                                  " (prefill only)");
    if (!RKV_HAS_FIELD(&in, rkv_scorer_inputs, pre_rope_keys))
      throw Error(RKV_ERROR_UNSUPPORTED, "compactor: this host passes no pre-RoPE keys (needs plugin ABI 1.4)");
    rkv::sdk::require_tensor(in.keys, "keys", kDLFloat, 32, {n_kv_heads, T, d});
    rkv::sdk::require_tensor(in.values, "values", kDLFloat, 32, {n_kv_heads, T, d});
    rkv::sdk::require_tensor(in.pre_rope_keys, "pre_rope_keys", kDLFloat, 32, {n_kv_heads, T, d});
    rkv::sdk::require_tensor(in.window_queries, "window_queries", kDLFloat, 32, {H, T, d});
    const int64_t a = std::min(start_, T), b = std::min(end_, T - a), n = T - a - b;
    if (n == 0) {  // every position is protected
      std::fill(scores, scores + n_kv_heads * T, 0.0f);
      return;
    }
    const uint32_t seed = per_layer_ ? static_cast<uint32_t>(seed_ + static_cast<uint64_t>(in.layer)) : seed_;
    std::vector<double> lev;
    try {
      lev = rkv_leverage::leverage_z_scores(rkv::sdk::tensor_data<const float>(in.pre_rope_keys), n_kv_heads, T, d, a,
                                            n, rkv_leverage::gaussian_sketch(seed, n_kv_heads, d, k_), k_);
    } catch (const std::runtime_error& e) {
      throw Error(RKV_ERROR_INVALID_ARGUMENT, std::string("compactor: leverage: ") + e.what());
    }
    const std::vector<double> att = rkv_non_causal::non_causal_z_scores(
        rkv::sdk::tensor_data<const float>(in.window_queries), rkv::sdk::tensor_data<const float>(in.keys),
        rkv::sdk::tensor_data<const float>(in.values), H, n_kv_heads, T, d, a, n, chunk_,
        [this] { host_.throw_if_cancelled(); });
    double top = -INFINITY;
    for (size_t i = 0; i < lev.size(); ++i) top = std::max(top, blending_ * lev[i] + att[i]);
    for (int64_t g = 0; g < n_kv_heads; ++g)
      for (int64_t j = 0; j < T; ++j) {
        const bool inside = j >= a && j < a + n;
        const size_t i = static_cast<size_t>(g * n + j - a);
        const float s = static_cast<float>(inside ? blending_ * lev[i] + att[i] : top);
        if (!std::isfinite(s))
          throw Error(RKV_ERROR_INVALID_ARGUMENT, "compactor: non-finite score at KV head " + std::to_string(g) +
                                                      ", position " + std::to_string(j) +
                                                      " (non-finite keys, values or queries?)");
        scores[g * T + j] = s;
      }
  }

 private:
  int64_t start_, end_, chunk_, k_;
  double blending_;
  uint32_t seed_;
  bool per_layer_;
  int64_t max_tokens_;
  rkv::sdk::Host host_;
  int64_t n_heads_ = 0, head_dim_ = 0;
};

}  // namespace

RKV_PLUGIN(Compactor)
