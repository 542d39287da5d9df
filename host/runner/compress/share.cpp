#include "runner/compress/share.hpp"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <set>

#include "core/errors.hpp"

namespace rkv {

void check_share_support(const ModelConfig& config, const ShareSpec& share, const std::string& where) {
  const int64_t L = config.n_layers;
  if (share.count >= L)
    throw InputError(where + ": compression.share.count = " + std::to_string(share.count) + " must be below the " +
                     std::to_string(L) + " layers of the model (layer 0 keeps its cache)");
  std::set<int64_t> shared;
  for (const auto& [layer, source] : share.map) {
    const std::string pair = "[" + std::to_string(layer) + ", " + std::to_string(source) + "]";
    if (layer >= L || source >= L)
      throw InputError(where + ": compression.share.map " + pair + " names a layer beyond the model's " +
                       std::to_string(L) + " layers");
    if (!shared.insert(layer).second)
      throw InputError(where + ": compression.share.map names layer " + std::to_string(layer) + " twice");
  }
  for (const auto& [layer, source] : share.map)
    if (shared.count(source))
      throw InputError(where + ": compression.share.map: layer " + std::to_string(layer) + " reads layer " +
                       std::to_string(source) + ", which is itself shared; name the layer that keeps its cache");
}

std::vector<int64_t> share_sources(const ShareSpec& share, int64_t n_layers, const std::vector<double>& profile) {
  std::vector<int64_t> sources(static_cast<size_t>(n_layers));
  std::iota(sources.begin(), sources.end(), int64_t{0});
  if (share.groups > 1) {
    for (int64_t l = 0; l < n_layers; ++l) sources[static_cast<size_t>(l)] = l / share.groups * share.groups;
  } else if (!share.map.empty()) {
    for (const auto& [layer, source] : share.map) sources[static_cast<size_t>(layer)] = source;
  } else if (share.count > 0) {
    if (static_cast<int64_t>(profile.size()) != n_layers)
      throw InputError("compression.share.count: the chooser needs the cell's profile over all " +
                       std::to_string(n_layers) + " layers (got " + std::to_string(profile.size()) + ")");
    std::vector<int64_t> candidates(static_cast<size_t>(n_layers - 1));
    std::iota(candidates.begin(), candidates.end(), int64_t{1});
    std::stable_sort(candidates.begin(), candidates.end(), [&](int64_t a, int64_t b) {
      const double sa = profile[static_cast<size_t>(a)], sb = profile[static_cast<size_t>(b)];
      return sa != sb ? sa < sb : a > b;  // least sensitive first; ties: the deeper layer
    });
    std::vector<char> shared(static_cast<size_t>(n_layers), 0);
    for (int64_t i = 0; i < share.count && i < static_cast<int64_t>(candidates.size()); ++i)
      shared[static_cast<size_t>(candidates[static_cast<size_t>(i)])] = 1;
    for (int64_t l = 1; l < n_layers; ++l)
      if (shared[static_cast<size_t>(l)]) sources[static_cast<size_t>(l)] = sources[static_cast<size_t>(l - 1)];
  }
  return sources;
}

SharePlan plan_sharing(const ShareSpec& share, const ModelConfig& config, const std::vector<int64_t>& layers_A,
                       int64_t budget_total, int64_t prefix_tokens, const std::vector<double>& profile) {
  SharePlan plan;
  plan.sources = share_sources(share, config.n_layers, profile);
  int64_t room = 0;
  for (int64_t l : layers_A)
    if (plan.sources.at(static_cast<size_t>(l)) == l) {
      plan.layers.push_back(l);
      room += config.layer_span(l, prefix_tokens);
    }
  if (plan.layers.empty())
    throw InputError("[compression.share] " + share.label() + " shares every compressible layer; at least one layer "
                     "of budget.layers must keep its cache");
  plan.budget_total = std::min(budget_total, room);
  if (plan.budget_total < budget_total)
    plan.warning = "[compression.share] " + share.label() + ": the " + std::to_string(plan.layers.size()) +
                   " layers that keep a cache hold at most " + std::to_string(room) + " of the budget's " +
                   std::to_string(budget_total) + " entries, so the cell holds less than its budget";
  return plan;
}

void share_compressed(Backend& backend, CompressedPrompt& comp, const std::vector<int64_t>& sources) {
  const auto t0 = std::chrono::steady_clock::now();
  bool any = false;
  for (int64_t l = 0; l < static_cast<int64_t>(sources.size()); ++l) {
    if (sources[static_cast<size_t>(l)] == l) continue;
    backend.share_layer(*comp.cache, l, sources[static_cast<size_t>(l)]);
    comp.budgets[static_cast<size_t>(l)] = 0;
    if (l < static_cast<int64_t>(comp.head_budgets.size())) comp.head_budgets[static_cast<size_t>(l)].clear();
    any = true;
  }
  if (!any) return;
  comp.bytes_kept = comp.cache->bytes();
  comp.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace rkv
