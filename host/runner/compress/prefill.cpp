#include "runner/compress/prefill.hpp"

#include <algorithm>

#include "core/errors.hpp"

namespace rkv {

bool same_stats_request(const AttentionStatsOptions& a, const AttentionStatsOptions& b) {
  return a.window_attention == b.window_attention && a.cumulative_attention == b.cumulative_attention &&
         a.query_counts == b.query_counts && (!a.window_attention || a.window == b.window) &&
         a.query_moments == b.query_moments && (!a.query_moments || a.query_skip == b.query_skip) &&
         a.residual_cosine == b.residual_cosine;
}

bool needs_stats(const AttentionStatsOptions& o) {
  return o.window_attention || o.cumulative_attention || o.query_counts || o.query_moments || o.residual_cosine;
}

PrefillNeeds prefill_needs(const std::vector<const ScorerUse*>& scorers, bool cumulative_for_decode) {
  PrefillNeeds n;
  for (const ScorerUse* s : scorers) {
    const AttentionStatsOptions o = s->requirements.stats_options();
    if (needs_stats(o) && std::none_of(n.stats.begin(), n.stats.end(),
                                       [&](const AttentionStatsOptions& x) { return same_stats_request(x, o); }))
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

PrefilledPrompt prefill_prompt(Backend& backend, const std::vector<int32_t>& tokens, const PrefillNeeds& needs) {
  if (tokens.empty()) throw InputError("prefill: empty prompt");
  PrefillRequest req;
  req.logits = LogitsFor::Last;
  req.keep_queries = needs.keep_queries;
  req.stats = needs.stats;
  PrefillResult r = backend.prefill(tokens, req);
  backend.model().check_unchanged("prefilling the prompt");  // weights read in place may have changed meanwhile
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

const AttentionStats* PrefilledPrompt::find_stats(const AttentionStatsOptions& options, int64_t layer) const {
  for (size_t k = 0; k < stats_options.size(); ++k)
    if (same_stats_request(stats_options[k], options)) return &stats[k][static_cast<size_t>(layer)];
  return nullptr;
}

const std::vector<AttentionStats>* prompt_cumulative_attention(const PrefilledPrompt& prompt) {
  for (size_t k = 0; k < prompt.stats_options.size(); ++k)
    if (prompt.stats_options[k].cumulative_attention) return &prompt.stats[k];
  return nullptr;
}

}  // namespace rkv
