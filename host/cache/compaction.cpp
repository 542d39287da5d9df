#include "cache/compaction.hpp"

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
  const int64_t b = sel.kept, d = layer.head_dim, Hkv = layer.n_kv_heads;
  if (b < 1 || static_cast<int64_t>(sel.positions.size()) != Hkv * b)
    throw InputError(where + ": selection holds " + str(static_cast<int64_t>(sel.positions.size())) +
                     " positions, expected H_kv * b_l = " + str(Hkv * b));
  for (int64_t p : sel.positions)
    if (p < 0 || p >= sel.prefix_tokens)
      throw InputError(where + ": selected position " + str(p) + " is outside [0, " + str(sel.prefix_tokens) + ")");

  const int64_t tail = layer.length - sel.prefix_tokens, n = b + tail;
  std::vector<float> k(static_cast<size_t>(Hkv * n * d)), v(k.size());
  std::vector<int32_t> kept_pos(layer.has_positions() ? static_cast<size_t>(Hkv * n) : 0);
  const size_t row_bytes = static_cast<size_t>(d) * sizeof(float);
  for (int64_t h = 0; h < Hkv; ++h) {
    const int64_t* pos = sel.head_positions(h);
    for (int64_t i = 0; i < b; ++i) {
      std::memcpy(k.data() + (h * n + i) * d, layer.k_at(h, pos[i]), row_bytes);
      std::memcpy(v.data() + (h * n + i) * d, layer.v_at(h, pos[i]), row_bytes);
    }
    if (tail > 0) {
      std::memcpy(k.data() + (h * n + b) * d, layer.k_at(h, sel.prefix_tokens), static_cast<size_t>(tail) * row_bytes);
      std::memcpy(v.data() + (h * n + b) * d, layer.v_at(h, sel.prefix_tokens), static_cast<size_t>(tail) * row_bytes);
    }
    if (layer.has_positions()) {
      for (int64_t i = 0; i < b; ++i) kept_pos[static_cast<size_t>(h * n + i)] = *layer.pos_at(h, pos[i]);
      for (int64_t i = 0; i < tail; ++i)
        kept_pos[static_cast<size_t>(h * n + b + i)] = *layer.pos_at(h, sel.prefix_tokens + i);
    }
  }
  layer.pos.swap(kept_pos);
  layer.k.swap(k);  // the old buffers now live in k, v and are freed when they go out of scope below
  layer.v.swap(v);
  layer.capacity = n;
  layer.length = n;
  std::vector<float>().swap(k);
  std::vector<float>().swap(v);
  std::vector<int32_t>().swap(kept_pos);
  rep.length_after = n;
  rep.bytes_after = layer.bytes();
  return rep;
}

}  // namespace rkv
