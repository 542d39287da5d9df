#include "runner/compress/chunked_prefill.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <deque>

#include "core/errors.hpp"
#include "core/timing.hpp"
#include "runner/compress/held_scoring.hpp"

namespace rkv {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

/// The last `keep` query rows of one layer as the chunks pass: per position float32 [H, d] after RoPE.
class QueryTail {
 public:
  explicit QueryTail(int64_t keep = 0) : keep_(keep) {}

  /// Adds the rows of a chunk's queries q [H, n, d] (positions first .. first + n - 1).
  void add(const float* q, int64_t H, int64_t n, int64_t d, int64_t first) {
    for (int64_t i = std::max<int64_t>(0, n - keep_); i < n; ++i) {
      std::vector<float> row(static_cast<size_t>(H * d));
      for (int64_t h = 0; h < H; ++h) std::copy_n(q + (h * n + i) * d, d, row.data() + h * d);
      rows_.push_back(std::move(row));
      positions_.push_back(first + i);
    }
    while (static_cast<int64_t>(rows_.size()) > keep_) {
      rows_.pop_front();
      positions_.pop_front();
    }
  }

  int64_t size() const { return static_cast<int64_t>(rows_.size()); }
  /// Query head h of the i-th of the last w rows, float32 [d].
  const float* row(int64_t w, int64_t i, int64_t h, int64_t d) const {
    return rows_[static_cast<size_t>(size() - w + i)].data() + h * d;
  }
  int64_t position(int64_t w, int64_t i) const { return positions_[static_cast<size_t>(size() - w + i)]; }

  /// The last w rows as float32 [H, w, d] (PrefilledPrompt::queries' layout).
  std::vector<float> as_hnd(int64_t w, int64_t H, int64_t d) const {
    std::vector<float> out(static_cast<size_t>(H * w * d));
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < w; ++i) std::copy_n(row(w, i, h, d), d, out.data() + (h * w + i) * d);
    return out;
  }

 private:
  int64_t keep_;
  std::deque<std::vector<float>> rows_;
  std::deque<int64_t> positions_;
};

/// Window attention W [H, T] (cache/attention_stats.hpp) from the last w rows of `tail` over the T keys of `kv`
/// (uniform, entry j at position j): row i at position p sees j <= p and, on a sliding layer of window W, j > p - W;
/// softmax of cap(scale * q.k) in fp32 (cap: the model's score soft-cap `softcap`, none when 0), max-subtracted, as
/// the forward's. One sgemm per query head.
std::vector<float> window_attention_of(const LayerKV& kv, const QueryTail& tail, int64_t w, int64_t H, float scale,
                                       float softcap, int64_t window) {
  const int64_t T = kv.length, d = kv.head_dim, G = H / kv.n_kv_heads;
  std::vector<float> out(static_cast<size_t>(H * T), 0.0f), q(static_cast<size_t>(w * d)), s(static_cast<size_t>(w * T));
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t i = 0; i < w; ++i) std::copy_n(tail.row(w, i, h, d), d, q.data() + i * d);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(w), static_cast<int>(T), static_cast<int>(d),
                scale, q.data(), static_cast<int>(d), kv.k_at(h / G, 0), static_cast<int>(d), 0.0f, s.data(),
                static_cast<int>(T));
    for (int64_t i = 0; i < w; ++i) {
      const int64_t p = tail.position(w, i), lo = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
      float* row = s.data() + i * T;
      if (softcap > 0.0f)
        for (int64_t j = lo; j <= p; ++j) row[j] = softcap_score(row[j], softcap);
      float mx = -INFINITY;
      for (int64_t j = lo; j <= p; ++j) mx = std::max(mx, row[j]);
      float sum = 0.0f;
      for (int64_t j = lo; j <= p; ++j) sum += std::exp(row[j] - mx);
      for (int64_t j = lo; j <= p; ++j) out[static_cast<size_t>(h * T + j)] += std::exp(row[j] - mx) / sum;
    }
  }
  return out;
}

