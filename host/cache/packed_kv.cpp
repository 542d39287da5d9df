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

int64_t PackedLayer::entries(int64_t h) const {
  if (!packed()) return 0;
  int64_t n = heads[static_cast<size_t>(h)].entries;
  for (const PackedClass& c : classes) n += c.heads[static_cast<size_t>(h)].entries;
  return n;
}

std::vector<std::pair<const CodecSpec*, const std::vector<PackedHead>*>> PackedLayer::parts() const {
  std::vector<std::pair<const CodecSpec*, const std::vector<PackedHead>*>> out;
  for (const PackedClass& c : classes) out.emplace_back(&c.codec, &c.heads);
  out.emplace_back(&codec, &heads);
  return out;
}

size_t PackedLayer::bytes() const {
  size_t b = 0;
  for (const auto& [spec, part] : parts())
    for (const auto& h : *part) b += capacity_bytes(h);
  return b;
}

size_t PackedLayer::bytes_in_use() const {
  size_t b = 0;
  for (const auto& [spec, part] : parts())
    for (const auto& h : *part) b += used_bytes(h);
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

namespace {

/// The entries of `tail` whose class is `c`, every head in order, as an exact layer (positions with them).
LayerKV gather_class(const LayerKV& tail, const std::vector<uint8_t>& entry_class, uint8_t c) {
  const int64_t H = tail.n_kv_heads, d = tail.head_dim;
  std::vector<int64_t> counts(static_cast<size_t>(H), 0);
  size_t at = 0;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < tail.head_length(h); ++i) counts[static_cast<size_t>(h)] += entry_class[at++] == c;
  LayerKV out = build_exact_layer(H, d, *std::max_element(counts.begin(), counts.end()), layout_of(counts),
                                  tail.has_positions());
  at = 0;
  for (int64_t h = 0; h < H; ++h) {
    int64_t j = 0;
    for (int64_t i = 0; i < tail.head_length(h); ++i) {
      if (entry_class[at++] != c) continue;
      std::memcpy(out.k_at(h, j), tail.k_at(h, i), static_cast<size_t>(d) * sizeof(float));
      std::memcpy(out.v_at(h, j), tail.v_at(h, i), static_cast<size_t>(d) * sizeof(float));
      if (tail.has_positions()) *out.pos_at(h, j) = *tail.pos_at(h, i);
      ++j;
    }
  }
  return out;
}

}  // namespace

void pack_classes(PackedLayer& packed, LayerKV& tail, const std::vector<CodecSpec>& codecs,
                  const std::vector<uint8_t>& entry_class) {
  check_geometry(packed, tail, "pack_classes");
  if (entry_class.empty()) {
    pack_oldest(packed, tail);
    return;
  }
  if (static_cast<int64_t>(entry_class.size()) != tail.entries())
    throw InputError("pack_classes: " + std::to_string(entry_class.size()) + " entry classes for a layer of " +
                     std::to_string(tail.entries()) + " entries");
  for (uint8_t c : entry_class)
    if (c > codecs.size())
      throw InputError("pack_classes: class " + std::to_string(c) + " but " + std::to_string(codecs.size()) + " codecs");
  for (size_t c = 0; c < codecs.size(); ++c) {
    LayerKV members = gather_class(tail, entry_class, static_cast<uint8_t>(c + 1));
    CodecSpec spec = codecs[c];
    spec.residual = 0;  // a class packs all its entries
    PackedLayer part = build_packed_layer(spec, tail.n_kv_heads, tail.head_dim);
    pack_oldest(part, members);
    if (part.positions) packed.positions = true;
    packed.classes.push_back(PackedClass{spec, std::move(part.heads)});
  }
  tail = gather_class(tail, entry_class, 0);
  pack_oldest(packed, tail);
}

void unpack_layer(const PackedLayer& packed, const LayerKV& tail, int64_t extra, LayerKV& out) {
  check_geometry(packed, tail, "unpack_layer");
  const int64_t H = tail.n_kv_heads, d = tail.head_dim;
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
  const auto parts = packed.packed() ? packed.parts() : decltype(packed.parts()){};  // classes, then the base codec
  for (int64_t h = 0; h < H; ++h) {
    const int64_t np = packed.entries(h), nt = tail.head_length(h);
    int64_t at = 0;
    for (const auto& [spec, part] : parts) {
      const PackedHead& ph = (*part)[static_cast<size_t>(h)];
      const int64_t q = codec_key_quantum(*spec);
      const size_t kb = codec_key_unit_bytes(*spec, d), vb = codec_value_row_bytes(*spec, d);
      for (int64_t u = 0; u < ph.entries / q; ++u)
        decode_key_unit(*spec, ph.k.data() + static_cast<size_t>(u) * kb, d, out.k_at(h, at + u * q));
      for (int64_t i = 0; i < ph.entries; ++i)
        decode_value_row(*spec, ph.v.data() + static_cast<size_t>(i) * vb, d, out.v_at(h, at + i));
      if (positions && ph.entries > 0)
        std::memcpy(out.pos_at(h, at), ph.pos.data(), static_cast<size_t>(ph.entries) * sizeof(int32_t));
      at += ph.entries;
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
