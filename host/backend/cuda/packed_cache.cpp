#include "backend/cuda/packed_cache.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "backend/cuda/check.hpp"
#include "cache/packed_kv.hpp"
#include "core/errors.hpp"

namespace rkv::RKV_CUDA_NS {
namespace {

kernels::CodecLayout layout_of(const CodecSpec& c, int64_t head_dim) {
  kernels::CodecLayout l;
  l.format = c.format == CodecFormat::integer ? kernels::kCodecInteger
             : c.format == CodecFormat::kivi  ? kernels::kCodecKivi
             : c.format == CodecFormat::q8_0  ? kernels::kCodecQ8_0
             : c.format == CodecFormat::f16   ? kernels::kCodecF16
                                              : kernels::kCodecQ4_0;
  l.bits = c.bits;
  l.group = c.group;
  l.symmetric = c.symmetric;
  l.head_dim = head_dim;
  return l;
}

/// Appends `add` host bytes to the device buffer `buf` holding `used` bytes, growing it by at least half.
void append_bytes(Context& ctx, DeviceBuffer& buf, size_t& used, const void* add, size_t bytes) {
  if (bytes == 0) return;
  if (used + bytes > buf.bytes()) {
    DeviceBuffer grown(ctx, used == 0 ? bytes : std::max(used + bytes, used + used / 2));
    if (used > 0) copy_on_device(ctx, grown.data(), buf.data(), used);
    buf = std::move(grown);
  }
  copy_to_device(ctx, buf.as<char>() + used, add, bytes);
  used += bytes;
}

/// Appends the host head `src` (its bytes, positions and entries) to the device head `dst`.
void append_head(Context& ctx, DevicePackedHead& dst, const PackedHead& src) {
  append_bytes(ctx, dst.k, dst.k_used, src.k.data(), src.k.size());
  append_bytes(ctx, dst.v, dst.v_used, src.v.data(), src.v.size());
  size_t pos_used = static_cast<size_t>(dst.entries) * sizeof(int32_t);
  append_bytes(ctx, dst.pos, pos_used, src.pos.data(), src.pos.size() * sizeof(int32_t));
  dst.entries += src.entries;
}

/// The codec and device heads of every part of `p` in unpack order: the classes, top first, then the base codec.
std::vector<std::pair<const CodecSpec*, const std::vector<DevicePackedHead>*>> parts_of(const DevicePackedLayer& p) {
  std::vector<std::pair<const CodecSpec*, const std::vector<DevicePackedHead>*>> out;
  for (const DevicePackedClass& c : p.classes) out.emplace_back(&c.codec, &c.heads);
  out.emplace_back(&p.codec, &p.heads);
  return out;
}

/// A device buffer exactly `bytes` long holding the first `bytes` of `src`.
DeviceBuffer exact_copy(Context& ctx, const DeviceBuffer& src, size_t bytes) {
  DeviceBuffer out(ctx, bytes);
  if (bytes > 0) copy_on_device(ctx, out.data(), src.data(), bytes);
  return out;
}

}  // namespace

size_t DevicePackedLayer::bytes() const {
  size_t b = 0;
  for (const auto& [spec, part] : parts_of(*this))
    for (const auto& h : *part) b += h.k.bytes() + h.v.bytes() + h.pos.bytes();
  return b;
}

size_t DevicePackedLayer::bytes_in_use() const {
  size_t b = 0;
  for (const auto& [spec, part] : parts_of(*this))
    for (const auto& h : *part)
      b += h.k_used + h.v_used + (positions ? static_cast<size_t>(h.entries) * sizeof(int32_t) : 0);
  return b;
}

void pack_oldest(Context& ctx, DevicePackedLayer& packed, DeviceLayerKV& tail) {
  const int64_t q = codec_key_quantum(packed.codec);
  bool any = false;
  for (int64_t h = 0; h < tail.n_kv_heads; ++h) any = any || tail.head_length(h) - packed.codec.residual >= q;
  if (!any) return;
  LayerKV host = download_layer(ctx, tail);  // at most residual + a unit + the rows just appended
  PackedLayer fresh = build_packed_layer(packed.codec, tail.n_kv_heads, tail.head_dim);
  rkv::pack_oldest(fresh, host);
  if (fresh.positions) packed.positions = true;
  for (int64_t h = 0; h < tail.n_kv_heads; ++h)
    append_head(ctx, packed.heads[static_cast<size_t>(h)], fresh.heads[static_cast<size_t>(h)]);
  tail = upload_layer(ctx, host, tail.dtype);
}

DevicePackedLayer encode_device_layer(Context& ctx, DeviceLayerKV& tail, const CodecSpec& codec,
                                      const std::vector<CodecSpec>& classes, const std::vector<uint8_t>& entry_class) {
  DevicePackedLayer p;
  p.codec = codec;
  p.head_dim = tail.head_dim;
  p.heads.resize(static_cast<size_t>(tail.n_kv_heads));
  if (entry_class.empty()) {
    pack_oldest(ctx, p, tail);
    return p;
  }
  LayerKV host = download_layer(ctx, tail);  // once, at encoding: the host codec sorts the entries into classes
  PackedLayer fresh = build_packed_layer(codec, tail.n_kv_heads, tail.head_dim);
  rkv::pack_classes(fresh, host, classes, entry_class);
  p.positions = fresh.positions;
  for (const PackedClass& c : fresh.classes) {
    DevicePackedClass dc;
    dc.codec = c.codec;
    dc.heads.resize(c.heads.size());
    for (size_t h = 0; h < c.heads.size(); ++h) append_head(ctx, dc.heads[h], c.heads[h]);
    p.classes.push_back(std::move(dc));
  }
  for (int64_t h = 0; h < tail.n_kv_heads; ++h)
    append_head(ctx, p.heads[static_cast<size_t>(h)], fresh.heads[static_cast<size_t>(h)]);
  tail = upload_layer(ctx, host, tail.dtype);
  return p;
}

void unpack_layer(Context& ctx, const DevicePackedLayer& packed, const DeviceLayerKV& tail, int64_t extra,
                  DeviceLayerKV& out) {
  const int64_t H = tail.n_kv_heads, d = tail.head_dim;
  std::vector<int64_t> counts(static_cast<size_t>(H));
  for (int64_t h = 0; h < H; ++h) counts[static_cast<size_t>(h)] = packed.entries(h) + tail.head_length(h);
  const bool uniform = std::all_of(counts.begin(), counts.end(), [&](int64_t c) { return c == counts.front(); });
  out.head_lengths.clear();
  out.head_begin.clear();
  out.n_kv_heads = H;
  out.head_dim = d;
  out.dtype = tail.dtype;
  out.length = *std::max_element(counts.begin(), counts.end());
  int64_t rows = 0;
  if (uniform) {
    out.capacity = out.length + extra;
    rows = H * out.capacity;
  } else {
    out.head_lengths = counts;
    out.head_begin.assign(static_cast<size_t>(H) + 1, 0);
    for (int64_t h = 0; h < H; ++h)
      out.head_begin[static_cast<size_t>(h) + 1] = out.head_begin[static_cast<size_t>(h)] + counts[static_cast<size_t>(h)] + extra;
    rows = out.head_begin.back();
  }
  const size_t es = out.elem_bytes(), row = static_cast<size_t>(d) * es;
  out.k.ensure(ctx, static_cast<size_t>(rows) * row);  // reused across calls: no allocation per decode step
  out.v.ensure(ctx, static_cast<size_t>(rows) * row);
  const bool positions = packed.positions || tail.has_positions();
  if (positions) {
    out.pos.ensure(ctx, static_cast<size_t>(rows) * sizeof(int32_t));
  } else {
    out.pos.reset();
  }
  const auto parts = parts_of(packed);
  for (int64_t h = 0; h < H; ++h) {
    const int64_t np = packed.entries(h), nt = tail.head_length(h), at = out.head_row(h);
    int64_t done = 0;  // rows written for head h: one dequantize per part (classes, then the base codec)
    for (const auto& [spec, part] : parts) {
      if (!packed.packed()) break;
      const DevicePackedHead& ph = (*part)[static_cast<size_t>(h)];
      if (ph.entries == 0) continue;
      const kernels::CodecLayout layout = layout_of(*spec, d);
      RKV_CUDA_CHECK(kernels::dequantize_kv(out.dtype, layout, true, ph.k.as<uint8_t>(), ph.entries,
                                            out.k.as<char>() + (at + done) * row, ctx.stream()));
      RKV_CUDA_CHECK(kernels::dequantize_kv(out.dtype, layout, false, ph.v.as<uint8_t>(), ph.entries,
                                            out.v.as<char>() + (at + done) * row, ctx.stream()));
      if (positions)
        copy_on_device(ctx, out.pos.as<int32_t>() + at + done, ph.pos.data(),
                       static_cast<size_t>(ph.entries) * sizeof(int32_t));
      done += ph.entries;
    }
    if (nt == 0) continue;
    const int64_t from = tail.head_row(h);
    copy_on_device(ctx, out.k.as<char>() + (at + np) * row, tail.k.as<char>() + from * row, static_cast<size_t>(nt) * row);
    copy_on_device(ctx, out.v.as<char>() + (at + np) * row, tail.v.as<char>() + from * row, static_cast<size_t>(nt) * row);
    if (positions)
      copy_on_device(ctx, out.pos.as<int32_t>() + at + np, tail.pos.as<int32_t>() + from,
                     static_cast<size_t>(nt) * sizeof(int32_t));
  }
}

void append_entries(Context& ctx, DeviceLayerKV& dst, const DeviceLayerKV& src, const std::vector<int64_t>& first,
                    int64_t n) {
  if (dst.n_kv_heads != src.n_kv_heads || dst.head_dim != src.head_dim || dst.dtype != src.dtype ||
      static_cast<int64_t>(first.size()) != src.n_kv_heads)
    throw InputError("append_entries: KV heads, head dims or dtypes differ");
  if (n <= 0) return;
  const bool adopt_positions = dst.entries() == 0 && !dst.has_positions() && src.has_positions();
  reserve_extra(ctx, dst, n);
  if (adopt_positions)  // an empty layer has no position storage: it takes src's tracking
    dst.pos = DeviceBuffer(ctx, static_cast<size_t>(dst.per_head() ? dst.head_begin.back() : dst.n_kv_heads * dst.capacity) *
                                    sizeof(int32_t));
  const size_t row = static_cast<size_t>(dst.head_dim) * dst.elem_bytes();
  for (int64_t h = 0; h < dst.n_kv_heads; ++h) {
    const int64_t at = dst.head_row(h) + dst.head_length(h), from = src.head_row(h) + first[static_cast<size_t>(h)];
    copy_on_device(ctx, dst.k.as<char>() + at * row, src.k.as<char>() + from * row, static_cast<size_t>(n) * row);
    copy_on_device(ctx, dst.v.as<char>() + at * row, src.v.as<char>() + from * row, static_cast<size_t>(n) * row);
    if (dst.has_positions())
      copy_on_device(ctx, dst.pos.as<int32_t>() + at, src.pos.as<int32_t>() + from, static_cast<size_t>(n) * sizeof(int32_t));
  }
  if (dst.per_head())
    for (auto& len : dst.head_lengths) len += n;
  dst.length += n;
}

DevicePackedLayer copy_packed(Context& ctx, const DevicePackedLayer& packed) {
  DevicePackedLayer out;
  out.codec = packed.codec;
  out.head_dim = packed.head_dim;
  out.positions = packed.positions;
  auto copy_heads = [&](const std::vector<DevicePackedHead>& heads) {
    std::vector<DevicePackedHead> copies;
    for (const DevicePackedHead& h : heads) {
      DevicePackedHead c;
      c.k = exact_copy(ctx, h.k, h.k_used);
      c.v = exact_copy(ctx, h.v, h.v_used);
      c.pos = exact_copy(ctx, h.pos, packed.positions ? static_cast<size_t>(h.entries) * sizeof(int32_t) : 0);
      c.k_used = h.k_used;
      c.v_used = h.v_used;
      c.entries = h.entries;
      copies.push_back(std::move(c));
    }
    return copies;
  };
  out.heads = copy_heads(packed.heads);
  for (const DevicePackedClass& c : packed.classes) out.classes.push_back(DevicePackedClass{c.codec, copy_heads(c.heads)});
  return out;
}

std::vector<int32_t> packed_positions(Context& ctx, const DevicePackedLayer& packed, int64_t h) {
  std::vector<int32_t> out;
  if (!packed.positions || packed.entries(h) == 0) return out;
  for (const auto& [spec, part] : parts_of(packed)) {
    const DevicePackedHead& ph = (*part)[static_cast<size_t>(h)];
    if (ph.entries == 0) continue;
    const std::vector<int32_t> p = download<int32_t>(ctx, ph.pos.data(), static_cast<size_t>(ph.entries));
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

}  // namespace rkv::RKV_CUDA_NS
