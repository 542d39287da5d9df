#include "runner/decode_policy.hpp"

#include <algorithm>

#include "cache/selection.hpp"
#include "core/errors.hpp"

namespace rkv {

DecodeEviction::DecodeEviction(const std::string& policy, int64_t sinks, std::vector<int64_t> budgets,
                               std::vector<std::vector<int64_t>> head_budgets)
    : sinks_(sinks), budgets_(std::move(budgets)), head_budgets_(std::move(head_budgets)) {
  if (policy != "none" && policy != "rolling")
    throw InputError("compression.decode.policy must be \"none\" or \"rolling\" (got \"" + policy + "\")");
  if (sinks < 0) throw InputError("compression.decode.sinks must be >= 0 (got " + std::to_string(sinks) + ")");
  for (int64_t b : budgets_)
    if (b < 1) throw InputError("decode eviction: a layer budget of " + std::to_string(b) + " entries (must be >= 1)");
  if (!head_budgets_.empty() && head_budgets_.size() != budgets_.size())
    throw InputError("decode eviction: per-head budgets for " + std::to_string(head_budgets_.size()) + " layers, " +
                     std::to_string(budgets_.size()) + " layer budgets");
  for (const auto& row : head_budgets_)
    for (int64_t b : row)
      if (b < 1) throw InputError("decode eviction: a head budget of " + std::to_string(b) + " entries (must be >= 1)");
  rolling_ = policy == "rolling";
}

int64_t DecodeEviction::head_budget(int64_t layer, int64_t head) const {
  const auto l = static_cast<size_t>(layer);
  return head_budgets_.empty() || head_budgets_[l].empty() ? budgets_[l] : head_budgets_[l][static_cast<size_t>(head)];
}

std::string DecodeEviction::frozen_heads_warning(int64_t n_kv_heads) const {
  if (!rolling_) return "";
  int64_t frozen = 0, first_l = -1, first_h = -1;
  for (int64_t l = 0; l < static_cast<int64_t>(budgets_.size()); ++l)
    for (int64_t h = 0; h < n_kv_heads; ++h)
      if (sinks_ >= head_budget(l, h)) {
        if (frozen++ == 0) first_l = l, first_h = h;
      }
  if (frozen == 0) return "";
  return "rolling decode: sinks = " + std::to_string(sinks_) + " is at or above the budget of " +
         std::to_string(frozen) + " (layer, KV head) pair(s), first layer " + std::to_string(first_l) + ", KV head " +
         std::to_string(first_h) + " (" + std::to_string(head_budget(first_l, first_h)) +
         " entries): those heads keep their first entries and evict every new token at once";
}

void DecodeEviction::apply(Backend& backend, BackendCache& cache) const {
  if (!rolling_) return;
  if (cache.n_layers() != static_cast<int64_t>(budgets_.size()))
    throw InputError("decode eviction: the cache has " + std::to_string(cache.n_layers()) + " layers but " +
                     std::to_string(budgets_.size()) + " budgets were given");
  const int64_t Hkv = backend.model().config.n_kv_heads;
  for (int64_t l = 0; l < cache.n_layers(); ++l) {
    // Head h keeps its first min(sinks, b_h) entries and its most recent b_h - sinks; a head within its budget keeps
    // everything. The selection is over the layer's longest head (T = length); each head's indices lie below its own
    // length (compact_layer's per-head rule).
    bool over = false;
    for (int64_t h = 0; h < Hkv; ++h) over = over || cache.head_length(l, h) > head_budget(l, h);
    if (!over) continue;
    Selection sel;
    sel.layer = l;
    sel.n_kv_heads = Hkv;
    sel.prefix_tokens = cache.length(l);
    for (int64_t h = 0; h < Hkv; ++h) {
      const int64_t held = cache.head_length(l, h), b = std::min(head_budget(l, h), held);
      const int64_t sinks = std::min(sinks_, b);
      for (int64_t i = 0; i < sinks; ++i) sel.positions.push_back(i);
      for (int64_t i = held - (b - sinks); i < held; ++i) sel.positions.push_back(i);
      sel.head_kept.push_back(b);
      sel.budget += b;
      sel.kept = std::max(sel.kept, b);
    }
    if (std::all_of(sel.head_kept.begin(), sel.head_kept.end(), [&](int64_t k) { return k == sel.kept; })) {
      sel.head_kept.clear();  // the same count in every head: a uniform selection (every backend compacts those)
      sel.budget = sel.kept;
    }
    backend.compact_layer(cache, l, sel);
  }
}

}  // namespace rkv
