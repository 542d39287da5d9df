// The per-layer KV cache: keys (after RoPE, at their original positions) and values, stored per KV head.
//
// Layout of one layer: k and v are float32 [n_kv_heads, capacity, head_dim], row-major; positions 0..length-1 of
// every head are valid. After compression each layer has its own length b_l (all KV heads of a layer keep the same
// count, different positions per head) and its storage is reallocated at that size (DESIGN.md "Budget semantics").
// Decoding appends at index `length` with the next absolute position, which the model tracks, not the cache.
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

  float* k_at(int64_t head, int64_t pos) { return k.data() + (head * capacity + pos) * head_dim; }
  float* v_at(int64_t head, int64_t pos) { return v.data() + (head * capacity + pos) * head_dim; }
  const float* k_at(int64_t head, int64_t pos) const { return k.data() + (head * capacity + pos) * head_dim; }
  const float* v_at(int64_t head, int64_t pos) const { return v.data() + (head * capacity + pos) * head_dim; }
  /// Bytes held by this layer's storage (keys and values).
  size_t bytes() const { return (k.capacity() + v.capacity()) * sizeof(float); }
};

/// A whole model's cache: one LayerKV per layer.
struct KVCache {
  std::vector<LayerKV> layers;
  size_t bytes() const {
    size_t b = 0;
    for (const auto& l : layers) b += l.bytes();
    return b;
  }
};

/// Allocate an empty cache: every layer [n_kv_heads, capacity, head_dim], length 0.
KVCache build_kv_cache(int64_t n_layers, int64_t n_kv_heads, int64_t head_dim, int64_t capacity);

/// Grow one layer's capacity to at least `capacity` positions, keeping its contents (used by decode).
void reserve_layer(LayerKV& layer, int64_t capacity);

}  // namespace rkv
