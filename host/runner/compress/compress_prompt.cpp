#include "runner/compress/compress_prompt.hpp"

#include <algorithm>
#include <optional>

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
  out.bytes_full = window_bytes(backend, *prompt.cache, T);
  for (int64_t l = 0; l < c.n_layers; ++l) out.budgets.push_back(c.layer_span(l, T));  // what a layer left whole holds
  if (head_budgets) out.head_budgets.resize(static_cast<size_t>(prompt.cache->n_layers()));
  // Every layer's selection first; then one copy of the prefill, each layer compacted as it is copied (the prefill is
  // shared by every cell: a cell's working copy is its compressed cache plus one layer, never a second full cache).
  std::vector<std::optional<Selection>> selections(static_cast<size_t>(c.n_layers));
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
    const ScorerUse& scorer = scorers.at(l);
    std::vector<int64_t> kept(static_cast<size_t>(Hkv), std::min(budgets[a], span));  // what each KV head keeps
    if (heads && static_cast<int64_t>(heads->size()) != Hkv)
      throw InputError("compress_prompt: layer " + std::to_string(l) + " has " + std::to_string(heads->size()) +
                       " head budgets for " + std::to_string(Hkv) + " KV heads");
    if (heads)
      for (int64_t h = 0; h < Hkv; ++h) kept[static_cast<size_t>(h)] = std::min((*heads)[static_cast<size_t>(h)], span);
    const ScoreResult& scores = memo.scores(backend, prompt, scorer, l, &kept);
    const ProtectedSpec spec = scorer.requirements.protected_spec();
    selections[static_cast<size_t>(l)] =
        heads ? select_in_window_per_head(scores.scores.data(), Hkv, T, span, *heads, spec, l)
              : select_in_window(scores.scores.data(), Hkv, T, span, budgets[a], spec, l);
    for (const auto& w : scores.warnings) out.warnings.push_back(w);
    for (const auto& w : selections[static_cast<size_t>(l)]->warnings) out.warnings.push_back(w);
  }
  for (int64_t l = 0; l < c.n_layers; ++l)  // every other sliding layer keeps just its window
    if (!selections[static_cast<size_t>(l)] && window_first_position(c, l, T) > 0)
      selections[static_cast<size_t>(l)] = select_in_window(nullptr, Hkv, T, c.layer_span(l, T), T, {}, l);
  std::vector<const Selection*> chosen;
  for (const auto& sel : selections) chosen.push_back(sel ? &*sel : nullptr);
  out.cache = backend.clone_selected(*prompt.cache, chosen);
  if (rerotate) {
    for (size_t a = 0; a < layers.size(); ++a) {
      const int64_t l = layers[a];
      const std::optional<Selection>& sel = selections[static_cast<size_t>(l)];
      if (!sel) continue;  // kept whole: not re-rotated
      out.prompt_positions.resize(static_cast<size_t>(prompt.cache->n_layers()));
      for (int64_t h = 0; h < Hkv; ++h)  // cache index in the prefilled prompt = position
        for (int64_t i = 0; i < sel->head_kept_count(h); ++i)
          out.prompt_positions[static_cast<size_t>(l)].push_back(static_cast<int32_t>(sel->head_positions(h)[i]));
      backend.rerotate_layer(*out.cache, l);
    }
  }
  out.bytes_kept = out.cache->bytes();
  out.next_position = next_position_after(*out.cache, T, rerotate);
  out.seconds = seconds_since(t0);
  return out;
}

size_t window_bytes(Backend& backend, const BackendCache& full, int64_t prefix_tokens) {
  const ModelConfig& c = backend.model().config;
  if (!window_drops_entries(c, prefix_tokens)) return full.bytes();
  // The full cache with its sliding layers cut to their windows, copied layer by layer (not a second full cache).
  std::vector<std::optional<Selection>> windows(static_cast<size_t>(c.n_layers));
  std::vector<const Selection*> chosen;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    if (window_first_position(c, l, prefix_tokens) > 0)
      windows[static_cast<size_t>(l)] =
          select_in_window(nullptr, c.n_kv_heads, prefix_tokens, c.layer_span(l, prefix_tokens), prefix_tokens, {}, l);
    chosen.push_back(windows[static_cast<size_t>(l)] ? &*windows[static_cast<size_t>(l)] : nullptr);
  }
  return backend.clone_selected(full, chosen)->bytes();
}

}  // namespace rkv