/// Adds one chunk's attention mass (ExtendObservation::attention_mass of a uniform layer of `len` entries: [H, len],
/// KV head g's G query heads one after the other) into the sums [H, T].
void add_mass(const std::vector<float>& mass, int64_t H, int64_t len, int64_t T, std::vector<double>& sums) {
  if (static_cast<int64_t>(mass.size()) != H * len)
    throw InputError("chunked prefill: the attention mass has " + str(static_cast<int64_t>(mass.size())) +
                     " values, expected " + str(H * len));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t j = 0; j < len; ++j) sums[static_cast<size_t>(h * T + j)] += mass[static_cast<size_t>(h * len + j)];
}

/// The statistics of request `o` for one layer from what the chunks left: window attention from the query tail, the
/// cumulative sums, the query counts (T - j, at most W on a sliding layer), the merged query moments.
AttentionStats layer_stats(const AttentionStatsOptions& o, const LayerKV* kv, const QueryTail& tail,
                           const std::vector<double>* cumulative, const QueryMomentsAccumulator* moments, int64_t H,
                           int64_t T, float scale, float softcap, int64_t window) {
  AttentionStats st;
  st.n_heads = H;
  st.prefix_tokens = T;
  if (o.window_attention) {
    st.window = std::min(o.window, T);
    st.window_attention = window_attention_of(*kv, tail, st.window, H, scale, softcap, window);
  }
  if (o.cumulative_attention) st.cumulative_attention.assign(cumulative->begin(), cumulative->end());
  if (o.query_counts) {
    st.query_counts.resize(static_cast<size_t>(T));
    for (int64_t j = 0; j < T; ++j)  // a sliding layer's key j is seen by the queries j .. j + W - 1 only
      st.query_counts[static_cast<size_t>(j)] = static_cast<float>(window > 0 ? std::min(T - j, window) : T - j);
  }
  if (o.query_moments) moments->finish(st);
  return st;
}

/// The tokens of positions first .. first + n - 1.
std::vector<int32_t> chunk_of(const std::vector<int32_t>& tokens, int64_t first, int64_t n) {
  return std::vector<int32_t>(tokens.begin() + first, tokens.begin() + first + n);
}

/// The first chunk, positions 0 .. n0 - 1, through Backend::prefill into a fresh cache: with all its queries when
/// `queries`, its cumulative attention (request 0) when `cumulative`, and the logits when it is the whole prompt.
PrefillResult prefill_first_chunk(Backend& backend, const std::vector<int32_t>& tokens, int64_t n0, bool cumulative,
                                  bool queries) {
  PrefillRequest first;
  first.logits = n0 == static_cast<int64_t>(tokens.size()) ? LogitsFor::Last : LogitsFor::None;
  first.keep_queries = queries ? n0 : 0;
  if (cumulative) {
    AttentionStatsOptions o;
    o.cumulative_attention = true;
    first.stats.push_back(o);
  }
  PrefillResult r = backend.prefill(chunk_of(tokens, 0, n0), first);
  backend.model().check_unchanged("prefilling the first chunk");  // weights read in place may have changed meanwhile
  return r;
}

/// Chunk (s, n) through Backend::extend on `cache`, observing its attention mass and queries into `seen` when asked;
/// the logits after the prompt's last position when the chunk ends the prompt, else none.
std::vector<float> extend_chunk(Backend& backend, BackendCache& cache, const std::vector<int32_t>& tokens, int64_t s,
                                int64_t n, bool cumulative, bool queries, ExtendObservation& seen) {
  ExtendCapture capture;
  capture.attention_mass = cumulative;
  capture.queries = queries;
  const bool last = s + n == static_cast<int64_t>(tokens.size());
  std::vector<float> logits = backend.extend(cache, chunk_of(tokens, s, n), s, last ? LogitsFor::Last : LogitsFor::None,
                                             capture, cumulative || queries ? &seen : nullptr);
  backend.model().check_unchanged("prefilling a chunk");  // weights read in place may have changed meanwhile
  return logits;
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> chunk_bounds(int64_t T, int64_t C) {
  if (T < 1 || C < 1) throw InputError("chunked prefill: " + str(T) + " tokens in chunks of " + str(C));
  const int64_t n = (T + C - 1) / C, base = T / n, longer = T % n;
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t k = 0, first = 0; k < n; ++k) {
    const int64_t len = base + (k < longer ? 1 : 0);
    out.emplace_back(first, len);
    first += len;
  }
  return out;
}

