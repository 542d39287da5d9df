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
  if (sel.per_head())
    throw InputError(where + ": per-head budgets (different counts per KV head) are not implemented on the cuda "
                     "backend yet; run them with model.backend = \"cpu\"");
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
  const int64_t b = sel.kept, d = layer.head_dim, Hkv = layer.n_kv_heads;
  if (b < 1 || static_cast<int64_t>(sel.positions.size()) != Hkv * b)
    throw InputError(where + ": selection holds " + str(static_cast<int64_t>(sel.positions.size())) +
                     " positions, expected H_kv * b_l = " + str(Hkv * b));
  for (int64_t p : sel.positions)
    if (p < 0 || p >= layer.length)
      throw InputError(where + ": selected position " + str(p) + " is outside [0, " + str(layer.length) + ")");
  DeviceBuffer dpos = upload(ctx, sel.positions);
  const size_t bytes = static_cast<size_t>(Hkv * b * d) * layer.elem_bytes();
  DeviceBuffer k(ctx, bytes), v(ctx, bytes);
  RKV_CUDA_CHECK(kernels::gather_rows(layer.dtype, layer.k.data(), layer.capacity, dpos.as<int64_t>(), Hkv, b,
                                      static_cast<int>(d), k.data(), ctx.stream()));
  RKV_CUDA_CHECK(kernels::gather_rows(layer.dtype, layer.v.data(), layer.capacity, dpos.as<int64_t>(), Hkv, b,
                                      static_cast<int>(d), v.data(), ctx.stream()));
  if (layer.has_positions()) {  // positions travel with their rows: gathered on the host (H_kv * T int32)
    const std::vector<int32_t> old_pos = download<int32_t>(ctx, layer.pos.data(),
                                                           static_cast<size_t>(Hkv * layer.capacity));
    std::vector<int32_t> kept(static_cast<size_t>(Hkv * b));
    for (int64_t h = 0; h < Hkv; ++h)
      for (int64_t i = 0; i < b; ++i)
        kept[static_cast<size_t>(h * b + i)] = old_pos[static_cast<size_t>(h * layer.capacity + sel.head_positions(h)[i])];
    layer.pos = upload(ctx, kept);
  }
  layer.k = std::move(k);  // frees the old storage (cudaFree waits for the gathers)
  layer.v = std::move(v);
  layer.capacity = b;
  layer.length = b;
  rep.length_after = b;
  rep.bytes_after = layer.bytes();
  return rep;
}

}  // namespace rkv::RKV_CUDA_NS
