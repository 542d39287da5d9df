#include "runner/compress/held_scoring.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "cache/selection.hpp"
#include "core/errors.hpp"

namespace rkv {

LayerKV padded_uniform(const LayerKV& kv) {
  if (!kv.per_head()) return kv;
  LayerKV u;
  u.n_kv_heads = kv.n_kv_heads;
  u.head_dim = kv.head_dim;
  u.length = u.capacity = kv.length;
  const int64_t d = kv.head_dim;
  u.k.assign(static_cast<size_t>(kv.n_kv_heads * kv.length * d), 0.0f);
  u.v.assign(u.k.size(), 0.0f);
  u.pos.assign(static_cast<size_t>(kv.n_kv_heads * kv.length), -1);
  for (int64_t h = 0; h < kv.n_kv_heads; ++h) {
    const int64_t n = kv.head_length(h);
    std::copy(kv.k_at(h, 0), kv.k_at(h, 0) + n * d, u.k_at(h, 0));
    std::copy(kv.v_at(h, 0), kv.v_at(h, 0) + n * d, u.v_at(h, 0));
    if (kv.has_positions()) std::copy(kv.pos_at(h, 0), kv.pos_at(h, 0) + n, u.pos_at(h, 0));
  }
  return u;
}

std::vector<float> held_window_attention(const LayerKV& kv, const std::deque<HeldQuery>& window, int64_t H,
                                         float scale, float softcap) {
  const int64_t n = kv.length, d = kv.head_dim, G = H / kv.n_kv_heads;
  std::vector<float> W(static_cast<size_t>(H * n), 0.0f);
  std::vector<double> logit(static_cast<size_t>(n));
  for (const HeldQuery& bq : window)
    for (int64_t q = 0; q < H; ++q) {
      const int64_t g = q / G, len = kv.head_length(g);
      const float* qv = bq.q.data() + q * d;
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < len; ++j) {
        if (*kv.pos_at(g, j) > bq.position) continue;
        double s = 0;
        for (int64_t e = 0; e < d; ++e) s += static_cast<double>(qv[e]) * kv.k_at(g, j)[e];
        const double x = s * scale;
        logit[static_cast<size_t>(j)] = softcap > 0.0f ? softcap * std::tanh(x / softcap) : x;  // gemma2's cap
        mx = std::max(mx, logit[static_cast<size_t>(j)]);
      }
      for (int64_t j = 0; j < len; ++j)
        if (*kv.pos_at(g, j) <= bq.position) sum += std::exp(logit[static_cast<size_t>(j)] - mx);
      for (int64_t j = 0; j < len; ++j)
        if (*kv.pos_at(g, j) <= bq.position)
          W[static_cast<size_t>(q * n + j)] += static_cast<float>(std::exp(logit[static_cast<size_t>(j)] - mx) / sum);
    }
  return W;
}

KeepLists evict_held_layer(Backend& backend, BackendCache& cache, int64_t l, const ScorerUse& scorer,
                           const ScorerRequirements& req, const std::deque<HeldQuery>& all_queries,
                           AccumulatedAttention* acc, const std::function<int64_t(int64_t head)>& target) {
  const ModelConfig& c = backend.model().config;
  const int64_t Hkv = c.n_kv_heads, H = c.n_heads;
  const LayerKV kv = backend.download_layer(cache, l);
  const LayerKV u = padded_uniform(kv);
  const int64_t n = u.length;
  std::deque<HeldQuery> window;  // the last w queries
  const size_t w = static_cast<size_t>(std::max<int64_t>(req.window, 0));
  for (size_t i = all_queries.size() > w ? all_queries.size() - w : 0; i < all_queries.size(); ++i)
    window.push_back(all_queries[i]);
  AttentionStats stats;
  stats.n_heads = H;
  stats.prefix_tokens = n;
  stats.window = static_cast<int64_t>(window.size());
  if (req.wants(RKV_STAT_WINDOW_ATTENTION)) stats.window_attention = held_window_attention(kv, window, H, c.attention_scale(), c.attn_logit_softcap);
  if (req.wants(RKV_STAT_CUMULATIVE_ATTENTION)) {
    if (!acc) throw InputError("scorer " + scorer.key + ": held-entry scoring needs the accumulated attention");
    stats.cumulative_attention.assign(static_cast<size_t>(H * n), 0.0f);
    for (int64_t q = 0; q < H; ++q) {
      const std::vector<double>& a = acc->query_head(l, q);
      for (size_t j = 0; j < a.size(); ++j) stats.cumulative_attention[static_cast<size_t>(q * n) + j] = static_cast<float>(a[j]);
    }
  }
  std::vector<float> wq;
  if (req.wants(RKV_STAT_WINDOW_QUERIES)) {  // [H, w, d]
    const int64_t nw = static_cast<int64_t>(window.size()), d = c.head_dim;
    wq.resize(static_cast<size_t>(H * nw * d));
    for (int64_t i = 0; i < nw; ++i)
      for (int64_t q = 0; q < H; ++q)
        std::copy_n(window[static_cast<size_t>(i)].q.data() + q * d, d, wq.data() + (q * nw + i) * d);
  }
  ScorerCallInputs in;
  in.layer = l;
  in.n_heads = H;
  in.kv = &u;
  in.prefix_tokens = n;
  in.stats = &stats;
  in.window_queries = req.wants(RKV_STAT_WINDOW_QUERIES) ? &wq : nullptr;
  in.window = static_cast<int64_t>(window.size());
  in.rope_inv_freq = &backend.model().layer_inv_freq(l);
  const ScoreResult scores = run_scorer(*scorer.instance, req, in);
  KeepLists keep(static_cast<size_t>(Hkv));
  for (int64_t h = 0; h < Hkv; ++h) {
    const int64_t len = kv.head_length(h);
    auto& k = keep[static_cast<size_t>(h)];
    if (len <= target(h)) {
      k.resize(static_cast<size_t>(len));
      std::iota(k.begin(), k.end(), int64_t{0});
      continue;
    }
    const Selection sel = select_positions(scores.scores.data() + h * n, 1, len, target(h), req.protected_spec(), l);
    k.assign(sel.positions.begin(), sel.positions.end());
  }
  keep_entries(backend, cache, l, keep);
  if (acc) acc->keep(l, keep);
  return keep;
}

}  // namespace rkv
