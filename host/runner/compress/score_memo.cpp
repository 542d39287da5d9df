#include "runner/compress/score_memo.hpp"

#include <utility>

#include "core/errors.hpp"

namespace rkv {

const ScoreResult& ScoreMemo::scores(Backend& backend, const PrefilledPrompt& prompt, const ScorerUse& scorer,
                                     int64_t layer, const std::vector<int64_t>* head_budgets) {
  const bool by_budget = scorer.requirements.budget_dependent && head_budgets;
  Key key{scorer.key, layer, by_budget ? *head_budgets : std::vector<int64_t>{}};
  auto it = scores_.find(key);
  if (it != scores_.end()) return it->second;

  const ModelConfig& c = backend.model().config;
  const LayerKV kv = backend.download_layer(*prompt.cache, layer);
  const int64_t T = kv.length;
  const ScorerRequirements& req = scorer.requirements;
  const AttentionStatsOptions opts = req.stats_options();
  const AttentionStats* stats = nullptr;
  if (needs_stats(opts)) {
    stats = prompt.find_stats(opts, layer);
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
  std::vector<float> own_norms;  // ||W_o v||_1 [H, T], computed by the backend on the prefill's own cache
  const std::vector<float>* norms = &own_norms;
  if (req.wants(RKV_STAT_VALUE_OUTPUT_NORMS)) {
    if (!req.budget_dependent) own_norms = backend.value_output_norms(*prompt.cache, layer);
    else {  // scored again for every budget: the norms once per layer
      auto n = norms_.find(layer);
      if (n == norms_.end()) n = norms_.emplace(layer, backend.value_output_norms(*prompt.cache, layer)).first;
      norms = &n->second;
    }
  }
  ScorerCallInputs in;
  in.layer = layer;
  in.n_heads = c.n_heads;
  in.kv = &kv;
  in.stats = stats;
  in.window_queries = req.wants(RKV_STAT_WINDOW_QUERIES) ? &wq : nullptr;
  in.rope_inv_freq = &backend.model().layer_inv_freq(layer);
  in.value_output_norms = req.wants(RKV_STAT_VALUE_OUTPUT_NORMS) ? norms : nullptr;
  in.head_budgets = by_budget ? head_budgets : nullptr;
  in.attention_window = c.layer_window(layer);
  return scores_.emplace(std::move(key), run_scorer(*scorer.instance, req, in)).first->second;
}

}  // namespace rkv
