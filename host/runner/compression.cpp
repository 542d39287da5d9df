#include "runner/compression.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "backend/cpu/sampling.hpp"
#include "cache/layer_compression.hpp"
#include "core/errors.hpp"

namespace rkv {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

PrefilledPrompt prefill_prompt(const Model& model, const std::vector<int32_t>& tokens, int64_t keep_queries,
                               cpu::Workspace& ws) {
  const auto t0 = std::chrono::steady_clock::now();
  const ModelConfig& c = model.config;
  const int64_t T = static_cast<int64_t>(tokens.size());
  if (T < 1) throw InputError("prefill: empty prompt");
  PrefilledPrompt p;
  p.tokens = tokens;
  p.n_queries = std::clamp<int64_t>(keep_queries, 0, T);
  p.cache = cpu::make_cache(model, T);
  p.queries.assign(static_cast<size_t>(c.n_layers), {});

  std::vector<float> x = cpu::embed(model, tokens);
  std::vector<int64_t> positions(static_cast<size_t>(T));
  for (int64_t i = 0; i < T; ++i) positions[static_cast<size_t>(i)] = i;
  const int64_t nq = p.n_queries, d = c.head_dim, H = c.n_heads;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    cpu::LayerHooks hooks;
    auto& out = p.queries[static_cast<size_t>(l)];
    if (nq > 0) {
      hooks.on_queries = [&](const float* q, int64_t n_heads, int64_t n, int64_t head_dim) {
        // q: [H, n, d] for all T positions of this single-chunk prefill; keep the last nq rows of each head.
        out.resize(static_cast<size_t>(n_heads * nq * head_dim));
        for (int64_t h = 0; h < n_heads; ++h)
          std::memcpy(out.data() + h * nq * head_dim, q + (h * n + (n - nq)) * head_dim,
                      static_cast<size_t>(nq * head_dim) * sizeof(float));
      };
    }
    cpu::forward_layer(model, l, x.data(), T, positions.data(), p.cache.layers[static_cast<size_t>(l)], ws,
                       nq > 0 ? &hooks : nullptr);
    (void)d;
    (void)H;
  }
  p.last_logits = cpu::final_logits(model, x.data(), T, {T - 1}, ws);
  p.seconds = seconds_since(t0);
  return p;
}

const ScoreResult& ScoreMemo::scores(const Model& model, const PrefilledPrompt& prompt, const ScorerUse& scorer,
                                     int64_t layer) {
  const auto key = std::make_pair(scorer.key, layer);
  auto it = scores_.find(key);
  if (it != scores_.end()) return it->second;

  const ModelConfig& c = model.config;
  const LayerKV& kv = prompt.cache.layers[static_cast<size_t>(layer)];
  const int64_t T = kv.length;
  const ScorerRequirements& req = scorer.requirements;
  const AttentionStatsOptions opts = req.stats_options();
  AttentionStats stats;
  std::vector<float> wq;
  const bool need_stats = opts.window_attention || opts.cumulative_attention || opts.query_counts;
  if (need_stats || req.wants(RKV_STAT_WINDOW_QUERIES)) {
    const int64_t needed = opts.cumulative_attention ? T : req.effective_window(T);
    if (prompt.n_queries < needed)
      throw InputError("scorer '" + scorer.instance->id() + "' needs the queries of the last " +
                       std::to_string(needed) + " positions, but the prefill kept " +
                       std::to_string(prompt.n_queries));
    // The kept queries are the last n_queries positions; the statistics want the last `needed` of them.
    const auto& all = prompt.queries[static_cast<size_t>(layer)];
    std::vector<float> q(static_cast<size_t>(c.n_heads * needed * c.head_dim));
    for (int64_t h = 0; h < c.n_heads; ++h)
      std::memcpy(q.data() + h * needed * c.head_dim,
                  all.data() + (h * prompt.n_queries + (prompt.n_queries - needed)) * c.head_dim,
                  static_cast<size_t>(needed * c.head_dim) * sizeof(float));
    const QueriesView qv{q.data(), c.n_heads, needed, c.head_dim};
    const KeysView kview{kv.k.data(), kv.n_kv_heads, T, kv.head_dim, kv.capacity * kv.head_dim};
    if (need_stats) stats = compute_attention_stats(qv, kview, opts);
    if (req.wants(RKV_STAT_WINDOW_QUERIES)) wq = window_queries(qv, req.effective_window(T));
  }
  ScorerCallInputs in;
  in.layer = layer;
  in.n_heads = c.n_heads;
  in.kv = &kv;
  in.stats = need_stats ? &stats : nullptr;
  in.window_queries = req.wants(RKV_STAT_WINDOW_QUERIES) ? &wq : nullptr;
  return scores_.emplace(key, run_scorer(*scorer.instance, req, in)).first->second;
}

