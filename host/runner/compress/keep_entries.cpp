#include "runner/compress/keep_entries.hpp"

#include <algorithm>

#include "cache/selection.hpp"

namespace rkv {

void keep_entries(Backend& backend, BackendCache& cache, int64_t layer, const KeepLists& keep) {
  const int64_t Hkv = static_cast<int64_t>(keep.size());
  bool changes = false;
  for (int64_t h = 0; h < Hkv; ++h)
    changes = changes || static_cast<int64_t>(keep[static_cast<size_t>(h)].size()) != cache.head_length(layer, h);
  if (!changes) return;
  Selection sel;
  sel.layer = layer;
  sel.n_kv_heads = Hkv;
  sel.prefix_tokens = cache.length(layer);
  for (const auto& k : keep) {
    sel.positions.insert(sel.positions.end(), k.begin(), k.end());
    sel.head_kept.push_back(static_cast<int64_t>(k.size()));
    sel.budget += static_cast<int64_t>(k.size());
    sel.kept = std::max(sel.kept, static_cast<int64_t>(k.size()));
  }
  if (std::all_of(sel.head_kept.begin(), sel.head_kept.end(), [&](int64_t k) { return k == sel.kept; })) {
    sel.head_kept.clear();  // the same count in every head: a uniform selection (every backend compacts those)
    sel.budget = sel.kept;
  }
  backend.compact_layer(cache, layer, sel);
}

}  // namespace rkv
