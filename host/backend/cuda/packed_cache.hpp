// A layer a codec stores, on the device (Backend::encode_layer; cache/packed_kv.hpp is the host version and the
// format's reference): per KV head the packed key units, value rows and positions in device memory; the layer's
// float tail (KIVI's residual, the entries decode appended since the last pack) stays a DeviceLayerKV in the cache.
//
//   pack:    entries leave the tail in whole key units; their rows come to the host (a few rows per decode step),
//            the host codec packs them (rkv::pack_oldest, so both backends hold the same bytes) and the packed bytes
//            are appended on the device;
//   unpack:  kernels::dequantize_kv writes the packed entries of each head into a device scratch layer, followed by
//            the tail's rows: what the attention of an extend reads, one layer at a time.
//
// Thread rules: as the owning Context (context.hpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cuda/device_cache.hpp"
#include "cache/codec.hpp"

namespace rkv::RKV_CUDA_NS {

/// The packed entries of one KV head on the device; the buffers may hold room beyond the bytes in use.
struct DevicePackedHead {
  DeviceBuffer k, v, pos;       ///< key units, value rows, int32 positions
  size_t k_used = 0, v_used = 0;  ///< bytes in use of k and v
  int64_t entries = 0;
};

/// A token precision class on the device (rkv::PackedClass): entries of its own codec, fixed after encoding.
struct DevicePackedClass {
  CodecSpec codec;
  std::vector<DevicePackedHead> heads;  ///< [H_kv]
};

struct DevicePackedLayer {
  CodecSpec codec;
  int64_t head_dim = 0;
  bool positions = false;
  std::vector<DevicePackedHead> heads;  ///< [H_kv] the base codec's entries; empty: the layer is not packed
  std::vector<DevicePackedClass> classes;  ///< token precision classes, top first (empty: one precision)

  bool packed() const { return !heads.empty(); }
  /// Entries of head h over the classes and the base codec.
  int64_t entries(int64_t h) const {
    if (!packed()) return 0;
    int64_t n = heads[static_cast<size_t>(h)].entries;
    for (const DevicePackedClass& c : classes) n += c.heads[static_cast<size_t>(h)].entries;
    return n;
  }
  /// Device bytes held (buffer sizes, with room reserved for growth).
  size_t bytes() const;
  /// Bytes of the packed entries: key units, value rows and positions.
  size_t bytes_in_use() const;
};

/// Encodes `tail` (the whole layer until now) with `codec`: the entries `entry_class` gives a token class (c >= 1:
/// `classes[c - 1]`; flat over the heads as Backend::encode_layer_classes; empty: none) are packed into that class,
/// the others but the newest codec.residual (in whole key units) with `codec`, and `tail` keeps the rest. The host
/// codec packs (rkv::pack_classes), so the bytes equal the CPU backend's for the same float32 entries.
/// rkv::InputError as rkv::pack_classes.
DevicePackedLayer encode_device_layer(Context& ctx, DeviceLayerKV& tail, const CodecSpec& codec,
                                      const std::vector<CodecSpec>& classes, const std::vector<uint8_t>& entry_class);

/// rkv::pack_oldest on the device layer: when some head's tail holds a whole unit beyond the residual, the tail comes
/// to the host, the oldest units are packed there and appended on the device, and the rest goes back as the tail.
void pack_oldest(Context& ctx, DevicePackedLayer& packed, DeviceLayerKV& tail);

/// The whole layer in the cache's dtype into `out`, rkv::unpack_layer's layout: per KV head the packed entries
/// decoded (the classes', top first, then the base codec's), then the tail's, with room for `extra` more entries per head; positions with them. `out`'s buffers are
/// reused when large enough (DeviceBuffer::ensure), so a decode step allocates nothing.
void unpack_layer(Context& ctx, const DevicePackedLayer& packed, const DeviceLayerKV& tail, int64_t extra,
                  DeviceLayerKV& out);

/// Appends rows [first[h], first[h] + n) of every KV head of `src` to the end of each head of `dst` (device copies,
/// growing dst). rkv::InputError for another geometry.
void append_entries(Context& ctx, DeviceLayerKV& dst, const DeviceLayerKV& src, const std::vector<int64_t>& first,
                    int64_t n);

/// A device copy of `packed` (for clone), with the buffers exactly at their bytes in use.
DevicePackedLayer copy_packed(Context& ctx, const DevicePackedLayer& packed);

/// Positions of head h's packed entries, the classes' first (host copy).
std::vector<int32_t> packed_positions(Context& ctx, const DevicePackedLayer& packed, int64_t h);

}  // namespace rkv::RKV_CUDA_NS
