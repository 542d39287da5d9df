#include "runner/compression.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "cache/budget.hpp"
#include "core/cancel.hpp"
#include "core/errors.hpp"
#include "runner/sampling.hpp"
#include "runner/sliding_window.hpp"

namespace rkv {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool same_request(const AttentionStatsOptions& a, const AttentionStatsOptions& b) {
  return a.window_attention == b.window_attention && a.cumulative_attention == b.cumulative_attention &&
         a.query_counts == b.query_counts && (!a.window_attention || a.window == b.window) &&
         a.query_moments == b.query_moments && (!a.query_moments || a.query_skip == b.query_skip);
}

bool needs_stats(const AttentionStatsOptions& o) {
  return o.window_attention || o.cumulative_attention || o.query_counts || o.query_moments;
}

/// Where tokens fed after a compressed prompt of `prompt_length` tokens start (CompressedPrompt::next_position):
/// `prompt_length` with original positions; with `rerotated` keys the longest KV head of any layer of `cache`.
int64_t next_position_after(const BackendCache& cache, int64_t prompt_length, bool rerotated) {
  if (!rerotated) return prompt_length;
  int64_t longest = 0;
  for (int64_t l = 0; l < cache.n_layers(); ++l) longest = std::max(longest, cache.length(l));
  return longest;
}

}  // namespace

LayerScorers::LayerScorers(const ScorerUse& fallback, std::map<int64_t, const ScorerUse*> routed)
    : fallback_(&fallback), routed_(std::move(routed)) {
  for (const auto& [layer, use] : routed_)
    if (!use) throw InputError("LayerScorers: no scorer for routed layer " + std::to_string(layer));
}

const ScorerUse& LayerScorers::at(int64_t layer) const {
  const auto it = routed_.find(layer);
  return it == routed_.end() ? *fallback_ : *it->second;
}

int64_t LayerScorers::protected_count(const std::vector<int64_t>& layers, int64_t T) const {
  int64_t count = 0;
  for (int64_t l : layers) count = std::max(count, at(l).requirements.protected_count(T));
  return count;
}

bool LayerScorers::same_protected_spec(const std::vector<int64_t>& layers) const {
  for (int64_t l : layers) {
    const ProtectedSpec a = at(l).requirements.protected_spec(), b = at(layers.front()).requirements.protected_spec();
    if (a.sinks != b.sinks || a.recent != b.recent) return false;
  }
  return true;
}

PrefillNeeds prefill_needs(const std::vector<const ScorerUse*>& scorers, bool cumulative_for_decode) {
  PrefillNeeds n;
  for (const ScorerUse* s : scorers) {
    const AttentionStatsOptions o = s->requirements.stats_options();
    if (needs_stats(o) && std::none_of(n.stats.begin(), n.stats.end(),
                                       [&](const AttentionStatsOptions& x) { return same_request(x, o); }))
      n.stats.push_back(o);
    if (s->requirements.wants(RKV_STAT_WINDOW_QUERIES)) n.keep_queries = std::max(n.keep_queries, s->requirements.window);
  }
  if (cumulative_for_decode && std::none_of(n.stats.begin(), n.stats.end(), [](const AttentionStatsOptions& x) {
        return x.cumulative_attention;
      })) {
    AttentionStatsOptions o;
    o.cumulative_attention = true;
    n.stats.push_back(o);
  }
  return n;
}

std::vector<int64_t> resolve_compressible_layers(const std::vector<int64_t>& listed, bool global_only,
                                                 const ModelConfig& mc, const std::string& config_path) {
  std::vector<int64_t> layers = listed;
  if (layers.empty())
    for (int64_t l = 0; l < mc.n_layers; ++l)
      if (!global_only || !mc.is_sliding(l)) layers.push_back(l);
  if (global_only && layers.empty())
    throw InputError(config_path + ": budget.layers = \"global\", but every layer of the model has a sliding window");
  for (int64_t l : layers)
    if (l < 0 || l >= mc.n_layers)
      throw InputError(config_path + ": budget.layers names layer " + std::to_string(l) + " but the model has " +
                       std::to_string(mc.n_layers) + " layers");
  return layers;
}

int64_t cell_budget_total(const std::optional<double>& fraction, const std::optional<int64_t>& tokens,
                          const std::vector<int64_t>& spans) {
  return fraction ? budget_total_from_fraction(*fraction, spans) : budget_total_from_tokens(tokens.value_or(0), spans);
}

