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

struct DevicePackedLayer {
  CodecSpec codec;
  int64_t head_dim = 0;
  bool positions = false;
  std::vector<DevicePackedHead> heads;  ///< [H_kv]; empty: the layer is not packed

  bool packed() const { return !heads.empty(); }
  int64_t entries(int64_t h) const { return packed() ? heads[static_cast<size_t>(h)].entries : 0; }
  /// Device bytes held (buffer sizes, with room reserved for growth).
  size_t bytes() const;
  /// Bytes of the packed entries: key units, value rows and positions.
  size_t bytes_in_use() const;
};

/// Encodes `tail` (the whole layer until now) with `codec`: every head's entries but the newest codec.residual (in
/// whole key units) are packed and `tail` keeps the rest. The host codec packs (cache/packed_kv.hpp), so the bytes
/// equal the CPU backend's for the same float32 entries.
DevicePackedLayer encode_device_layer(Context& ctx, DeviceLayerKV& tail, const CodecSpec& codec);

/// rkv::pack_oldest on the device layer: when some head's tail holds a whole unit beyond the residual, the tail comes
/// to the host, the oldest units are packed there and appended on the device, and the rest goes back as the tail.
void pack_oldest(Context& ctx, DevicePackedLayer& packed, DeviceLayerKV& tail);

/// The whole layer in the cache's dtype into `out`, rkv::unpack_layer's layout: per KV head the packed entries
/// decoded, then the tail's, with room for `extra` more entries per head; positions with them. `out`'s buffers are
/// reused when large enough (DeviceBuffer::ensure), so a decode step allocates nothing.
void unpack_layer(Context& ctx, const DevicePackedLayer& packed, const DeviceLayerKV& tail, int64_t extra,
                  DeviceLayerKV& out);

/// Appends rows [first[h], first[h] + n) of every KV head of `src` to the end of each head of `dst` (device copies,
/// growing dst). rkv::InputError for another geometry.
void append_entries(Context& ctx, DeviceLayerKV& dst, const DeviceLayerKV& src, const std::vector<int64_t>& first,
                    int64_t n);

/// A device copy of `packed` (for clone), with the buffers exactly at their bytes in use.
DevicePackedLayer copy_packed(Context& ctx, const DevicePackedLayer& packed);

/// Positions of head h's packed entries (host copy).
std::vector<int32_t> packed_positions(Context& ctx, const DevicePackedLayer& packed, int64_t h);

}  // namespace rkv::RKV_CUDA_NS
