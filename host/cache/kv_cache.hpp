// The per-layer KV cache: keys (after RoPE, at their original positions), values, and the original position of every
// entry, stored per KV head (docs/ARCHITECTURE.md "The cache").
//
// Two layouts of one layer, both one buffer per tensor, row-major, float32 rows of head_dim:
//  - uniform (every head holds `length` entries): k and v are [n_kv_heads, capacity, head_dim], pos is
//    [n_kv_heads, capacity]; head h's rows start at h * capacity. This is the layout after prefill and after a
//    compaction that keeps the same count in every head.
//  - per head (AdaKV-style budgets: head h holds its own head_lengths[h] entries): head h's rows are
//    [head_begin[h], head_begin[h + 1]) of k, v and pos, so the storage is ragged and physically compact (after
//    compaction exactly sum_h b_{l,h} rows; no padding, no sentinel keys). `length` is then the largest head length.
// In both, entries 0..head_length(h)-1 of head h are valid and their positions ascend; positions travel with their
// keys and values through compaction and decode appends. A LayerKV built by hand without positions (pos empty) is
// allowed: operations then leave pos empty.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace rkv {

struct LayerKV {
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t capacity = 0;  ///< uniform layout: rows allocated per head (unused by the per-head layout)
  int64_t length = 0;    ///< uniform layout: entries in use per head (<= capacity); per head: max_h head_lengths[h]
  std::vector<float> k;  ///< uniform: [n_kv_heads, capacity, head_dim]; per head: [head_begin.back(), head_dim]
  std::vector<float> v;  ///< as k
  std::vector<int32_t> pos;  ///< original token position of each entry, rows as k; empty: not tracked
  std::vector<int64_t> head_lengths;  ///< per-head layout: [n_kv_heads] entries in use; empty: uniform layout
  std::vector<int64_t> head_begin;    ///< per-head layout: [n_kv_heads + 1] first row of each head's region

  bool per_head() const { return !head_lengths.empty(); }
  /// Entries held by KV head h.
  int64_t head_length(int64_t h) const { return per_head() ? head_lengths[static_cast<size_t>(h)] : length; }
  /// Row of k/v/pos where head h's entries start.
  int64_t head_row(int64_t h) const { return per_head() ? head_begin[static_cast<size_t>(h)] : h * capacity; }
  /// Rows reserved for head h (entries in use plus room to append).
  int64_t head_capacity(int64_t h) const {
    return per_head() ? head_begin[static_cast<size_t>(h) + 1] - head_begin[static_cast<size_t>(h)] : capacity;
  }
  /// Entries held over all KV heads: sum_h head_length(h).
  int64_t entries() const {
    if (!per_head()) return length * n_kv_heads;
    int64_t n = 0;
    for (int64_t l : head_lengths) n += l;
    return n;
  }

  float* k_at(int64_t head, int64_t i) { return k.data() + (head_row(head) + i) * head_dim; }
  float* v_at(int64_t head, int64_t i) { return v.data() + (head_row(head) + i) * head_dim; }
  const float* k_at(int64_t head, int64_t i) const { return k.data() + (head_row(head) + i) * head_dim; }
  const float* v_at(int64_t head, int64_t i) const { return v.data() + (head_row(head) + i) * head_dim; }
  int32_t* pos_at(int64_t head, int64_t i) { return pos.data() + head_row(head) + i; }
  const int32_t* pos_at(int64_t head, int64_t i) const { return pos.data() + head_row(head) + i; }
  bool has_positions() const { return !pos.empty(); }
  /// Bytes held by this layer's storage: keys, values and positions (what results report as kv_bytes).
  size_t bytes() const { return (k.capacity() + v.capacity()) * sizeof(float) + pos.capacity() * sizeof(int32_t); }
  /// Bytes of the entries in use: sum_h head_length(h) x (key and value rows + position), without room reserved for
  /// growth (equal to bytes() when the storage is exactly sized, as after prefill and compaction).
  size_t bytes_in_use() const {
    return static_cast<size_t>(entries()) *
           (2 * static_cast<size_t>(head_dim) * sizeof(float) + (has_positions() ? sizeof(int32_t) : 0));
  }
};

/// A whole model's cache: one LayerKV per layer.
struct KVCache {
  std::vector<LayerKV> layers;
  size_t bytes() const {
    size_t b = 0;
    for (const auto& l : layers) b += l.bytes();
    return b;
  }
  size_t bytes_in_use() const {
    size_t b = 0;
    for (const auto& l : layers) b += l.bytes_in_use();
    return b;
  }
};

/// Allocate an empty cache: every layer [n_kv_heads, capacity, head_dim] with positions, length 0.
KVCache build_kv_cache(int64_t n_layers, int64_t n_kv_heads, int64_t head_dim, int64_t capacity);

/// An exactly sized, zeroed layer with the given layout: `length` entries per KV head (capacity = length) when
/// `head_lengths` is empty, else the per-head layout with head h's region exactly head_lengths[h] rows. k and v hold
/// entries() x head_dim floats, pos entries() positions when `positions` (else empty). What a copy of a layer in the
/// same layout (Backend::download_layer) is written into.
LayerKV build_exact_layer(int64_t n_kv_heads, int64_t head_dim, int64_t length,
                          const std::vector<int64_t>& head_lengths, bool positions);

/// Grow one uniform layer's capacity to at least `capacity` positions per head, keeping its contents.
/// A per-head layer grows so that every head has room for (capacity - length) more entries.
void reserve_layer(LayerKV& layer, int64_t capacity);

/// Rows of room a layer of `length` entries per head grows by when `extra` more do not fit: at least `extra`, else
/// half the length (amortising the copies of a short cache) but never more than 256 rows (a long prompt's cache is not
/// grown by half its size for a short answer: at T = 32K that would be 16K rows per head held until the cache is
/// freed). Shared by the CPU and CUDA caches.
int64_t growth_rows(int64_t length, int64_t extra);

/// Makes sure every KV head of `layer` can take `extra` more entries (decode appends one entry to every head per
/// token), growing by growth_rows(). Keeps the layout (uniform or per head) and every entry.
void reserve_extra(LayerKV& layer, int64_t extra);

/// Keeps the first `length` entries of every KV head of a uniform layer (those appended later are dropped) and sizes
/// its storage to exactly `length` rows per head (capacity = length), copying the layer once when it had more room:
/// the layer as it was before tokens were appended to it. rkv::InputError for a per-head layer or a `length` outside
/// [0, layer.length].
void truncate_layer(LayerKV& layer, int64_t length);

/// Checks the layout invariants (sizes of k, v, pos and of the per-head vectors; lengths within capacities;
/// length = max head length). Throws rkv::InputError naming `layer_index` when they do not hold.
void check_layer_layout(const LayerKV& layer, int64_t layer_index);

}  // namespace rkv