PrefilledPrompt prefill_prompt(Backend& backend, const std::vector<int32_t>& tokens, const PrefillNeeds& needs) {
  if (tokens.empty()) throw InputError("prefill: empty prompt");
  PrefillRequest req;
  req.logits = LogitsFor::Last;
  req.keep_queries = needs.keep_queries;
  req.stats = needs.stats;
  PrefillResult r = backend.prefill(tokens, req);
  PrefilledPrompt p;
  p.tokens = tokens;
  p.cache = std::move(r.cache);
  p.n_queries = r.n_queries;
  p.queries = std::move(r.queries);
  p.stats_options = needs.stats;
  p.stats = std::move(r.stats);
  p.last_logits = std::move(r.logits);
  p.seconds = r.seconds;
  return p;
}

const ScoreResult& ScoreMemo::scores(Backend& backend, const PrefilledPrompt& prompt, const ScorerUse& scorer,
                                     int64_t layer) {
  const auto key = std::make_pair(scorer.key, layer);
  auto it = scores_.find(key);
  if (it != scores_.end()) return it->second;

  const ModelConfig& c = backend.model().config;
  const LayerKV kv = backend.download_layer(*prompt.cache, layer);
  const int64_t T = kv.length;
  const ScorerRequirements& req = scorer.requirements;
  const AttentionStatsOptions opts = req.stats_options();
  const AttentionStats* stats = nullptr;
  if (needs_stats(opts)) {
    for (size_t k = 0; k < prompt.stats_options.size() && !stats; ++k)
      if (same_request(prompt.stats_options[k], opts)) stats = &prompt.stats[k][static_cast<size_t>(layer)];
    if (!stats)
      throw InputError("scorer '" + scorer.instance->id() +
                       "': the prefill did not compute the attention statistics it asks for");
  }
  std::vector<float> wq;
  if (req.wants(RKV_STAT_WINDOW_QUERIES)) {
    const int64_t w = req.effective_window(T);
    if (prompt.n_queries < w)
      throw InputError("scorer '" + scorer.instance->id() + "' needs the queries of the last " + std::to_string(w) +
                       " positions, but the prefill kept " + std::to_string(prompt.n_queries));
    const QueriesView qv{prompt.queries[static_cast<size_t>(layer)].data(), c.n_heads, prompt.n_queries, c.head_dim};
    wq = window_queries(qv, w);
  }
  ScorerCallInputs in;
  in.layer = layer;
  in.n_heads = c.n_heads;
  in.kv = &kv;
  in.stats = stats;
  in.window_queries = req.wants(RKV_STAT_WINDOW_QUERIES) ? &wq : nullptr;
  in.rope_inv_freq = &backend.model().layer_inv_freq(layer);
  return scores_.emplace(key, run_scorer(*scorer.instance, req, in)).first->second;
}

CellBudgets allocate_cell(Backend& backend, const PrefilledPrompt& prompt, const LayerScorers& scorers, ScoreMemo& memo,
                          const PluginInstance& layer_alloc, const PluginInstance* head_alloc,
                          const std::vector<int64_t>& layers, const std::vector<double>& profile, int64_t B) {
  const int64_t T = static_cast<int64_t>(prompt.tokens.size()), A = static_cast<int64_t>(layers.size());
  const int64_t protected_count = scorers.protected_count(layers, T);
  const std::vector<int64_t> spans = backend.model().config.layer_spans(layers, T);
  CellBudgets out;
  const PluginInstance* per_head = head_alloc;
  if (serves_layer_budgets(layer_alloc)) {
    const Allocation a = run_allocator(layer_alloc, profile, B, T, A, protected_count, spans);
    out.layers = a.budgets;
    out.warnings = a.warnings;
  } else if (serves_head_budgets(layer_alloc) && !head_alloc) {
    per_head = &layer_alloc;  // a per-head allocator alone splits B over layers and heads
  } else {
    throw InputError("allocator '" + layer_alloc.id() + "' does not serve " RKV_INTERFACE_ALLOCATOR_V1 +
                     std::string(serves_head_budgets(layer_alloc) ? " (it is a per-head allocator: give it as "
                                                                    "allocator.heads after a layer allocator, or alone)"
                                                                  : ""));
  }
  if (!per_head) return out;
  if (!serves_head_budgets(*per_head))
    throw InputError("allocator.heads: '" + per_head->id() + "' does not serve " RKV_INTERFACE_ALLOCATOR_V2 +
                     " (per-head budgets)");
  if (!layers.empty() && !scorers.same_protected_spec(layers))
    throw InputError("allocator.heads: per-head allocator '" + per_head->id() + "' with a scorer.route whose scorers "
                     "protect different positions (sinks, recent window): it takes one protected mask for every layer");
  const ScorerUse& scorer = scorers.at(layers.empty() ? 0 : layers.front());  // the protected mask's spec
  const int64_t H = backend.model().config.n_kv_heads;
  HeadAllocationInputs in;
  if (per_head->info().descriptor->flags & RKV_FLAG_NEEDS_PROFILE) in.profile = profile;
  std::vector<float> scores;
  if (per_head->info().descriptor->flags & RKV_FLAG_NEEDS_SCORES) {
    scores.reserve(static_cast<size_t>(A * H * T));
    for (int64_t l : layers) {
      const ScoreResult& r = memo.scores(backend, prompt, scorers.at(l), l);
      scores.insert(scores.end(), r.scores.begin(), r.scores.end());
      for (const auto& w : r.warnings) out.warnings.push_back(w);
    }
    in.scores = &scores;
  }
  in.protected_mask.assign(static_cast<size_t>(T), 0);
  for (int64_t p : protected_positions(T, scorer.requirements.protected_spec())) in.protected_mask[static_cast<size_t>(p)] = 1;
  in.layer_budgets = out.layers.empty() ? nullptr : &out.layers;
  in.budget_total = B;
  in.prefix_tokens = T;
  in.n_layers = A;
  in.n_kv_heads = H;
  in.protected_count = protected_count;
  in.layer_spans = spans;
  HeadAllocation h = run_head_allocator(*per_head, in);
  out.layers = h.layer_budgets;
  out.heads = std::move(h.budgets);
  out.warnings.insert(out.warnings.end(), h.warnings.begin(), h.warnings.end());
  return out;
}

