// A layer of the KV cache stored by a codec (cache/codec.hpp): the packed entries of each KV head, and beside them a
// float32 tail (a LayerKV) of the newest entries -- KIVI's residual window and whatever decode appended since the
// last pack. Logically, KV head h holds its packed entries (oldest first) followed by its tail entries; positions
// travel with their rows in both parts.
//
//   encode:  pack_oldest(packed, tail) moves every entry of the tail except the newest `residual` (in whole key
//            units: KIVI packs keys `group` entries at a time) into the packed part; called once when a cell's cache
//            is quantized, and again after every decode step, so the tail never holds more than residual + one unit.
//   use:     unpack_layer(packed, tail, out) writes the whole layer as float32 into `out` (the layout of a LayerKV,
//            with room for `extra` appended entries per head): the attention of a decode step reads it, so the
//            float copy lives only while one layer runs (Workspace scratch), never in the cache.
//
// Bytes: packed key units + value rows + int32 positions, plus the tail's own bytes; nothing else is held.
//
// Thread rules: a PackedLayer belongs to one thread at a time, like its LayerKV.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cache/codec.hpp"
#include "cache/kv_cache.hpp"

namespace rkv {

/// The packed entries of one KV head.
struct PackedHead {
  std::vector<uint8_t> k;    ///< entries / quantum key units of codec_key_unit_bytes each
  std::vector<uint8_t> v;    ///< entries value rows of codec_value_row_bytes each
  std::vector<int32_t> pos;  ///< [entries] original positions (empty when the layer tracks none)
  int64_t entries = 0;
};

/// The packed part of one layer; `heads` empty: the layer is not quantized (all of it is the float tail).
struct PackedLayer {
  CodecSpec codec;
  int64_t head_dim = 0;
  std::vector<PackedHead> heads;  ///< [H_kv]
  bool positions = false;         ///< the layer tracks positions (PackedHead::pos filled)

  bool packed() const { return !heads.empty(); }
  /// Entries packed for KV head h (0 when the layer is not packed).
  int64_t entries(int64_t h) const { return packed() ? heads[static_cast<size_t>(h)].entries : 0; }
  /// Bytes held, with the vectors' reserved capacity (as LayerKV::bytes()).
  size_t bytes() const;
  /// Bytes of the packed entries: key units, value rows and positions.
  size_t bytes_in_use() const;
};

/// Starts packing a layer of `n_kv_heads` heads with `codec` (check_codec must have passed for head_dim): an empty
/// packed part; pack_oldest() fills it.
PackedLayer build_packed_layer(const CodecSpec& codec, int64_t n_kv_heads, int64_t head_dim);

/// Moves the oldest entries of every KV head of `tail` into `packed`: head h packs
///   n_h = floor(max(0, head_length(h) - residual) / quantum) * quantum
/// entries (quantum = codec_key_quantum), appended after what it already packed, and `tail` keeps only the rest
/// (reallocated exactly: uniform when every head keeps the same count, per head otherwise; room for growth is
/// dropped). A no-op when no head has a full unit to pack. rkv::InputError when the geometry differs.
void pack_oldest(PackedLayer& packed, LayerKV& tail);

/// The whole layer in float32: `out` receives, per KV head, the decoded packed entries followed by the tail's
/// entries (positions with them when the tail tracks positions), in the uniform layout when every head holds the
/// same count, else per head, with room for `extra` more entries per head. `out`'s buffers are reused (assigned, not
/// reallocated when large enough).
void unpack_layer(const PackedLayer& packed, const LayerKV& tail, int64_t extra, LayerKV& out);

/// Appends entries [first[h], first[h] + n) of every KV head h of `src` to the end of each head of `dst` (keys,
/// values and positions), growing dst (reserve_extra). `first` has H_kv entries. rkv::InputError for another
/// geometry or a range outside src's heads.
void append_entries(LayerKV& dst, const LayerKV& src, const std::vector<int64_t>& first, int64_t n);

}  // namespace rkv
