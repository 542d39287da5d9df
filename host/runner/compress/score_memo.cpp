#include "runner/compress/score_memo.hpp"

#include <utility>

#include "core/errors.hpp"

namespace rkv {

namespace {

/// One layer of the prefill as a scorer (or per-prompt signal) of `use` reads it: the host copy of the layer, the
/// window queries and the value-output norms it asked for, and the ScorerCallInputs pointing at them.
struct LayerInputs {
  LayerKV kv;
  std::vector<float> wq;
  std::vector<float> own_norms;  // ||W_o v||_1 [H, T], computed by the backend on the prefill's own cache
  ScorerCallInputs in;
};

/// Fills `li` for `layer`; `norms` (when not null) replaces the backend's call for the value-output norms.
/// rkv::InputError naming the plugin when the prefill did not compute what it asks for.
void layer_inputs(LayerInputs& li, Backend& backend, const PrefilledPrompt& prompt, const ScorerUse& use,
                  int64_t layer, const std::vector<float>* norms) {
  const ModelConfig& c = backend.model().config;
  li.kv = backend.download_layer(*prompt.cache, layer);
  const int64_t T = li.kv.length;
  const ScorerRequirements& req = use.requirements;
  const AttentionStatsOptions opts = req.stats_options();
  const AttentionStats* stats = nullptr;
  if (needs_stats(opts)) {
    stats = prompt.find_stats(opts, layer);
    if (!stats)
      throw InputError("'" + use.instance->id() + "': the prefill did not compute the attention statistics it asks for");
  }
  if (req.wants(RKV_STAT_WINDOW_QUERIES)) {
    const int64_t w = req.effective_window(T);
    if (prompt.n_queries < w)
      throw InputError("'" + use.instance->id() + "' needs the queries of the last " + std::to_string(w) +
                       " positions, but the prefill kept " + std::to_string(prompt.n_queries));
    const QueriesView qv{prompt.queries[static_cast<size_t>(layer)].data(), c.n_heads, prompt.n_queries, c.head_dim};
    li.wq = window_queries(qv, w);
  }
  if (req.wants(RKV_STAT_VALUE_OUTPUT_NORMS) && !norms) {
    li.own_norms = backend.value_output_norms(*prompt.cache, layer);
    norms = &li.own_norms;
  }
  ScorerCallInputs& in = li.in;
  in.layer = layer;
  in.n_heads = c.n_heads;
  in.kv = &li.kv;
  in.stats = stats;
  in.window_queries = req.wants(RKV_STAT_WINDOW_QUERIES) ? &li.wq : nullptr;
  in.rope_inv_freq = &backend.model().layer_inv_freq(layer);
  in.value_output_norms = req.wants(RKV_STAT_VALUE_OUTPUT_NORMS) ? norms : nullptr;
  in.attention_window = c.layer_window(layer);
}

}  // namespace

const ScoreResult& ScoreMemo::scores(Backend& backend, const PrefilledPrompt& prompt, const ScorerUse& scorer,
                                     int64_t layer, const std::vector<int64_t>* head_budgets) {
  const bool by_budget = scorer.requirements.budget_dependent && head_budgets;
  Key key{scorer.key, layer, by_budget ? *head_budgets : std::vector<int64_t>{}};
  auto it = scores_.find(key);
  if (it != scores_.end()) return it->second;

  const std::vector<float>* norms = nullptr;
  if (scorer.requirements.wants(RKV_STAT_VALUE_OUTPUT_NORMS) && scorer.requirements.budget_dependent) {
    // scored again for every budget: the norms once per layer
    auto n = norms_.find(layer);
    if (n == norms_.end()) n = norms_.emplace(layer, backend.value_output_norms(*prompt.cache, layer)).first;
    norms = &n->second;
  }
  LayerInputs li;
  layer_inputs(li, backend, prompt, scorer, layer, norms);
  li.in.head_budgets = by_budget ? head_budgets : nullptr;
  return scores_.emplace(std::move(key), run_scorer(*scorer.instance, scorer.requirements, li.in)).first->second;
}

const std::vector<double>& ScoreMemo::prompt_profile(Backend& backend, const PrefilledPrompt& prompt,
                                                     const ScorerUse& signal, std::vector<std::string>* warnings) {
  auto it = profiles_.find(signal.key);
  if (it != profiles_.end()) return it->second;
  std::vector<double> s;
  const int64_t L = backend.model().config.n_layers;
  for (int64_t l = 0; l < L; ++l) {
    LayerInputs li;
    layer_inputs(li, backend, prompt, signal, l, nullptr);
    PromptSignalValue v = run_prompt_signal(*signal.instance, signal.requirements, li.in);
    s.push_back(v.value);
    if (warnings) warnings->insert(warnings->end(), v.warnings.begin(), v.warnings.end());
  }
  return profiles_.emplace(signal.key, std::move(s)).first->second;
}

}  // namespace rkv
