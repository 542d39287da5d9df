#include "cache/compaction.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/errors.hpp"

namespace rkv {

namespace {
std::string str(int64_t v) { return std::to_string(v); }
}  // namespace

CompactionReport compact_layer(LayerKV& layer, const Selection& sel) {
  const std::string where = "layer " + str(sel.layer);
  CompactionReport rep;
  rep.layer = sel.layer;
  rep.length_before = layer.length;
  rep.bytes_before = layer.bytes();
  check_layer_layout(layer, sel.layer);
  if (layer.length < sel.prefix_tokens)
    throw InputError(where + ": cache holds " + str(layer.length) + " positions but the selection is over T = " +
                     str(sel.prefix_tokens));
  if (layer.n_kv_heads != sel.n_kv_heads)
    throw InputError(where + ": cache has " + str(layer.n_kv_heads) + " KV heads but the selection " +
                     str(sel.n_kv_heads));
  if (sel.untouched) {
    rep.untouched = true;
    rep.length_after = layer.length;
    rep.bytes_after = rep.bytes_before;
    return rep;
  }
  const int64_t d = layer.head_dim, Hkv = layer.n_kv_heads;
  int64_t n_selected = 0;
  for (int64_t h = 0; h < Hkv; ++h) n_selected += sel.head_kept_count(h);
  if (static_cast<int64_t>(sel.positions.size()) != n_selected ||
      (sel.per_head() && static_cast<int64_t>(sel.head_kept.size()) != Hkv))
    throw InputError(where + ": selection holds " + str(static_cast<int64_t>(sel.positions.size())) +
                     " positions, expected " + str(n_selected) + " (the sum of the per-head counts)");
  // Head h: its selected entries (indices below T_h = min(T, head length)), then its tail T_h .. length - 1.
  std::vector<int64_t> kept(static_cast<size_t>(Hkv)), tail_from(static_cast<size_t>(Hkv));
  std::vector<int64_t> begin(static_cast<size_t>(Hkv) + 1, 0);
  for (int64_t h = 0; h < Hkv; ++h) {
    const int64_t T_h = std::min(sel.prefix_tokens, layer.head_length(h)), b = sel.head_kept_count(h);
    const int64_t* pos = sel.head_positions(h);
    if (b < 1) throw InputError(where + ", KV head " + str(h) + ": the selection keeps no entry");
    for (int64_t i = 0; i < b; ++i)
      if (pos[i] < 0 || pos[i] >= T_h || (i > 0 && pos[i] <= pos[i - 1]))
        throw InputError(where + ", KV head " + str(h) + ": selected position " + str(pos[i]) +
                         " is outside [0, " + str(T_h) + ") or not ascending");
    tail_from[static_cast<size_t>(h)] = T_h;
    kept[static_cast<size_t>(h)] = b + (layer.head_length(h) - T_h);
    begin[static_cast<size_t>(h) + 1] = begin[static_cast<size_t>(h)] + kept[static_cast<size_t>(h)];
  }
  const int64_t rows = begin.back();
  std::vector<float> k(static_cast<size_t>(rows * d)), v(k.size());
  std::vector<int32_t> kept_pos(layer.has_positions() ? static_cast<size_t>(rows) : 0);
  const size_t row_bytes = static_cast<size_t>(d) * sizeof(float);
  for (int64_t h = 0; h < Hkv; ++h) {
    const int64_t* pos = sel.head_positions(h);
    const int64_t b = sel.head_kept_count(h), row0 = begin[static_cast<size_t>(h)];
    const int64_t t0 = tail_from[static_cast<size_t>(h)], tail = layer.head_length(h) - t0;
    for (int64_t i = 0; i < b; ++i) {
      std::memcpy(k.data() + (row0 + i) * d, layer.k_at(h, pos[i]), row_bytes);
      std::memcpy(v.data() + (row0 + i) * d, layer.v_at(h, pos[i]), row_bytes);
    }
    if (tail > 0) {
      std::memcpy(k.data() + (row0 + b) * d, layer.k_at(h, t0), static_cast<size_t>(tail) * row_bytes);
      std::memcpy(v.data() + (row0 + b) * d, layer.v_at(h, t0), static_cast<size_t>(tail) * row_bytes);
    }
    if (layer.has_positions()) {
      for (int64_t i = 0; i < b; ++i) kept_pos[static_cast<size_t>(row0 + i)] = *layer.pos_at(h, pos[i]);
      for (int64_t i = 0; i < tail; ++i) kept_pos[static_cast<size_t>(row0 + b + i)] = *layer.pos_at(h, t0 + i);
    }
  }
  layer.pos.swap(kept_pos);
  layer.k.swap(k);  // the old buffers now live in k, v and are freed when they go out of scope below
  layer.v.swap(v);
  const bool uniform = std::all_of(kept.begin(), kept.end(), [&](int64_t n) { return n == kept[0]; });
  layer.length = *std::max_element(kept.begin(), kept.end());
  if (uniform) {
    layer.capacity = layer.length;
    layer.head_lengths.clear();
    layer.head_begin.clear();
  } else {
    layer.capacity = 0;
    layer.head_lengths = kept;
    layer.head_begin = begin;
  }
  std::vector<float>().swap(k);
  std::vector<float>().swap(v);
  std::vector<int32_t>().swap(kept_pos);
  rep.length_after = layer.length;
  rep.bytes_after = layer.bytes();
  return rep;
}

}  // namespace rkv