CompressedPrompt compress_prompt(const Model& model, const PrefilledPrompt& prompt, const ScorerUse& scorer,
                                 const std::vector<int64_t>& layers, const std::vector<int64_t>& budgets,
                                 ScoreMemo& memo) {
  if (layers.size() != budgets.size())
    throw InputError("compress_prompt: " + std::to_string(layers.size()) + " layers but " +
                     std::to_string(budgets.size()) + " budgets");
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t T = static_cast<int64_t>(prompt.tokens.size());
  CompressedPrompt out;
  out.cache = prompt.cache;  // a copy: the prefill is shared by every cell
  out.bytes_full = prompt.cache.bytes();
  out.budgets.assign(prompt.cache.layers.size(), T);
  for (size_t a = 0; a < layers.size(); ++a) {
    const int64_t l = layers[a], b = budgets[a];
    out.budgets[static_cast<size_t>(l)] = std::min(b, T);
    if (b >= T) continue;
    const ScoreResult& scores = memo.scores(model, prompt, scorer, l);
    const Selection sel = select_positions(scores.scores.data(), model.config.n_kv_heads, T, b,
                                           scorer.requirements.protected_spec(), l);
    const CompactionReport rep = compact_layer(out.cache.layers[static_cast<size_t>(l)], sel);
    (void)rep;
    for (const auto& w : scores.warnings) out.warnings.push_back(w);
    for (const auto& w : sel.warnings) out.warnings.push_back(w);
  }
  out.bytes_kept = out.cache.bytes();
  out.seconds = seconds_since(t0);
  return out;
}

std::vector<float> continuation_logits(const Model& model, const std::vector<int32_t>& tokens, int64_t start_pos,
                                       KVCache& cache, cpu::Workspace& ws) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return {};
  std::vector<float> x = cpu::embed(model, tokens);
  std::vector<int64_t> positions(static_cast<size_t>(n)), rows(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) positions[static_cast<size_t>(i)] = start_pos + i, rows[static_cast<size_t>(i)] = i;
  for (int64_t l = 0; l < model.config.n_layers; ++l)
    cpu::forward_layer(model, l, x.data(), n, positions.data(), cache.layers[static_cast<size_t>(l)], ws);
  return cpu::final_logits(model, x.data(), n, rows, ws);
}

GreedyResult greedy_decode(const Model& model, const std::vector<float>& first_logits, int64_t start_pos,
                           KVCache& cache, int64_t max_new_tokens, const std::vector<int32_t>& stop_ids,
                           cpu::Workspace& ws) {
  GreedyResult r;
  const int64_t V = model.config.vocab_size;
  int32_t next = cpu::argmax(first_logits.data(), V);
  const auto t0 = std::chrono::steady_clock::now();
  int64_t decoded = 0;
  for (int64_t i = 0; i < max_new_tokens; ++i) {
    if (std::find(stop_ids.begin(), stop_ids.end(), next) != stop_ids.end()) break;
    r.tokens.push_back(next);
    if (i + 1 == max_new_tokens) break;
    const std::vector<float> logits = cpu::decode_step(model, next, start_pos + i, cache, ws);
    ++decoded;
    next = cpu::argmax(logits.data(), V);
  }
  const double s = seconds_since(t0);
  r.tokens_per_second = decoded > 0 && s > 0 ? static_cast<double>(decoded) / s : 0.0;
  return r;
}

}  // namespace rkv
