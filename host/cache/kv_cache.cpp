#include "cache/kv_cache.hpp"

#include <algorithm>
#include <cstring>

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

void reserve_layer(LayerKV& layer, int64_t capacity) {
  if (capacity <= layer.capacity) return;
  std::vector<float> k(static_cast<size_t>(layer.n_kv_heads * capacity * layer.head_dim), 0.0f);
  std::vector<float> v(k.size(), 0.0f);
  for (int64_t h = 0; h < layer.n_kv_heads && layer.length > 0; ++h) {  // nothing to copy from an empty cache
    const size_t n = static_cast<size_t>(layer.length * layer.head_dim);
    std::memcpy(k.data() + h * capacity * layer.head_dim, layer.k_at(h, 0), n * sizeof(float));
    std::memcpy(v.data() + h * capacity * layer.head_dim, layer.v_at(h, 0), n * sizeof(float));
  }
  if (layer.has_positions()) {
    std::vector<int32_t> pos(static_cast<size_t>(layer.n_kv_heads * capacity), 0);
    for (int64_t h = 0; h < layer.n_kv_heads && layer.length > 0; ++h)
      std::memcpy(pos.data() + h * capacity, layer.pos_at(h, 0), static_cast<size_t>(layer.length) * sizeof(int32_t));
    layer.pos.swap(pos);
  }
  layer.k.swap(k);
  layer.v.swap(v);
  layer.capacity = capacity;
}

}  // namespace rkv