PrefilledPrompt chunked_prefill_prompt(Backend& backend, const std::vector<int32_t>& tokens, const PrefillNeeds& needs,
                                       int64_t C) {
  if (tokens.empty()) throw InputError("prefill: empty prompt");
  if (C < 0) throw InputError("prefill.chunk_tokens must be >= 0, got " + str(C));
  const int64_t T = static_cast<int64_t>(tokens.size());
  if (C == 0 || C >= T) return prefill_prompt(backend, tokens, needs);
  for (const AttentionStatsOptions& o : needs.stats)
    if (o.residual_cosine)
      throw InputError("prefill.chunk_tokens = " + str(C) + ": the residual cosine (RKV_STAT_RESIDUAL_COSINE, e.g. the "
                       "squeezeattention signal) is captured by a one-shot prefill only; set prefill.chunk_tokens = 0");
  const auto t0 = SteadyClock::now();
  const ModelConfig& mc = backend.model().config;
  const int64_t L = mc.n_layers, H = mc.n_heads, d = mc.head_dim;
  // What the chunks must leave behind: the last queries, the cumulative sums, the query moments.
  bool cumulative = false;
  int64_t keep = needs.keep_queries;
  std::vector<std::vector<QueryMomentsAccumulator>> moments(needs.stats.size());
  for (size_t k = 0; k < needs.stats.size(); ++k) {
    const AttentionStatsOptions& o = needs.stats[k];
    cumulative = cumulative || o.cumulative_attention;
    if (o.window_attention) keep = std::max(keep, o.window);
    if (o.query_moments) moments[k].assign(static_cast<size_t>(L), QueryMomentsAccumulator(H, d, o.query_skip));
  }
  keep = std::min(keep, T);
  const bool want_queries = keep > 0 || std::any_of(moments.begin(), moments.end(), [](auto& m) { return !m.empty(); });
  std::vector<QueryTail> tails(static_cast<size_t>(L), QueryTail(keep));
  std::vector<std::vector<double>> sums(cumulative ? static_cast<size_t>(L) : 0, std::vector<double>(static_cast<size_t>(H * T)));
  auto take_queries = [&](const std::vector<std::vector<float>>& q, int64_t first, int64_t n) {
    for (int64_t l = 0; l < L; ++l) {
      const float* ql = q[static_cast<size_t>(l)].data();
      tails[static_cast<size_t>(l)].add(ql, H, n, d, first);
      for (auto& per_layer : moments) {
        if (per_layer.empty()) continue;
        const std::vector<float> pre = unrotate_queries_from(QueriesView{ql, H, n, d}, backend.model().layer_inv_freq(l), first);
        per_layer[static_cast<size_t>(l)].add(QueriesView{pre.data(), H, n, d}, first);
      }
    }
  };

  const std::vector<std::pair<int64_t, int64_t>> chunks = chunk_bounds(T, C);
  const int64_t n0 = chunks[0].second;
  PrefillResult r = prefill_first_chunk(backend, tokens, n0, cumulative, want_queries);
  std::unique_ptr<BackendCache> cache = std::move(r.cache);
  backend.reserve(*cache, T - n0);  // the whole prompt once, exactly as the one-shot prefill holds it
  if (cumulative)
    for (int64_t l = 0; l < L; ++l) add_mass(r.stats[0][static_cast<size_t>(l)].cumulative_attention, H, n0, T, sums[static_cast<size_t>(l)]);
  if (want_queries) take_queries(r.queries, 0, n0);
  std::vector<float> logits;
  for (size_t k = 1; k < chunks.size(); ++k) {
    const auto [s, n] = chunks[k];
    ExtendObservation seen;
    logits = extend_chunk(backend, *cache, tokens, s, n, cumulative, want_queries, seen);
    if (cumulative)
      for (int64_t l = 0; l < L; ++l) add_mass(seen.attention_mass[static_cast<size_t>(l)], H, s + n, T, sums[static_cast<size_t>(l)]);
    if (want_queries) take_queries(seen.queries, s, n);
  }

  PrefilledPrompt p;
  p.tokens = tokens;
  p.n_queries = std::min(needs.keep_queries, T);
  if (p.n_queries > 0)
    for (const QueryTail& t : tails) p.queries.push_back(t.as_hnd(p.n_queries, H, d));
  p.stats_options = needs.stats;
  p.stats.assign(needs.stats.size(), std::vector<AttentionStats>(static_cast<size_t>(L)));
  const bool window_stats = std::any_of(needs.stats.begin(), needs.stats.end(), [](auto& o) { return o.window_attention; });
  for (int64_t l = 0; l < L; ++l) {
    LayerKV kv;
    if (window_stats) kv = backend.download_layer(*cache, l);
    std::vector<double>* cum = cumulative ? &sums[static_cast<size_t>(l)] : nullptr;
    for (size_t k = 0; k < needs.stats.size(); ++k)
      p.stats[k][static_cast<size_t>(l)] =
          layer_stats(needs.stats[k], &kv, tails[static_cast<size_t>(l)], cum,
                      moments[k].empty() ? nullptr : &moments[k][static_cast<size_t>(l)], H, T, mc.attention_scale(),
                      mc.attn_logit_softcap, mc.layer_window(l));
  }
  p.cache = std::move(cache);
  p.last_logits = std::move(logits);
  p.seconds = seconds_since(t0);
  return p;
}

