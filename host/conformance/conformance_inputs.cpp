#include "conformance/conformance_inputs.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "model/rope.hpp"
#include "model/synthetic_model.hpp"

namespace rkv::conformance {

const char* variant_name(Variant v) {
  return v == Variant::random ? "random" : v == Variant::tied ? "tied keys" : "peaked attention";
}

ScorerCallInputs Input::call() const {
  ScorerCallInputs in;
  in.layer = layer;
  in.n_heads = shape.H;
  in.kv = &kv;
  in.prefix_tokens = T;
  in.stats = has_stats ? &stats : nullptr;
  in.window_queries = has_window_queries ? &window_queries : nullptr;
  in.window = window;
  in.rope_inv_freq = &inv_freq;
  in.value_output_norms = value_output_norms.empty() ? nullptr : &value_output_norms;
  return in;
}

Input make_input(const Shape& s, int64_t T, Variant variant, int64_t layer, const ScorerRequirements& req,
                 uint64_t seed, int64_t decode_window) {
  Input in;
  in.shape = s;
  in.T = T;
  in.layer = layer;
  std::ostringstream label;
  label << "H " << s.H << " / H_kv " << s.Hkv << " / d " << s.d << ", T " << T << ", " << variant_name(variant)
        << ", layer " << layer;
  in.label = label.str();
  in.inv_freq = rope_inv_freq(s.d, 10000.0, RopeScaling{});

  SyntheticRng rng(seed);
  const float scale = variant == Variant::peaked ? 6.0f : 1.0f;
  std::vector<float> q = synthetic_uniform(rng, static_cast<size_t>(s.H * T * s.d), scale);
  LayerKV& kv = in.kv;
  kv.n_kv_heads = s.Hkv;
  kv.head_dim = s.d;
  kv.capacity = T + (variant == Variant::tied ? 3 : 0);
  kv.length = T;
  kv.k.assign(static_cast<size_t>(s.Hkv * kv.capacity * s.d), 0.0f);
  kv.v.assign(kv.k.size(), 0.0f);
  for (int64_t h = 0; h < s.Hkv; ++h) {
    const std::vector<float> shared = synthetic_uniform(rng, static_cast<size_t>(s.d), scale);
    for (int64_t j = 0; j < T; ++j)
      for (int64_t e = 0; e < s.d; ++e) {
        kv.k_at(h, j)[e] = variant == Variant::tied ? shared[static_cast<size_t>(e)] : scale * rng.next();
        kv.v_at(h, j)[e] = rng.next();
      }
  }

  if (req.wants(RKV_STAT_VALUE_OUTPUT_NORMS)) {  // n[h, j] = sum_c |sum_i W_o[c, h d + i] v[g(h), j, i]|, D = 16
    const int64_t D = 16, G = s.H / s.Hkv;
    const std::vector<float> wo = synthetic_uniform(rng, static_cast<size_t>(D * s.H * s.d), 1.0f);
    in.value_output_norms.assign(static_cast<size_t>(s.H * T), 0.0f);
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t j = 0; j < T; ++j) {
        double l1 = 0.0;
        for (int64_t c = 0; c < D; ++c) {
          double y = 0.0;
          for (int64_t e = 0; e < s.d; ++e)
            y += double(wo[static_cast<size_t>(c * s.H * s.d + h * s.d + e)]) * kv.v_at(h / G, j)[e];
          l1 += std::fabs(y);
        }
        in.value_output_norms[static_cast<size_t>(h * T + j)] = static_cast<float>(l1);
      }
  }
  // As ScoreMemo::scores (runner/compress/compress_prompt.cpp): the statistics come from the last `needed` queries.
  // Decode-time inputs (decode_window >= 1): the last decode_window entries are the decoded tokens, each query
  // seeing the entries up to its own (the causal prefix rule), which is how the host builds them between
  // compressions (runner/decode/periodic.cpp).
  AttentionStatsOptions opts = req.stats_options();
  if (decode_window >= 1) {
    opts.window = std::min(decode_window, T);
    in.window = opts.window;
  }
  const int64_t w = decode_window >= 1 ? opts.window : req.effective_window(T);
  in.has_stats = opts.window_attention || opts.cumulative_attention || opts.query_counts || opts.query_moments ||
                 opts.residual_cosine;
  in.has_window_queries = req.wants(RKV_STAT_WINDOW_QUERIES);
  if (in.has_stats || in.has_window_queries) {
    const int64_t needed = opts.cumulative_attention || opts.query_moments ? T : std::max<int64_t>(w, 1);
    std::vector<float> last(static_cast<size_t>(s.H * needed * s.d));
    for (int64_t h = 0; h < s.H; ++h)
      std::memcpy(last.data() + h * needed * s.d, q.data() + (h * T + (T - needed)) * s.d,
                  static_cast<size_t>(needed * s.d) * sizeof(float));
    const QueriesView qv{last.data(), s.H, needed, s.d};
    const KeysView kview{kv.k.data(), kv.n_kv_heads, T, kv.head_dim, kv.capacity * kv.head_dim};
    if (in.has_stats) in.stats = compute_attention_stats(qv, kview, opts);
    if (opts.query_moments)  // as the prefill: the queries (read as rotated at 0 .. T - 1) turned back first
      add_query_moments(QueriesView{unrotate_queries(qv, in.inv_freq).data(), s.H, T, s.d}, opts.query_skip, in.stats);
    if (in.has_window_queries) in.window_queries = window_queries(qv, w);
  }
  if (opts.residual_cosine) {  // as a prefill's residual_cosines: one cosine in [-1, 1] per position
    const std::vector<float> c = synthetic_uniform(rng, static_cast<size_t>(T), 1.0f);
    in.stats.residual_cosine = variant == Variant::tied ? std::vector<float>(static_cast<size_t>(T), 0.5f) : c;
  }
  return in;
}

rkv_attention_shape attention_shape_of(const Shape& s) {
  return rkv_attention_shape{sizeof(rkv_attention_shape), kLayers, s.H, s.Hkv, s.d};
}

}  // namespace rkv::conformance
