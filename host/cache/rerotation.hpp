// Key re-rotation of one layer's KV cache (compression.rerotate; kvpress KeyRerotationPress, FINCH, transformers
// SinkCache): after a compaction, the kept keys of each KV head are moved from their original positions to the
// contiguous positions 0 .. n_h - 1, as if the kept tokens had been the whole prompt.
//
// Formula (model/rope.hpp, rope_rerotate; llama.cpp#3825): entry i of head h, rotated at its stored position p_{h,i},
//   k_{h,i} <- R((i - p_{h,i}) inv_freq) k_{h,i},   p_{h,i} <- i,
// because RoPE rotations compose: R(i f) k = R((i - p) f) R(p f) k. Values are untouched (RoPE rotates only keys and
// queries). Positions ascend per head, so i <= p_{h,i} and the shift is never positive.
//
// Thread rules: rerotate_layer() mutates its layer; no other thread may touch that layer meanwhile.
#pragma once
#include <cstdint>
#include <vector>

#include "cache/kv_cache.hpp"

namespace rkv {

/// Re-rotates every entry of `layer` (either layout; entries 0 .. head_length(h) - 1 of every KV head h) to the
/// contiguous positions 0 .. head_length(h) - 1 and stores those positions: k[h, i] <- R((i - pos[h, i]) inv_freq)
/// k[h, i], pos[h, i] <- i (see the top of this file). `inv_freq`: the model's RoPE frequencies, double [head_dim / 2]
/// (Model::rope_inv_freq, radians per position). A head already at 0 .. n - 1 is left bit-identical. Keys are float32;
/// cos/sin of each shift are computed in double and rounded to float (rope_tables). Throws rkv::InputError naming
/// `layer_index` when the layer tracks no positions, its layout is inconsistent or inv_freq does not have head_dim / 2
/// entries; the layer is unchanged then.
void rerotate_layer(LayerKV& layer, const std::vector<double>& inv_freq, int64_t layer_index);

}  // namespace rkv
