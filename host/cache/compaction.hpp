// Physical compaction of one layer's KV cache to the positions a Selection keeps (DESIGN.md "Budget semantics":
// the cache of each layer is compacted to [H_kv, b_l, d]; memory is really freed).
//
// Thread rules: compact_layer() mutates its layer; no other thread may touch that layer meanwhile.
#pragma once
#include <cstddef>
#include <cstdint>

#include "cache/kv_cache.hpp"
#include "cache/selection.hpp"

namespace rkv {

/// What a compaction did to one layer.
struct CompactionReport {
  int64_t layer = 0;
  bool untouched = false;     ///< the selection kept everything (b_l >= T); the layer was not modified
  int64_t length_before = 0;  ///< positions per KV head before (T + tail)
  int64_t length_after = 0;   ///< positions per KV head after (b_l + tail, or unchanged when untouched)
  size_t bytes_before = 0;    ///< LayerKV::bytes() before (keys + values storage, including spare capacity)
  size_t bytes_after = 0;     ///< LayerKV::bytes() after: exactly 2 * H_kv * b_l * d * 4 when compacted
};

/// Compacts `layer` in place: for every KV head h, keys and values of the positions sel.head_positions(h) (in that
/// order, ascending) become rows 0 .. b_l - 1, followed by the layer's uncompressed tail T .. length - 1 (positions
/// not eligible for compression, e.g. the question when only the context is compressed; usually none), and the
/// storage is reallocated at exactly [H_kv, b_l + tail, d] (capacity = length; the old buffers are freed before
/// return). Keys keep their RoPE, so decoding continues at the next absolute position whatever was dropped. An
/// untouched selection leaves the layer as it is.
/// Throws rkv::InputError when the layer holds fewer than the selection's T positions or a different number of KV
/// heads, or a selected position is outside [0, T); the layer is unchanged then.
CompactionReport compact_layer(LayerKV& layer, const Selection& sel);

}  // namespace rkv