namespace {

/// Drops from sliding-window layer `l` every entry no query after `last_position` can see (position <= last - W),
/// telling `acc` (when given) which entries stay. A global layer is left alone.
void cut_to_window(Backend& backend, BackendCache& cache, int64_t l, int64_t last_position, AccumulatedAttention* acc) {
  const int64_t W = backend.model().config.layer_window(l);
  if (W <= 0) return;
  const std::vector<int32_t> pos = backend.layer_positions(cache, l);
  KeepLists keep(static_cast<size_t>(backend.model().config.n_kv_heads));
  bool drops = false;
  size_t at = 0;
  for (size_t h = 0; h < keep.size(); ++h) {
    const int64_t len = cache.head_length(l, static_cast<int64_t>(h));
    for (int64_t j = 0; j < len; ++j, ++at) {
      if (last_position - pos[at] < W) keep[h].push_back(j);
      else drops = true;
    }
  }
  if (!drops) return;
  keep_entries(backend, cache, l, keep);
  if (acc) acc->keep(l, keep);
}

}  // namespace

ChunkedCompression prefill_compressing_chunks(Backend& backend, const std::vector<int32_t>& tokens, int64_t C,
                                              const LayerScorers& scorers, const std::vector<int64_t>& layers,
                                              const std::vector<int64_t>& budgets, bool trace_positions) {
  if (tokens.empty()) throw InputError("prefill: empty prompt");
  if (C < 1) throw InputError("prefill.chunk_tokens must be >= 1 to compress between chunks, got " + str(C));
  if (layers.size() != budgets.size())
    throw InputError("chunked prefill: " + str(static_cast<int64_t>(layers.size())) + " layers but " +
                     str(static_cast<int64_t>(budgets.size())) + " budgets");
  const auto t0 = SteadyClock::now();
  const ModelConfig& mc = backend.model().config;
  const int64_t T = static_cast<int64_t>(tokens.size()), L = mc.n_layers, H = mc.n_heads, d = mc.head_dim;
  ChunkedCompression out;
  for (int64_t l = 0; l < L; ++l) out.comp.budgets.push_back(mc.layer_span(l, T));
  // Per layer: its target b_l (-1: kept whole) and its scorer's decode-time requirements.
  std::vector<int64_t> target(static_cast<size_t>(L), -1);
  std::vector<ScorerRequirements> req(static_cast<size_t>(L));
  bool cumulative = false, want_queries = false;
  for (size_t a = 0; a < layers.size(); ++a) {
    const int64_t l = layers[a], span = mc.layer_span(l, T);
    out.comp.budgets[static_cast<size_t>(l)] = std::min(budgets[a], span);
    if (budgets[a] >= span) continue;
    const ScorerUse& scorer = scorers.at(l);
    if (!scorer.requirements.decode_scoring)
      throw InputError("prefill.compress_between_chunks: scorer " + scorer.key + " of layer " + str(l) +
                       " cannot score a chunk (it does not declare decode_scoring)");
    target[static_cast<size_t>(l)] = budgets[a];
    req[static_cast<size_t>(l)] = scorer.requirements.for_decode();
    cumulative = cumulative || req[static_cast<size_t>(l)].wants(RKV_STAT_CUMULATIVE_ATTENTION);
    want_queries = want_queries || req[static_cast<size_t>(l)].wants(RKV_STAT_WINDOW_ATTENTION) ||
                   req[static_cast<size_t>(l)].wants(RKV_STAT_WINDOW_QUERIES);
  }
  std::vector<std::deque<HeldQuery>> window(static_cast<size_t>(L));  // each layer's last w queries of the chunk
  auto take_queries = [&](const std::vector<std::vector<float>>& q, int64_t first, int64_t n) {
    for (int64_t l = 0; l < L; ++l) {
      auto& win = window[static_cast<size_t>(l)];
      win.clear();
      if (target[static_cast<size_t>(l)] < 0) continue;
      const float* ql = q[static_cast<size_t>(l)].data();
      for (int64_t i = std::max<int64_t>(0, n - req[static_cast<size_t>(l)].window); i < n; ++i) {
        HeldQuery hq{first + i, std::vector<float>(static_cast<size_t>(H * d))};
        for (int64_t h = 0; h < H; ++h) std::copy_n(ql + (h * n + i) * d, d, hq.q.data() + h * d);
        win.push_back(std::move(hq));
      }
    }
  };
  std::unique_ptr<BackendCache> cache;
  std::unique_ptr<AccumulatedAttention> acc;
  auto compress_chunk = [&](int64_t first, int64_t n) {
    ChunkTrace t;
    t.first_position = first;
    t.tokens = n;
    for (int64_t l = 0; l < L; ++l) t.held_after_append.push_back(cache->length(l));
    for (int64_t l = 0; l < L; ++l) {
      cut_to_window(backend, *cache, l, first + n - 1, acc.get());
      const int64_t b = target[static_cast<size_t>(l)];
      if (b < 0 || cache->length(l) <= b) continue;
      evict_held_layer(backend, *cache, l, scorers.at(l), req[static_cast<size_t>(l)], window[static_cast<size_t>(l)],
                       acc.get(), [b](int64_t) { return b; });
    }
    for (int64_t l = 0; l < L; ++l) {
      t.held_after_compression.push_back(cache->length(l));
      if (!trace_positions) continue;
      const std::vector<int32_t> pos = backend.layer_positions(*cache, l);
      t.positions.emplace_back(pos.begin(), pos.begin() + cache->head_length(l, 0));
    }
    out.chunks.push_back(std::move(t));
  };

  const std::vector<std::pair<int64_t, int64_t>> chunks = chunk_bounds(T, C);
  const int64_t n0 = chunks[0].second;
  PrefillResult r = prefill_first_chunk(backend, tokens, n0, cumulative, want_queries);
  cache = std::move(r.cache);
  if (cumulative) acc = std::make_unique<AccumulatedAttention>(backend, *cache, &r.stats[0], nullptr);
  if (want_queries) take_queries(r.queries, 0, n0);
  std::vector<float> logits = std::move(r.logits);
  compress_chunk(0, n0);
  for (size_t k = 1; k < chunks.size(); ++k) {
    const auto [s, n] = chunks[k];
    ExtendObservation seen;
    logits = extend_chunk(backend, *cache, tokens, s, n, cumulative, want_queries, seen);
    if (acc) acc->add(*cache, seen);
    if (want_queries) take_queries(seen.queries, s, n);
    compress_chunk(s, n);
  }
  out.last_logits = std::move(logits);
  out.comp.bytes_kept = cache->bytes();
  out.comp.next_position = T;
  out.comp.cache = std::move(cache);
  out.comp.seconds = seconds_since(t0);
  return out;
}

}  // namespace rkv
