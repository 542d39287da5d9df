// Compression of one layer's device cache: top-k selection with protected positions and physical compaction, with
// exactly the semantics (and results) of the host functions rkv::select_positions (cache/selection.hpp) and
// rkv::compact_layer (cache/compaction.hpp).
//
// Thread rules: as the Context (context.hpp); compact_layer mutates its layer.
#pragma once
#include <cstdint>

#include "backend/cuda/device_cache.hpp"
#include "cache/compaction.hpp"
#include "cache/selection.hpp"

namespace rkv::RKV_CUDA_NS {

/// rkv::select_positions with the scores on the device (float32 [n_kv_heads, T], device pointer; may be null when
/// budget >= T): the protected positions in priority order up to b_l (a warning when b_l is below the protected
/// count), then the best other positions per KV head by (score descending, position ascending), ascending per head.
/// The kept positions are computed on the device (kernels::select_topk) and copied into the returned Selection.
/// Throws rkv::InputError as the host function does (b_l < 1, n_kv_heads < 1, T < 1, a usable score not finite --
/// naming layer, head and position).
Selection select_positions(Context& ctx, const float* scores, int64_t n_kv_heads, int64_t prefix_tokens,
                           int64_t budget, const ProtectedSpec& spec, int64_t layer);

/// rkv::compact_layer on the device: for every KV head h, keys, values and positions of sel.head_positions(h)
/// (ascending indices below the head's length) become that head's rows of new storage holding exactly the entries
/// kept (one gather per KV head): uniform [H_kv, b_l, d] (capacity = length = b_l) when every head keeps the same
/// count, the per-head layout otherwise; the old buffers are freed before return. An untouched selection leaves the
/// layer as it is. Throws rkv::InputError when the layer does not hold exactly the selection's T positions (its
/// longest head), has a different number of KV heads, a head keeps nothing, or an index is outside [0, head length)
/// or not ascending; the layer is unchanged then. bytes_before / bytes_after report DeviceLayerKV::bytes().
CompactionReport compact_layer(Context& ctx, DeviceLayerKV& layer, const Selection& sel);

}  // namespace rkv::RKV_CUDA_NS
