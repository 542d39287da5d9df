// Physical compaction of one layer's KV cache to the positions a Selection keeps (docs/ARCHITECTURE.md "Budget semantics":
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
  int64_t length_before = 0;  ///< LayerKV::length before (T + tail; the longest head of a per-head layer)
  int64_t length_after = 0;   ///< LayerKV::length after (b_l + tail, or unchanged when untouched)
  size_t bytes_before = 0;    ///< LayerKV::bytes() before (keys + values + positions, including spare capacity)
  size_t bytes_after = 0;     ///< LayerKV::bytes() after: exactly sum_h (b_{l,h} + tail_h) x (2 d x 4 + 4) bytes
};

/// Compacts `layer` in place: for every KV head h, keys, values and positions of the entries sel.head_positions(h)
/// (cache indices, ascending, below T_h = min(T, head_length(h))) become the head's first rows, followed by the
/// head's uncompressed tail T_h .. head_length(h) - 1 (entries not eligible for compression, e.g. the question when
/// only the context is compressed, or tokens appended since); the storage is reallocated at exactly the rows kept
/// (the old buffers are freed before return). When every head keeps the same count the layer is uniform
/// [H_kv, b_l + tail, d] (capacity = length); otherwise it takes the per-head layout (LayerKV::head_lengths,
/// head_begin). Keys keep their RoPE, so decoding continues at the next absolute position whatever was dropped. An
/// untouched selection leaves the layer as it is.
/// Throws rkv::InputError when the layer's layout is inconsistent, it holds fewer than the selection's T entries or a
/// different number of KV heads, a head keeps no entry, or a selected index is outside [0, T_h) or not ascending; the
/// layer is unchanged then.
CompactionReport compact_layer(LayerKV& layer, const Selection& sel);

}  // namespace rkv
