#include "cache/packed_kv.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/errors.hpp"

namespace rkv {
namespace {

size_t capacity_bytes(const PackedHead& h) { return h.k.capacity() + h.v.capacity() + h.pos.capacity() * sizeof(int32_t); }
size_t used_bytes(const PackedHead& h) { return h.k.size() + h.v.size() + h.pos.size() * sizeof(int32_t); }

void check_geometry(const PackedLayer& packed, const LayerKV& tail, const char* what) {
  if (tail.n_kv_heads != static_cast<int64_t>(packed.heads.size()) || tail.head_dim != packed.head_dim)
    throw InputError(std::string(what) + ": the float tail has " + std::to_string(tail.n_kv_heads) + " KV heads of dim " +
                     std::to_string(tail.head_dim) + ", the packed layer " + std::to_string(packed.heads.size()) +
                     " of dim " + std::to_string(packed.head_dim));
}

/// Grows `v` by `add`, exactly when it is empty (the first pack, so kv_bytes counts no spare room), geometrically after.
template <class T>
T* grow_by(std::vector<T>& v, size_t add) {
  const size_t old = v.size();
  if (old == 0) v.reserve(add);
  v.resize(old + add);
  return v.data() + old;
}

/// Packs entries [0, n) of head h of `tail` (n a multiple of the key quantum) onto the end of `head`.
void pack_head(const CodecSpec& codec, const LayerKV& tail, int64_t h, int64_t n, bool positions, PackedHead& head) {
  const int64_t d = tail.head_dim, q = codec_key_quantum(codec);
  const size_t kb = codec_key_unit_bytes(codec, d), vb = codec_value_row_bytes(codec, d);
  uint8_t* k = grow_by(head.k, static_cast<size_t>(n / q) * kb);
  uint8_t* v = grow_by(head.v, static_cast<size_t>(n) * vb);
  for (int64_t u = 0; u < n / q; ++u) encode_key_unit(codec, tail.k_at(h, u * q), d, k + static_cast<size_t>(u) * kb);
  for (int64_t i = 0; i < n; ++i) encode_value_row(codec, tail.v_at(h, i), d, v + static_cast<size_t>(i) * vb);
  if (positions) std::memcpy(grow_by(head.pos, static_cast<size_t>(n)), tail.pos_at(h, 0), static_cast<size_t>(n) * sizeof(int32_t));
  head.entries += n;
}

/// Per-head counts as a LayerKV layout: {} when every head holds the same count (uniform), else the counts.
std::vector<int64_t> layout_of(const std::vector<int64_t>& counts) {
  for (int64_t c : counts)
    if (c != counts.front()) return counts;
  return {};
}

}  // namespace

size_t PackedLayer::bytes() const {
  size_t b = 0;
  for (const auto& h : heads) b += capacity_bytes(h);
  return b;
}

size_t PackedLayer::bytes_in_use() const {
  size_t b = 0;
  for (const auto& h : heads) b += used_bytes(h);
  return b;
}

PackedLayer build_packed_layer(const CodecSpec& codec, int64_t n_kv_heads, int64_t head_dim) {
  PackedLayer p;
  p.codec = codec;
  p.head_dim = head_dim;
  p.heads.resize(static_cast<size_t>(n_kv_heads));
  return p;
}

void pack_oldest(PackedLayer& packed, LayerKV& tail) {
  check_geometry(packed, tail, "pack_oldest");
  const int64_t H = tail.n_kv_heads, q = codec_key_quantum(packed.codec);
  std::vector<int64_t> pack(static_cast<size_t>(H)), keep(static_cast<size_t>(H));
  bool any = false;
  for (int64_t h = 0; h < H; ++h) {
    const int64_t n = tail.head_length(h);
    pack[static_cast<size_t>(h)] = std::max<int64_t>(0, n - packed.codec.residual) / q * q;
    keep[static_cast<size_t>(h)] = n - pack[static_cast<size_t>(h)];
    any = any || pack[static_cast<size_t>(h)] > 0;
  }
  if (!any) return;
  if (tail.has_positions()) packed.positions = true;
  for (int64_t h = 0; h < H; ++h)
    pack_head(packed.codec, tail, h, pack[static_cast<size_t>(h)], tail.has_positions(), packed.heads[static_cast<size_t>(h)]);
  LayerKV rest = build_exact_layer(H, tail.head_dim, *std::max_element(keep.begin(), keep.end()), layout_of(keep),
                                   tail.has_positions());
  const int64_t d = tail.head_dim;
  for (int64_t h = 0; h < H; ++h) {
    const int64_t n = keep[static_cast<size_t>(h)], from = pack[static_cast<size_t>(h)];
    if (n == 0) continue;
    std::memcpy(rest.k_at(h, 0), tail.k_at(h, from), static_cast<size_t>(n * d) * sizeof(float));
    std::memcpy(rest.v_at(h, 0), tail.v_at(h, from), static_cast<size_t>(n * d) * sizeof(float));
    if (tail.has_positions()) std::memcpy(rest.pos_at(h, 0), tail.pos_at(h, from), static_cast<size_t>(n) * sizeof(int32_t));
  }
  tail = std::move(rest);
}

void unpack_layer(const PackedLayer& packed, const LayerKV& tail, int64_t extra, LayerKV& out) {
  check_geometry(packed, tail, "unpack_layer");
  const int64_t H = tail.n_kv_heads, d = tail.head_dim, q = codec_key_quantum(packed.codec);
  std::vector<int64_t> counts(static_cast<size_t>(H));
  for (int64_t h = 0; h < H; ++h) counts[static_cast<size_t>(h)] = packed.entries(h) + tail.head_length(h);
  const bool positions = packed.positions || tail.has_positions();
  out.n_kv_heads = H;
  out.head_dim = d;
  out.length = *std::max_element(counts.begin(), counts.end());
  out.head_lengths = layout_of(counts);
  int64_t rows = 0;
  if (out.per_head()) {
    out.head_begin.assign(static_cast<size_t>(H) + 1, 0);
    for (int64_t h = 0; h < H; ++h)
      out.head_begin[static_cast<size_t>(h) + 1] = out.head_begin[static_cast<size_t>(h)] + counts[static_cast<size_t>(h)] + extra;
    rows = out.head_begin.back();
    out.capacity = 0;
  } else {
    out.head_begin.clear();
    out.capacity = out.length + extra;
    rows = H * out.capacity;
  }
  out.k.resize(static_cast<size_t>(rows * d));
  out.v.resize(out.k.size());
  out.pos.resize(positions ? static_cast<size_t>(rows) : 0);
  const size_t kb = codec_key_unit_bytes(packed.codec, d), vb = codec_value_row_bytes(packed.codec, d);
  for (int64_t h = 0; h < H; ++h) {
    const int64_t np = packed.entries(h), nt = tail.head_length(h);
    if (np > 0) {
      const PackedHead& ph = packed.heads[static_cast<size_t>(h)];
      for (int64_t u = 0; u < np / q; ++u) decode_key_unit(packed.codec, ph.k.data() + static_cast<size_t>(u) * kb, d, out.k_at(h, u * q));
      for (int64_t i = 0; i < np; ++i) decode_value_row(packed.codec, ph.v.data() + static_cast<size_t>(i) * vb, d, out.v_at(h, i));
      if (positions) std::memcpy(out.pos_at(h, 0), ph.pos.data(), static_cast<size_t>(np) * sizeof(int32_t));
    }
    if (nt == 0) continue;
    std::memcpy(out.k_at(h, np), tail.k_at(h, 0), static_cast<size_t>(nt * d) * sizeof(float));
    std::memcpy(out.v_at(h, np), tail.v_at(h, 0), static_cast<size_t>(nt * d) * sizeof(float));
    if (positions) std::memcpy(out.pos_at(h, np), tail.pos_at(h, 0), static_cast<size_t>(nt) * sizeof(int32_t));
  }
}

void append_entries(LayerKV& dst, const LayerKV& src, const std::vector<int64_t>& first, int64_t n) {
  if (dst.n_kv_heads != src.n_kv_heads || dst.head_dim != src.head_dim ||
      static_cast<int64_t>(first.size()) != src.n_kv_heads)
    throw InputError("append_entries: KV heads or head dims differ");
  for (int64_t h = 0; h < src.n_kv_heads; ++h)
    if (first[static_cast<size_t>(h)] < 0 || first[static_cast<size_t>(h)] + n > src.head_length(h))
      throw InputError("append_entries: entries [" + std::to_string(first[static_cast<size_t>(h)]) + ", +" +
                       std::to_string(n) + ") outside KV head " + std::to_string(h));
  if (n <= 0) return;
  const bool adopt_positions = dst.entries() == 0 && !dst.has_positions() && src.has_positions();
  reserve_extra(dst, n);
  if (adopt_positions)  // an empty layer cannot say it tracks positions (pos is empty): it takes src's tracking
    dst.pos.assign(static_cast<size_t>(dst.per_head() ? dst.head_begin.back() : dst.n_kv_heads * dst.capacity), 0);
  const int64_t d = dst.head_dim;
  for (int64_t h = 0; h < dst.n_kv_heads; ++h) {
    const int64_t at = dst.head_length(h), from = first[static_cast<size_t>(h)];
    std::memcpy(dst.k_at(h, at), src.k_at(h, from), static_cast<size_t>(n * d) * sizeof(float));
    std::memcpy(dst.v_at(h, at), src.v_at(h, from), static_cast<size_t>(n * d) * sizeof(float));
    if (dst.has_positions()) std::memcpy(dst.pos_at(h, at), src.pos_at(h, from), static_cast<size_t>(n) * sizeof(int32_t));
  }
  if (dst.per_head()) {
    for (auto& len : dst.head_lengths) len += n;
    dst.length += n;
  } else {
    dst.length += n;
  }
}

}  // namespace rkv