CompressedPrompt compress_prompt(Backend& backend, const PrefilledPrompt& prompt, const LayerScorers& scorers,
                                 const std::vector<int64_t>& layers, const std::vector<int64_t>& budgets,
                                 ScoreMemo& memo, const std::vector<std::vector<int64_t>>* head_budgets,
                                 bool rerotate) {
  if (layers.size() != budgets.size() || (head_budgets && head_budgets->size() != layers.size()))
    throw InputError("compress_prompt: " + std::to_string(layers.size()) + " layers but " +
                     std::to_string(budgets.size()) + " budgets");
  const auto t0 = std::chrono::steady_clock::now();
  const ModelConfig& c = backend.model().config;
  const int64_t T = static_cast<int64_t>(prompt.tokens.size()), Hkv = c.n_kv_heads;
  if (rerotate && has_sliding_window(c))
    throw InputError("compression.rerotate = true is not supported on a model with sliding-window layers: "
                     "re-rotated positions would move entries across the window");
  CompressedPrompt out;
  out.cache = backend.clone(*prompt.cache);  // a copy: the prefill is shared by every cell
  out.bytes_full = window_bytes(backend, *prompt.cache, T);
  for (int64_t l = 0; l < c.n_layers; ++l) out.budgets.push_back(c.layer_span(l, T));  // what a layer left whole holds
  if (head_budgets) out.head_budgets.resize(static_cast<size_t>(prompt.cache->n_layers()));
  std::vector<char> compressed(static_cast<size_t>(c.n_layers), 0);
  for (size_t a = 0; a < layers.size(); ++a) {
    const int64_t l = layers[a], span = c.layer_span(l, T);
    const std::vector<int64_t>* heads = head_budgets ? &(*head_budgets)[a] : nullptr;
    out.budgets[static_cast<size_t>(l)] = std::min(budgets[a], span);
    bool whole = budgets[a] >= span;
    if (heads) {
      for (int64_t hb : *heads) out.head_budgets[static_cast<size_t>(l)].push_back(std::min(hb, span));
      whole = std::all_of(heads->begin(), heads->end(), [&](int64_t hb) { return hb >= span; });
    }
    if (whole) continue;  // kept whole (a sliding layer still drops what lies before its window, below)
    compressed[static_cast<size_t>(l)] = 1;
    const ScorerUse& scorer = scorers.at(l);
    const ScoreResult& scores = memo.scores(backend, prompt, scorer, l);
    const ProtectedSpec spec = scorer.requirements.protected_spec();
    const Selection sel = heads ? select_in_window_per_head(scores.scores.data(), Hkv, T, span, *heads, spec, l)
                                : select_in_window(scores.scores.data(), Hkv, T, span, budgets[a], spec, l);
    backend.compact_layer(*out.cache, l, sel);
    if (rerotate) {
      out.prompt_positions.resize(static_cast<size_t>(prompt.cache->n_layers()));
      for (int64_t h = 0; h < Hkv; ++h)  // cache index in the prefilled prompt = position
        for (int64_t i = 0; i < sel.head_kept_count(h); ++i)
          out.prompt_positions[static_cast<size_t>(l)].push_back(static_cast<int32_t>(sel.head_positions(h)[i]));
      backend.rerotate_layer(*out.cache, l);
    }
    for (const auto& w : scores.warnings) out.warnings.push_back(w);
    for (const auto& w : sel.warnings) out.warnings.push_back(w);
  }
  for (int64_t l = 0; l < c.n_layers; ++l)  // every other sliding layer keeps just its window
    if (!compressed[static_cast<size_t>(l)] && window_first_position(c, l, T) > 0)
      backend.compact_layer(*out.cache, l, select_in_window(nullptr, Hkv, T, c.layer_span(l, T), T, {}, l));
  out.bytes_kept = out.cache->bytes();
  out.next_position = next_position_after(*out.cache, T, rerotate);
  out.seconds = seconds_since(t0);
  return out;
}

