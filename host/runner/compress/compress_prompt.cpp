#include "runner/compress/compress_prompt.hpp"

#include <algorithm>

#include "core/errors.hpp"
#include "core/timing.hpp"
#include "runner/compress/sliding_window.hpp"

namespace rkv {

namespace {

/// Where tokens fed after a compressed prompt of `prompt_length` tokens start (CompressedPrompt::next_position):
/// `prompt_length` with original positions; with `rerotated` keys the longest KV head of any layer of `cache`.
int64_t next_position_after(const BackendCache& cache, int64_t prompt_length, bool rerotated) {
  if (!rerotated) return prompt_length;
  int64_t longest = 0;
  for (int64_t l = 0; l < cache.n_layers(); ++l) longest = std::max(longest, cache.length(l));
  return longest;
}

}  // namespace

CompressedPrompt compress_prompt(Backend& backend, const PrefilledPrompt& prompt, const LayerScorers& scorers,
                                 const std::vector<int64_t>& layers, const std::vector<int64_t>& budgets,
                                 ScoreMemo& memo, const std::vector<std::vector<int64_t>>* head_budgets,
                                 bool rerotate) {
  if (layers.size() != budgets.size() || (head_budgets && head_budgets->size() != layers.size()))
    throw InputError("compress_prompt: " + std::to_string(layers.size()) + " layers but " +
                     std::to_string(budgets.size()) + " budgets");
  const auto t0 = SteadyClock::now();
  const ModelConfig& c = backend.model().config;
  const int64_t T = static_cast<int64_t>(prompt.tokens.size()), Hkv = c.n_kv_heads;
  if (rerotate && has_sliding_window(c))
    throw InputError("compression.rerotate = true is not supported on a model with sliding-window layers: "
                     "re-rotated positions would move entries across the window");
  CompressedPrompt out;
  out.bytes_full = window_bytes(backend, *prompt.cache, T);  // before the copy below: one working copy at a time
  out.cache = backend.clone(*prompt.cache);  // a copy: the prefill is shared by every cell
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

}  // namespace rkv
