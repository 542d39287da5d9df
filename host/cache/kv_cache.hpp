// The per-layer KV cache: keys (after RoPE, at their original positions), values, and the original position of every
// entry, stored per KV head (DESIGN.md "The cache").
//
// Layout of one layer: k and v are float32 [n_kv_heads, capacity, head_dim], pos is int32 [n_kv_heads, capacity],
// row-major; entries 0..length-1 of every head are valid and their positions ascend. After compression each layer has
// its own length b_l (all KV heads of a layer keep the same count, different positions per head) and its storage is
// reallocated at that size (DESIGN.md "Budget semantics"); positions travel with their keys and values through
// compaction and decode appends. A LayerKV built by hand without positions (pos empty) is allowed: operations then
// leave pos empty.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace rkv {

struct LayerKV {
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t capacity = 0;  ///< positions allocated per head
  int64_t length = 0;    ///< positions in use per head (<= capacity)
  std::vector<float> k;  ///< [n_kv_heads, capacity, head_dim]
  std::vector<float> v;  ///< [n_kv_heads, capacity, head_dim]
  std::vector<int32_t> pos;  ///< [n_kv_heads, capacity] original token position of each entry; empty: not tracked

  float* k_at(int64_t head, int64_t pos) { return k.data() + (head * capacity + pos) * head_dim; }
  float* v_at(int64_t head, int64_t pos) { return v.data() + (head * capacity + pos) * head_dim; }
  const float* k_at(int64_t head, int64_t pos) const { return k.data() + (head * capacity + pos) * head_dim; }
  const float* v_at(int64_t head, int64_t pos) const { return v.data() + (head * capacity + pos) * head_dim; }
  int32_t* pos_at(int64_t head, int64_t i) { return pos.data() + head * capacity + i; }
  const int32_t* pos_at(int64_t head, int64_t i) const { return pos.data() + head * capacity + i; }
  bool has_positions() const { return !pos.empty(); }
  /// Bytes held by this layer's storage: keys, values and positions (what results report as kv_bytes).
  size_t bytes() const { return (k.capacity() + v.capacity()) * sizeof(float) + pos.capacity() * sizeof(int32_t); }
  /// Bytes of the entries in use: length x H_kv x (key and value rows + position), without capacity reserved for
  /// growth (equal to bytes() when the storage is exactly sized, as after prefill and compaction).
  size_t bytes_in_use() const {
    return static_cast<size_t>(length * n_kv_heads) *
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

/// Grow one layer's capacity to at least `capacity` positions, keeping its contents (used by decode).
void reserve_layer(LayerKV& layer, int64_t capacity);

}  // namespace rkv