size_t window_bytes(Backend& backend, const BackendCache& full, int64_t prefix_tokens) {
  if (!window_drops_entries(backend.model().config, prefix_tokens)) return full.bytes();
  const std::unique_ptr<BackendCache> copy = backend.clone(full);
  drop_out_of_window(backend, *copy, prefix_tokens - 1);
  return copy->bytes();
}

const std::vector<AttentionStats>* prompt_cumulative_attention(const PrefilledPrompt& prompt) {
  for (size_t k = 0; k < prompt.stats_options.size(); ++k)
    if (prompt.stats_options[k].cumulative_attention) return &prompt.stats[k];
  return nullptr;
}

std::vector<float> extend_cache(Backend& backend, BackendCache& cache, const std::vector<int32_t>& tokens,
                                int64_t start_pos, LogitsFor which) {
  std::vector<float> logits = backend.extend(cache, tokens, start_pos, which);
  drop_out_of_window(backend, cache, start_pos + static_cast<int64_t>(tokens.size()) - 1);
  return logits;
}

std::vector<float> decode_token(Backend& backend, BackendCache& cache, int32_t token, int64_t position,
                                DecodeSession* decode) {
  throw_if_cancelled();  // a run's SIGTERM stops a long continuation between two tokens (core/cancel.hpp)
  if (!decode) return extend_cache(backend, cache, {token}, position, LogitsFor::Last);
  ExtendObservation observed;
  std::vector<float> logits = backend.extend(cache, {token}, position, LogitsFor::Last, decode->capture(), &observed);
  decode->after_token(backend, cache, observed, position);
  drop_out_of_window(backend, cache, position);
  return logits;
}

std::vector<float> continuation_logits(Backend& backend, const std::vector<int32_t>& tokens, int64_t start_pos,
                                       BackendCache& cache, DecodeSession* decode) {
  if (tokens.empty()) return {};
  if (!decode) return extend_cache(backend, cache, tokens, start_pos, LogitsFor::All);
  std::vector<float> logits;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::vector<float> row = decode_token(backend, cache, tokens[i], start_pos + static_cast<int64_t>(i), decode);
    logits.insert(logits.end(), row.begin(), row.end());
  }
  return logits;
}

GreedyResult greedy_decode(Backend& backend, const std::vector<float>& first_logits, int64_t start_pos,
                           BackendCache& cache, int64_t max_new_tokens, const std::vector<int32_t>& stop_ids,
                           DecodeSession* decode) {
  GreedyResult r;
  const int64_t V = backend.model().config.vocab_size;
  int32_t next = argmax(first_logits.data(), V);
  const auto t0 = std::chrono::steady_clock::now();
  int64_t decoded = 0;
  for (int64_t i = 0; i < max_new_tokens; ++i) {
    if (std::find(stop_ids.begin(), stop_ids.end(), next) != stop_ids.end()) break;
    r.tokens.push_back(next);
    if (i + 1 == max_new_tokens) break;
    const std::vector<float> logits = decode_token(backend, cache, next, start_pos + i, decode);
    ++decoded;
    next = argmax(logits.data(), V);
  }
  const double s = seconds_since(t0);
  r.tokens_per_second = decoded > 0 && s > 0 ? static_cast<double>(decoded) / s : 0.0;
  return r;
}

}  // namespace rkv
