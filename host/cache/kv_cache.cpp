#include "cache/kv_cache.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/errors.hpp"

namespace rkv {

KVCache build_kv_cache(int64_t n_layers, int64_t n_kv_heads, int64_t head_dim, int64_t capacity) {
  KVCache cache;
  cache.layers.resize(static_cast<size_t>(n_layers));
  for (auto& l : cache.layers) {
    l.n_kv_heads = n_kv_heads;
    l.head_dim = head_dim;
    l.capacity = capacity;
    l.length = 0;
    l.k.assign(static_cast<size_t>(n_kv_heads * capacity * head_dim), 0.0f);
    l.v.assign(static_cast<size_t>(n_kv_heads * capacity * head_dim), 0.0f);
    l.pos.assign(static_cast<size_t>(n_kv_heads * capacity), 0);
  }
  return cache;
}

namespace {

/// Moves every head's entries into new storage where head h's region starts at row new_begin[h] (regions must hold
/// the entries), keeping the layout fields as they are; the caller sets capacity/head_begin.
void relayout(LayerKV& layer, const std::vector<int64_t>& new_begin, int64_t total_rows) {
  const int64_t d = layer.head_dim;
  std::vector<float> k(static_cast<size_t>(total_rows * d), 0.0f), v(k.size(), 0.0f);
  std::vector<int32_t> pos(layer.has_positions() ? static_cast<size_t>(total_rows) : 0, 0);
  for (int64_t h = 0; h < layer.n_kv_heads; ++h) {
    const int64_t n = layer.head_length(h), row = new_begin[static_cast<size_t>(h)];
    if (n == 0) continue;  // nothing to copy (and an empty layer may have no storage at all)
    std::memcpy(k.data() + row * d, layer.k_at(h, 0), static_cast<size_t>(n * d) * sizeof(float));
    std::memcpy(v.data() + row * d, layer.v_at(h, 0), static_cast<size_t>(n * d) * sizeof(float));
    if (layer.has_positions())
      std::memcpy(pos.data() + row, layer.pos_at(h, 0), static_cast<size_t>(n) * sizeof(int32_t));
  }
  layer.k.swap(k);
  layer.v.swap(v);
  layer.pos.swap(pos);
}

}  // namespace

LayerKV build_exact_layer(int64_t n_kv_heads, int64_t head_dim, int64_t length,
                          const std::vector<int64_t>& head_lengths, bool positions) {
  LayerKV out;
  out.n_kv_heads = n_kv_heads;
  out.head_dim = head_dim;
  out.length = length;
  if (head_lengths.empty()) {
    out.capacity = length;
  } else {
    out.head_lengths = head_lengths;
    out.head_begin.assign(static_cast<size_t>(n_kv_heads) + 1, 0);
    for (int64_t h = 0; h < n_kv_heads; ++h)
      out.head_begin[static_cast<size_t>(h) + 1] = out.head_begin[static_cast<size_t>(h)] + out.head_length(h);
  }
  out.k.assign(static_cast<size_t>(out.entries() * head_dim), 0.0f);
  out.v.assign(out.k.size(), 0.0f);
  if (positions) out.pos.assign(static_cast<size_t>(out.entries()), 0);
  return out;
}

void reserve_layer(LayerKV& layer, int64_t capacity) {
  if (layer.per_head()) {
    reserve_extra(layer, capacity - layer.length);
    return;
  }
  if (capacity <= layer.capacity) return;
  std::vector<int64_t> begin(static_cast<size_t>(layer.n_kv_heads));
  for (int64_t h = 0; h < layer.n_kv_heads; ++h) begin[static_cast<size_t>(h)] = h * capacity;
  relayout(layer, begin, layer.n_kv_heads * capacity);
  layer.capacity = capacity;
}

int64_t growth_rows(int64_t length, int64_t extra) { return std::max(extra, std::min<int64_t>(length / 2, 256)); }

void reserve_extra(LayerKV& layer, int64_t extra) {
  if (extra <= 0) return;
  if (!layer.per_head()) {
    if (layer.length + extra > layer.capacity) reserve_layer(layer, layer.length + growth_rows(layer.length, extra));
    return;
  }
  bool fits = true;
  for (int64_t h = 0; h < layer.n_kv_heads; ++h) fits = fits && layer.head_length(h) + extra <= layer.head_capacity(h);
  if (fits) return;
  const int64_t spare = growth_rows(layer.length, extra);
  std::vector<int64_t> begin(static_cast<size_t>(layer.n_kv_heads) + 1, 0);
  for (int64_t h = 0; h < layer.n_kv_heads; ++h)
    begin[static_cast<size_t>(h) + 1] = begin[static_cast<size_t>(h)] + layer.head_length(h) + spare;
  relayout(layer, begin, begin.back());
  layer.head_begin.swap(begin);
}

void truncate_layer(LayerKV& layer, int64_t length) {
  if (layer.per_head()) throw InputError("truncate: the layer holds per-head lengths; only a uniform layer is cut");
  if (length < 0 || length > layer.length)
    throw InputError("truncate: length " + std::to_string(length) + " is outside [0, " + std::to_string(layer.length) +
                     "]");
  layer.length = length;
  if (layer.capacity == length) return;
  std::vector<int64_t> begin(static_cast<size_t>(layer.n_kv_heads));
  for (int64_t h = 0; h < layer.n_kv_heads; ++h) begin[static_cast<size_t>(h)] = h * length;
  relayout(layer, begin, layer.n_kv_heads * length);
  layer.capacity = length;
}

void check_layer_layout(const LayerKV& l, int64_t layer_index) {
  const std::string where = "layer " + std::to_string(layer_index) + ": inconsistent KV cache";
  if (l.n_kv_heads < 0 || l.head_dim < 0 || l.length < 0) throw InputError(where + " (negative sizes)");
  int64_t rows = 0;
  if (l.per_head()) {
    if (static_cast<int64_t>(l.head_lengths.size()) != l.n_kv_heads ||
        static_cast<int64_t>(l.head_begin.size()) != l.n_kv_heads + 1 || l.head_begin[0] != 0)
      throw InputError(where + " (per-head lengths of " + std::to_string(l.head_lengths.size()) + " heads, " +
                       std::to_string(l.n_kv_heads) + " KV heads)");
    int64_t longest = 0;
    for (int64_t h = 0; h < l.n_kv_heads; ++h) {
      if (l.head_capacity(h) < 0 || l.head_length(h) < 0 || l.head_length(h) > l.head_capacity(h))
        throw InputError(where + " (head " + std::to_string(h) + " holds " + std::to_string(l.head_length(h)) +
                         " entries in " + std::to_string(l.head_capacity(h)) + " rows)");
      longest = std::max(longest, l.head_length(h));
    }
    if (longest != l.length)
      throw InputError(where + " (length " + std::to_string(l.length) + " is not the longest head, " +
                       std::to_string(longest) + ")");
    rows = l.head_begin.back();
  } else {
    if (l.length > l.capacity)
      throw InputError(where + " (length " + std::to_string(l.length) + ", capacity " + std::to_string(l.capacity) +
                       ")");
    rows = l.n_kv_heads * l.capacity;
  }
  if (l.k.size() < static_cast<size_t>(rows * l.head_dim) || l.v.size() < static_cast<size_t>(rows * l.head_dim) ||
      (l.has_positions() && l.pos.size() < static_cast<size_t>(rows)))
    throw InputError(where + " (storage smaller than " + std::to_string(rows) + " rows)");
}

}  // namespace rkv
