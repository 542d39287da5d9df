// Decode policy "periodic": kvpress DecodingPress (kvpress/presses/decoding_press.py: every compression_interval
// decoding steps the base press re-scores the cache with the hidden states buffered since the last compression and
// keeps target_size entries; the buffer is cleared after each compression). Here: every `interval` decoded tokens,
// each layer whose heads hold more than their target (compression.decode.target, 0: the head's budget b) is scored by
// the cell's scorer with decode-time statistics (abi/ripplekv/plugin.h, rkv_scorer_requirements "Decode-time
// scoring"), and each such head keeps its protected entries, then its top scores, up to the target
// (select_positions, the prefill's rule).
//
// Decode-time window attention, from the queries of the tokens decoded since the last compression (at most w, the
// scorer's window), each seeing the entries at or before its own position p_i:
//   W[q, j] = sum_i softmax_j( q_i . k_j / sqrt(d) ) over {j : pos_j <= p_i},   0 for the others
// (the entries appended after p_i are the only ones a past query did not see: between compressions nothing is
// evicted). A head that holds fewer entries than the layer's longest is padded with zero keys and values, which get
// zero statistics and whose scores are never used.
#include <algorithm>
#include <cmath>
#include <deque>
#include <numeric>

#include "cache/selection.hpp"
#include "core/errors.hpp"
#include "runner/compress/compress_prompt.hpp"
#include "runner/decode/sessions.hpp"

