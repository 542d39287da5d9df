#include "backend/cuda/compression.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/errors.hpp"

namespace rkv::RKV_CUDA_NS {

namespace {
std::string str(int64_t v) { return std::to_string(v); }
}  // namespace

Selection select_positions(Context& ctx, const float* scores, int64_t n_kv_heads, int64_t T, int64_t budget,
                           const ProtectedSpec& spec, int64_t layer) {
  const std::string where = "layer " + str(layer);
  if (n_kv_heads < 1 || T < 1)
    throw InputError(where + ": selection needs n_kv_heads >= 1 and T >= 1 (got " + str(n_kv_heads) + ", " + str(T) + ")");
  if (budget < 1) throw InputError(where + ": budget b_l = " + str(budget) + " must be >= 1");
  Selection sel;
  sel.layer = layer;
  sel.n_kv_heads = n_kv_heads;
  sel.prefix_tokens = T;
  sel.budget = budget;
  if (budget >= T) {
    sel.untouched = true;
    sel.kept = T;
    return sel;
  }
  if (!scores) throw InputError(where + ": scores missing");

  const std::vector<int64_t> prot = protected_positions(T, spec);
  const int64_t n_prot = static_cast<int64_t>(prot.size());
  const int64_t prot_kept = std::min(budget, n_prot);
  if (budget < n_prot)
    sel.warnings.push_back(where + ": budget b_l = " + str(budget) + " is below the scorer's protected count " +
                           str(n_prot) + " (sinks " + str(std::min(spec.sinks, T)) + ", recent " +
                           str(std::min(spec.recent, T)) + "); kept the first " + str(budget) +
                           " protected positions in priority order (sinks first, then the most recent)");
  std::vector<uint8_t> masks(static_cast<size_t>(2 * T), 0);  // [protected | kept protected]
  for (int64_t i = 0; i < n_prot; ++i) {
    masks[static_cast<size_t>(prot[static_cast<size_t>(i)])] = 1;
    if (i < prot_kept) masks[static_cast<size_t>(T + prot[static_cast<size_t>(i)])] = 1;
  }
  DeviceBuffer dmask = upload(ctx, masks);
  const int64_t no_bad = std::numeric_limits<int64_t>::max();
  DeviceBuffer dbad = upload(ctx, std::vector<int64_t>{no_bad});
  DeviceBuffer dpos(ctx, static_cast<size_t>(n_kv_heads * budget) * sizeof(int64_t));
  RKV_CUDA_CHECK(kernels::select_topk(scores, n_kv_heads, T, dmask.as<uint8_t>(), dmask.as<uint8_t>() + T, prot_kept,
                                      budget, dpos.as<int64_t>(), dbad.as<int64_t>(), ctx.stream()));
  const int64_t bad = download<int64_t>(ctx, dbad.data(), 1)[0];
  if (bad != no_bad) {
    const int64_t h = bad / T, j = bad % T;
    const float v = download<float>(ctx, scores + bad, 1)[0];
    throw InputError(where + ", KV head " + str(h) + ", position " + str(j) + ": score is not finite (" +
                     std::to_string(v) + ")");
  }
  sel.kept = budget;
  sel.positions = download<int64_t>(ctx, dpos.data(), static_cast<size_t>(n_kv_heads * budget));
  return sel;
}

CompactionReport compact_layer(Context& ctx, DeviceLayerKV& layer, const Selection& sel) {
  const std::string where = "layer " + str(sel.layer);
  CompactionReport rep;
  rep.layer = sel.layer;
  rep.length_before = layer.length;
  rep.bytes_before = layer.bytes();
  if (layer.length != sel.prefix_tokens)
    throw InputError(where + ": cache holds " + str(layer.length) + " positions but the selection is over T = " +
                     str(sel.prefix_tokens));
  if (layer.n_kv_heads != sel.n_kv_heads)
    throw InputError(where + ": cache has " + str(layer.n_kv_heads) + " KV heads but the selection " +
                     str(sel.n_kv_heads));
  if (sel.untouched) {
    rep.untouched = true;
    rep.length_after = layer.length;
    rep.bytes_after = rep.bytes_before;
    return rep;
  }
  const int64_t d = layer.head_dim, Hkv = layer.n_kv_heads;
  int64_t n_selected = 0;
  for (int64_t h = 0; h < Hkv; ++h) n_selected += sel.head_kept_count(h);
  if (static_cast<int64_t>(sel.positions.size()) != n_selected ||
      (sel.per_head() && static_cast<int64_t>(sel.head_kept.size()) != Hkv))
    throw InputError(where + ": selection holds " + str(static_cast<int64_t>(sel.positions.size())) +
                     " positions, expected " + str(n_selected) + " (the sum of the per-head counts)");
  // Head h keeps b_h entries, indices ascending below its own length (a layer of T entries: no uncompressed tail).
  std::vector<int64_t> begin(static_cast<size_t>(Hkv) + 1, 0);
  for (int64_t h = 0; h < Hkv; ++h) {
    const int64_t b = sel.head_kept_count(h), len = layer.head_length(h);
    const int64_t* p = sel.head_positions(h);
    if (b < 1) throw InputError(where + ", KV head " + str(h) + ": the selection keeps no entry");
    for (int64_t i = 0; i < b; ++i)
      if (p[i] < 0 || p[i] >= len || (i > 0 && p[i] <= p[i - 1]))
        throw InputError(where + ", KV head " + str(h) + ": selected position " + str(p[i]) + " is outside [0, " +
                         str(len) + ") or not ascending");
    begin[static_cast<size_t>(h) + 1] = begin[static_cast<size_t>(h)] + b;
  }
  const int64_t rows = begin.back();
  const size_t row = static_cast<size_t>(d) * layer.elem_bytes();
  DeviceBuffer dpos = upload(ctx, sel.positions);  // head after head, as begin[] lays them out
  DeviceBuffer k(ctx, static_cast<size_t>(rows) * row), v(ctx, static_cast<size_t>(rows) * row);
  for (int64_t h = 0; h < Hkv; ++h) {  // one gather per KV head, on its own rows
    const size_t from = static_cast<size_t>(layer.head_row(h)) * row, to = static_cast<size_t>(begin[static_cast<size_t>(h)]) * row;
    const int64_t* p = dpos.as<int64_t>() + begin[static_cast<size_t>(h)];
    const int64_t b = sel.head_kept_count(h);
    RKV_CUDA_CHECK(kernels::gather_rows(layer.dtype, layer.k.as<char>() + from, layer.head_capacity(h), p, 1, b,
                                        static_cast<int>(d), k.as<char>() + to, ctx.stream()));
    RKV_CUDA_CHECK(kernels::gather_rows(layer.dtype, layer.v.as<char>() + from, layer.head_capacity(h), p, 1, b,
                                        static_cast<int>(d), v.as<char>() + to, ctx.stream()));
  }
  if (layer.has_positions()) {  // positions travel with their rows: gathered on the host (int32 per entry)
    std::vector<int32_t> kept(static_cast<size_t>(rows));
    for (int64_t h = 0; h < Hkv; ++h) {
      const std::vector<int32_t> old = download<int32_t>(ctx, layer.pos.as<int32_t>() + layer.head_row(h),
                                                         static_cast<size_t>(layer.head_length(h)));
      for (int64_t i = 0; i < sel.head_kept_count(h); ++i)
        kept[static_cast<size_t>(begin[static_cast<size_t>(h)] + i)] = old[static_cast<size_t>(sel.head_positions(h)[i])];
    }
    layer.pos = upload(ctx, kept);
  }
  layer.k = std::move(k);  // frees the old storage (cudaFree waits for the gathers)
  layer.v = std::move(v);
  bool uniform = true;  // the same count in every head: the uniform layout (as the host's compact_layer)
  for (int64_t h = 1; h < Hkv; ++h) uniform = uniform && sel.head_kept_count(h) == sel.head_kept_count(0);
  if (uniform) {
    layer.capacity = layer.length = sel.head_kept_count(0);
    layer.head_lengths.clear();
    layer.head_begin.clear();
  } else {
    layer.capacity = 0;
    layer.length = *std::max_element(sel.head_kept.begin(), sel.head_kept.end());
    layer.head_lengths = sel.head_kept;
    layer.head_begin = begin;
  }
  rep.length_after = layer.length;
  rep.bytes_after = layer.bytes();
  return rep;
}

}  // namespace rkv::RKV_CUDA_NS
