// A layer of the KV cache stored by a codec (cache/codec.hpp): the packed entries of each KV head, and beside them a
// float32 tail (a LayerKV) of the newest entries -- KIVI's residual window and whatever decode appended since the
// last pack. Logically, KV head h holds its packed entries (oldest first) followed by its tail entries; positions
// travel with their rows in both parts.
//
//   encode:  pack_oldest(packed, tail) moves every entry of the tail except the newest `residual` (in whole key
//            units: KIVI packs keys `group` entries at a time) into the packed part; called once when a cell's cache
//            is quantized, and again after every decode step, so the tail never holds more than residual + one unit.
//   classes: pack_classes(packed, tail, codecs, entry_class) first moves the entries a per-token precision plan
//            (cache/token_bits.hpp) gives a class of their own into that class's packed heads (fixed from then on),
//            then packs the rest as pack_oldest does; decode's new entries always join the base codec.
//   use:     attention reads the codes in place, a tile at a time (backend/cpu/attended_kv.hpp: entries numbered as
//            unpack_layer numbers them). unpack_layer(packed, tail, out) writes the whole layer as float32 into `out`
//            (the layout of a LayerKV, with room for `extra` appended entries per head): for download_layer and the
//            CUDA backend's attention, never kept in the cache.
//
// Bytes: packed key units + value rows + int32 positions, plus the tail's own bytes; nothing else is held.
//
// Thread rules: a PackedLayer belongs to one thread at a time, like its LayerKV.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
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

/// A precision class of a layer (cache/token_bits.hpp): entries packed by their own codec, fixed after encoding.
struct PackedClass {
  CodecSpec codec;
  std::vector<PackedHead> heads;  ///< [H_kv]
};

/// The packed part of one layer; `heads` empty: the layer is not quantized (all of it is the float tail).
struct PackedLayer {
  CodecSpec codec;
  int64_t head_dim = 0;
  std::vector<PackedHead> heads;  ///< [H_kv] the base codec's entries
  std::vector<PackedClass> classes;  ///< token precision classes, top first (empty: one precision)
  bool positions = false;         ///< the layer tracks positions (PackedHead::pos filled)

  bool packed() const { return !heads.empty(); }
  /// Entries packed for KV head h over the classes and the base codec (0 when the layer is not packed).
  int64_t entries(int64_t h) const;
  /// Bytes held, with the vectors' reserved capacity (as LayerKV::bytes()).
  size_t bytes() const;
  /// Bytes of the packed entries: key units, value rows and positions.
  size_t bytes_in_use() const;
  /// The codec and packed heads of every part in unpack order: the classes, top first, then the base codec.
  std::vector<std::pair<const CodecSpec*, const std::vector<PackedHead>*>> parts() const;
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

/// Encodes a layer with token precision classes: every entry of `tail` whose class in `entry_class` (flat over the
/// KV heads, head_length(h) entries of head h in order; 0 = base, c = codecs[c - 1]) is not 0 is packed into
/// packed.classes[c - 1] (in the tail's order, positions with it), the tail keeps the class-0 entries, and
/// pack_oldest() packs those as usual. `packed` must be fresh (build_packed_layer, no entries); `codecs` passed
/// check_codec. An empty entry_class is all base: pack_oldest() alone. rkv::InputError for another geometry, an
/// entry_class of another length, or a class above codecs.size().
void pack_classes(PackedLayer& packed, LayerKV& tail, const std::vector<CodecSpec>& codecs,
                  const std::vector<uint8_t>& entry_class);

/// The whole layer in float32: `out` receives, per KV head, the decoded packed entries (the classes', top first, then
/// the base codec's) followed by the tail's
/// entries (positions with them when the tail tracks positions), in the uniform layout when every head holds the
/// same count, else per head, with room for `extra` more entries per head. `out`'s buffers are reused (assigned, not
/// reallocated when large enough).
void unpack_layer(const PackedLayer& packed, const LayerKV& tail, int64_t extra, LayerKV& out);

/// Appends entries [first[h], first[h] + n) of every KV head h of `src` to the end of each head of `dst` (keys,
/// values and positions), growing dst (reserve_extra). `first` has H_kv entries. rkv::InputError for another
/// geometry or a range outside src's heads.
void append_entries(LayerKV& dst, const LayerKV& src, const std::vector<int64_t>& first, int64_t n);

}  // namespace rkv