namespace rkv::decode {

namespace {

/// One decoded token's queries after RoPE in one layer, float32 [H, d], and its position.
struct BufferedQuery {
  int64_t position = 0;
  std::vector<float> q;
};

/// `kv` as a uniform [H_kv, n, d] layer, n = its longest head; shorter heads padded with zero rows.
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

/// W [H, n] of the file comment over the entries of `kv` (its own head lengths; `u` its padded copy, n columns).
std::vector<float> decode_window_attention(const LayerKV& kv, const LayerKV& u, const std::deque<BufferedQuery>& window,
                                           int64_t H) {
  const int64_t n = u.length, d = kv.head_dim, G = H / kv.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> W(static_cast<size_t>(H * n), 0.0f);
  std::vector<double> logit(static_cast<size_t>(n));
  for (const BufferedQuery& bq : window)
    for (int64_t q = 0; q < H; ++q) {
      const int64_t g = q / G, len = kv.head_length(g);
      const float* qv = bq.q.data() + q * d;
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < len; ++j) {
        if (*kv.pos_at(g, j) > bq.position) continue;
        double s = 0;
        for (int64_t e = 0; e < d; ++e) s += static_cast<double>(qv[e]) * kv.k_at(g, j)[e];
        logit[static_cast<size_t>(j)] = s * scale;
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

class PeriodicSession final : public DecodeSession {
 public:
  PeriodicSession(const DecodePolicy& policy, const ScorerUse& scorer, Backend& backend, const BackendCache& cache,
                  const std::vector<AttentionStats>* prompt_cumulative,
                  const std::vector<std::vector<int32_t>>* prompt_positions)
      : policy_(policy), scorer_(scorer), req_(scorer.requirements.for_decode()) {
    if (req_.wants(RKV_STAT_CUMULATIVE_ATTENTION))
      acc_ = std::make_unique<AccumulatedAttention>(backend, cache, prompt_cumulative, prompt_positions);
    window_.resize(static_cast<size_t>(cache.n_layers()));
  }

  ExtendCapture capture() const override { return policy_.capture(); }

  void after_token(Backend& backend, BackendCache& cache, const ExtendObservation& observed,
                   int64_t position) override {
    if (acc_) acc_->add(cache, observed);
    if (req_.wants(RKV_STAT_WINDOW_ATTENTION) || req_.wants(RKV_STAT_WINDOW_QUERIES)) buffer_queries(observed, position);
    if (++steps_ < policy_.spec().interval) return;
    steps_ = 0;
    for (int64_t l = 0; l < cache.n_layers(); ++l) compress_layer(backend, cache, l);
    for (auto& w : window_) w.clear();  // as DecodingPress: the buffer restarts after a compression
  }

 private:
  void buffer_queries(const ExtendObservation& observed, int64_t position) {
    if (observed.queries.size() != window_.size())
      throw InputError("decode policy periodic: the decode step observed no queries");
    for (size_t l = 0; l < window_.size(); ++l) {
      window_[l].push_back(BufferedQuery{position, observed.queries[l]});
      while (static_cast<int64_t>(window_[l].size()) > req_.window) window_[l].pop_front();
    }
  }

  int64_t target(int64_t l, int64_t h) const {
    return policy_.spec().target > 0 ? policy_.spec().target : policy_.head_budget(l, h);
  }

  void compress_layer(Backend& backend, BackendCache& cache, int64_t l) {
    const ModelConfig& c = backend.model().config;
    const int64_t Hkv = c.n_kv_heads, H = c.n_heads;
    bool over = false;
    for (int64_t h = 0; h < Hkv; ++h) over = over || cache.head_length(l, h) > target(l, h);
    if (!over) return;
    const LayerKV kv = backend.download_layer(cache, l);
    const LayerKV u = padded_uniform(kv);
    const int64_t n = u.length;
    const auto& window = window_[static_cast<size_t>(l)];
    AttentionStats stats;
    stats.n_heads = H;
    stats.prefix_tokens = n;
    stats.window = static_cast<int64_t>(window.size());
    if (req_.wants(RKV_STAT_WINDOW_ATTENTION)) stats.window_attention = decode_window_attention(kv, u, window, H);
    if (acc_) {
      stats.cumulative_attention.assign(static_cast<size_t>(H * n), 0.0f);
      for (int64_t q = 0; q < H; ++q) {
        const std::vector<double>& a = acc_->query_head(l, q);
        for (size_t j = 0; j < a.size(); ++j) stats.cumulative_attention[static_cast<size_t>(q * n) + j] = static_cast<float>(a[j]);
      }
    }
    std::vector<float> wq;
    if (req_.wants(RKV_STAT_WINDOW_QUERIES)) {  // [H, w, d]
      const int64_t w = static_cast<int64_t>(window.size()), d = c.head_dim;
      wq.resize(static_cast<size_t>(H * w * d));
      for (int64_t i = 0; i < w; ++i)
        for (int64_t q = 0; q < H; ++q)
          std::copy_n(window[static_cast<size_t>(i)].q.data() + q * d, d, wq.data() + (q * w + i) * d);
    }
    ScorerCallInputs in;
    in.layer = l;
    in.n_heads = H;
    in.kv = &u;
    in.prefix_tokens = n;
    in.stats = &stats;
    in.window_queries = req_.wants(RKV_STAT_WINDOW_QUERIES) ? &wq : nullptr;
    in.window = static_cast<int64_t>(window.size());
    in.rope_inv_freq = &backend.model().layer_inv_freq(l);
    const ScoreResult scores = run_scorer(*scorer_.instance, req_, in);
    KeepLists keep(static_cast<size_t>(Hkv));
    for (int64_t h = 0; h < Hkv; ++h) {
      const int64_t len = kv.head_length(h);
      auto& k = keep[static_cast<size_t>(h)];
      if (len <= target(l, h)) {
        k.resize(static_cast<size_t>(len));
        std::iota(k.begin(), k.end(), 0);
        continue;
      }
      const Selection sel = select_positions(scores.scores.data() + h * n, 1, len, target(l, h),
                                             req_.protected_spec(), l);
      k.assign(sel.positions.begin(), sel.positions.end());
    }
    keep_entries(backend, cache, l, keep);
    if (acc_) acc_->keep(l, keep);
  }

  const DecodePolicy& policy_;
  const ScorerUse& scorer_;
  ScorerRequirements req_;
  std::unique_ptr<AccumulatedAttention> acc_;
  std::vector<std::deque<BufferedQuery>> window_;  ///< [L] the queries decoded since the last compression (<= w)
  int64_t steps_ = 0;
};

}  // namespace

std::unique_ptr<DecodeSession> make_periodic_session(const DecodePolicy& policy, const ScorerUse& scorer,
                                                     Backend& backend, const BackendCache& cache,
                                                     const std::vector<AttentionStats>* prompt_cumulative,
                                                     const std::vector<std::vector<int32_t>>* prompt_positions) {
  return std::make_unique<PeriodicSession>(policy, scorer, backend, cache, prompt_cumulative, prompt_positions);
}

}  // namespace rkv::decode
