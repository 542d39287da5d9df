#include "cache/rerotation.hpp"

#include <string>

#include "core/errors.hpp"
#include "model/rope.hpp"

namespace rkv {

void rerotate_layer(LayerKV& layer, const std::vector<double>& inv_freq, int64_t layer_index) {
  const std::string where = "layer " + std::to_string(layer_index);
  check_layer_layout(layer, layer_index);
  if (!layer.has_positions())
    throw InputError(where + ": key re-rotation needs each entry's position, and this cache tracks none");
  const int64_t half = layer.head_dim / 2;
  if (static_cast<int64_t>(inv_freq.size()) != half || layer.head_dim % 2 != 0)
    throw InputError(where + ": key re-rotation needs head_dim / 2 = " + std::to_string(half) +
                     " RoPE frequencies, got " + std::to_string(inv_freq.size()));
  std::vector<int64_t> shift;
  std::vector<float> cs, sn;
  for (int64_t h = 0; h < layer.n_kv_heads; ++h) {
    const int64_t n = layer.head_length(h);
    shift.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) shift[static_cast<size_t>(i)] = i - *layer.pos_at(h, i);  // new - old position
    rope_tables(inv_freq, shift.data(), n, cs, sn);
    for (int64_t i = 0; i < n; ++i) {
      rope_rotate_half(layer.k_at(h, i), half, cs.data() + i * half, sn.data() + i * half);
      *layer.pos_at(h, i) = static_cast<int32_t>(i);
    }
  }
}

}  // namespace rkv
