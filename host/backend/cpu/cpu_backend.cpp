#include "backend/cpu/cpu_backend.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>

#include "backend/cpu/blas.hpp"
#include "backend/cpu/profiler_session.hpp"
#include "backend/cpu/threads.hpp"
#include "backend/cpu/value_output_norms.hpp"
#include "cache/compaction.hpp"
#include "cache/rerotation.hpp"
#include "cache/token_bits.hpp"
#include "core/errors.hpp"

namespace rkv::cpu {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

void check_layer(const KVCache& c, int64_t layer) {
  if (layer < 0 || layer >= static_cast<int64_t>(c.layers.size()))
    throw InputError("cache layer " + str(layer) + " outside [0, " + str(static_cast<int64_t>(c.layers.size())) + ")");
}

/// The process's peak resident set (VmHWM of /proc/self/status) in bytes; 0 where it cannot be read.
size_t peak_rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return static_cast<size_t>(std::strtoull(line.c_str() + 6, nullptr, 10)) * 1024;
  return 0;
}

}  // namespace

int64_t CpuCache::length(int64_t layer) const {
  check_layer(kv, layer);
  const PackedLayer* p = packed_layer(layer);
  if (!p) return kv.layers[static_cast<size_t>(layer)].length;
  int64_t longest = 0;
  for (int64_t h = 0; h < kv.layers[static_cast<size_t>(layer)].n_kv_heads; ++h) longest = std::max(longest, head_length(layer, h));
  return longest;
}

int64_t CpuCache::head_length(int64_t layer, int64_t head) const {
  check_layer(kv, layer);
  const LayerKV& l = kv.layers[static_cast<size_t>(layer)];
  if (head < 0 || head >= l.n_kv_heads)
    throw InputError("layer " + str(layer) + ": KV head " + str(head) + " outside [0, " + str(l.n_kv_heads) + ")");
  const PackedLayer* p = packed_layer(layer);
  return l.head_length(head) + (p ? p->entries(head) : 0);
}

size_t CpuCache::bytes() const {
  size_t b = kv.bytes();
  for (const PackedLayer& p : packed) b += p.bytes();
  return b;
}

size_t CpuCache::bytes_in_use() const {
  size_t b = kv.bytes_in_use();
  for (const PackedLayer& p : packed) b += p.bytes_in_use();
  return b;
}

int64_t CpuCache::shared_source(int64_t layer) const {
  check_layer(kv, layer);
  return sources.empty() ? layer : sources[static_cast<size_t>(layer)];
}

PackedLayer* CpuCache::packed_layer(int64_t layer) {
  if (packed.empty() || !packed[static_cast<size_t>(layer)].packed()) return nullptr;
  return &packed[static_cast<size_t>(layer)];
}

const PackedLayer* CpuCache::packed_layer(int64_t layer) const {
  if (packed.empty() || !packed[static_cast<size_t>(layer)].packed()) return nullptr;
  return &packed[static_cast<size_t>(layer)];
}

CpuCache& cpu_cache(BackendCache& cache) {
  auto* c = dynamic_cast<CpuCache*>(&cache);
  if (!c) throw InputError("cpu backend: the cache was made by another backend");
  return *c;
}

const CpuCache& cpu_cache(const BackendCache& cache) {
  const auto* c = dynamic_cast<const CpuCache*>(&cache);
  if (!c) throw InputError("cpu backend: the cache was made by another backend");
  return *c;
}

namespace {

/// Throws rkv::InputError when `layer` of `c` is stored by a codec or shared: `what` works on a layer's own float32
/// entries only.
void refuse_packed(const CpuCache& c, int64_t layer, const std::string& what) {
  if (const PackedLayer* p = c.packed_layer(layer))
    throw InputError("layer " + str(layer) + " is stored by the codec " + p->codec.label() + "; " + what +
                     " works on float32 entries only (compress first, then encode)");
  if (c.shared_source(layer) != layer)
    throw InputError("layer " + str(layer) + " is shared (it reads layer " + str(c.shared_source(layer)) +
                     "'s entries and holds none); " + what + " works on a layer's own entries only");
}

}  // namespace

std::string CpuBackend::description() const {
  return "cpu: f32, " + std::to_string(num_threads()) + " threads, OpenBLAS " + blas_core_name();
}

PrefillResult CpuBackend::prefill(const std::vector<int32_t>& tokens, const PrefillRequest& request) {
  const auto t0 = std::chrono::steady_clock::now();
  const ModelConfig& c = model_.config;
  const int64_t T = static_cast<int64_t>(tokens.size()), H = c.n_heads, d = c.head_dim;
  if (T < 1) throw InputError("prefill: empty prompt");
  PrefillResult r;
  auto cache = std::make_unique<CpuCache>(make_cache(model_, T));
  r.n_queries = std::clamp<int64_t>(request.keep_queries, 0, T);
  const int64_t nq = r.n_queries;
  r.queries.assign(nq > 0 ? static_cast<size_t>(c.n_layers) : 0, {});
  r.stats.assign(request.stats.size(), std::vector<AttentionStats>(static_cast<size_t>(c.n_layers)));
  const bool moments = std::any_of(request.stats.begin(), request.stats.end(),
                                   [](const AttentionStatsOptions& o) { return o.query_moments; });
  const bool cosines = std::any_of(request.stats.begin(), request.stats.end(),
                                   [](const AttentionStatsOptions& o) { return o.residual_cosine; });

  std::vector<float> x = embed(model_, tokens);
  std::vector<int64_t> positions(static_cast<size_t>(T));
  for (int64_t i = 0; i < T; ++i) positions[static_cast<size_t>(i)] = i;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    std::vector<AttentionStatsAccumulator> acc;
    acc.reserve(request.stats.size());
    for (const AttentionStatsOptions& o : request.stats) acc.emplace_back(H, T, T, o);
    LayerHooks hooks;
    for (auto& a : acc) hooks.stats.push_back(&a);
    std::vector<float> pre_rope;  // [H, T, d]: this layer's queries turned back before RoPE (query moments)
    if (nq > 0 || moments) {
      std::vector<float>* out = nq > 0 ? &r.queries[static_cast<size_t>(l)] : nullptr;
      // `out` by value: it is a local of this block, which ends before forward_layer calls the hook.
      hooks.on_queries = [&, out](const float* q, int64_t n_heads, int64_t n, int64_t head_dim) {
        // q: [H, n, d] for all T positions of this single-chunk prefill; keep the last nq rows of each head.
        if (moments) pre_rope = unrotate_queries(QueriesView{q, n_heads, n, head_dim}, model_.layer_inv_freq(l));
        if (!out) return;
        out->resize(static_cast<size_t>(n_heads * nq * head_dim));
        for (int64_t h = 0; h < n_heads; ++h)
          std::memcpy(out->data() + h * nq * head_dim, q + (h * n + (n - nq)) * head_dim,
                      static_cast<size_t>(nq * head_dim) * sizeof(float));
      };
    }
    std::vector<float> cosine;  // [T]: RKV_STAT_RESIDUAL_COSINE, x before the attention block against x + o
    if (cosines)
      hooks.on_attn_output = [&](const float* o, int64_t n, int64_t D) { cosine = residual_cosines(x.data(), o, n, D); };
    const bool hooked = nq > 0 || moments || cosines || !acc.empty();
    forward_layer(model_, l, x.data(), T, positions.data(), cache->kv.layers[static_cast<size_t>(l)], ws_,
                  hooked ? &hooks : nullptr);
    for (size_t k = 0; k < acc.size(); ++k) {
      AttentionStats& st = r.stats[k][static_cast<size_t>(l)] = acc[k].finish();
      if (request.stats[k].query_moments)
        add_query_moments(QueriesView{pre_rope.data(), H, T, d}, request.stats[k].query_skip, st);
      if (request.stats[k].residual_cosine) st.residual_cosine = cosine;
      // A sliding-window layer's key j is seen by the queries j .. j + W - 1 only: min(T - j, W) of them.
      if (const int64_t W = c.layer_window(l); W > 0)
        for (float& n : st.query_counts) n = std::min(n, static_cast<float>(W));
    }
  }
  if (request.logits == LogitsFor::Last) {
    r.logits = final_logits(model_, x.data(), T, {T - 1}, ws_);
  } else if (request.logits == LogitsFor::All) {
    std::vector<int64_t> rows(static_cast<size_t>(T));
    for (int64_t i = 0; i < T; ++i) rows[static_cast<size_t>(i)] = i;
    r.logits = final_logits(model_, x.data(), T, rows, ws_);
  }
  r.cache = std::move(cache);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::vector<float> CpuBackend::extend(BackendCache& cache, const std::vector<int32_t>& tokens, int64_t start_pos,
                                      LogitsFor which, const ExtendCapture& capture, ExtendObservation* observed) {
  CpuCache& cc = cpu_cache(cache);
  const int64_t n = static_cast<int64_t>(tokens.size()), L = model_.config.n_layers;
  if (n == 0) return {};
  const bool observe = capture.attention_mass || capture.queries;
  if (observe && !observed) throw InputError("extend: a capture was asked for without an observation to fill");
  if (observe) *observed = ExtendObservation{};
  if (capture.attention_mass) observed->attention_mass.resize(static_cast<size_t>(L));
  if (capture.queries) observed->queries.resize(static_cast<size_t>(L));
  std::vector<float> x = embed(model_, tokens);
  std::vector<int64_t> positions(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) positions[static_cast<size_t>(i)] = start_pos + i;
  for (int64_t l = 0; l < L; ++l) {
    LayerHooks hooks;
    if (capture.attention_mass) hooks.attention_mass = &observed->attention_mass[static_cast<size_t>(l)];
    if (capture.queries)
      hooks.on_queries = [&, l](const float* q, int64_t n_heads, int64_t rows, int64_t head_dim) {
        observed->queries[static_cast<size_t>(l)].assign(q, q + n_heads * rows * head_dim);
      };
    extend_layer(cc, l, x.data(), n, positions.data(), observe ? &hooks : nullptr);
  }
  if (which == LogitsFor::None) return {};
  std::vector<int64_t> rows;
  if (which == LogitsFor::Last) {
    rows.push_back(n - 1);
  } else {
    for (int64_t i = 0; i < n; ++i) rows.push_back(i);
  }
  return final_logits(model_, x.data(), n, rows, ws_);
}

void CpuBackend::extend_layer(CpuCache& cc, int64_t l, float* x, int64_t n, const int64_t* positions,
                              const LayerHooks* hooks) {
  if (const int64_t s = cc.shared_source(l); s != l) {  // a shared layer: attend over its source's entries
    forward_shared_layer(model_, l, x, n, positions, AttendedKV(cc.kv.layers[static_cast<size_t>(s)], cc.packed_layer(s)),
                         ws_, hooks);
    return;
  }
  LayerKV& layer = cc.kv.layers[static_cast<size_t>(l)];
  PackedLayer* packed = cc.packed_layer(l);
  if (!packed) {
    forward_layer(model_, l, x, n, positions, layer, ws_, hooks);
    return;
  }
  // A codec's layer: attend over its codes and tail, keep the new entries in the tail, pack what left the residual.
  forward_packed_layer(model_, l, x, n, positions, *packed, layer, ws_, hooks);
  pack_oldest(*packed, layer);
}

std::unique_ptr<BackendCache> CpuBackend::clone(const BackendCache& cache) {
  return std::make_unique<CpuCache>(cpu_cache(cache));
}

std::unique_ptr<BackendCache> CpuBackend::clone_selected(const BackendCache& cache,
                                                         const std::vector<const Selection*>& selections) {
  const CpuCache& src = cpu_cache(cache);
  if (static_cast<int64_t>(selections.size()) != src.n_layers())
    throw InputError("clone_selected: " + std::to_string(selections.size()) + " selections for " +
                     std::to_string(src.n_layers()) + " layers");
  KVCache kv;
  kv.layers.reserve(src.kv.layers.size());
  for (size_t l = 0; l < src.kv.layers.size(); ++l) {
    LayerKV layer = src.kv.layers[l];  // one layer copied at a time, compacted before the next
    if (selections[l]) {
      refuse_packed(src, static_cast<int64_t>(l), "compaction");
      rkv::compact_layer(layer, *selections[l]);
    }
    kv.layers.push_back(std::move(layer));
  }
  auto out = std::make_unique<CpuCache>(std::move(kv));
  out->packed = src.packed;
  out->sources = src.sources;
  return out;
}

std::vector<int32_t> CpuBackend::layer_positions(const BackendCache& cache, int64_t layer) {
  const CpuCache& cc = cpu_cache(cache);
  check_layer(cc.kv, layer);
  const LayerKV& src = cc.kv.layers[static_cast<size_t>(layer)];
  const PackedLayer* packed = cc.packed_layer(layer);
  std::vector<int32_t> out;
  if (!src.has_positions() && !(packed && packed->positions)) return out;
  for (int64_t h = 0; h < src.n_kv_heads; ++h) {
    if (packed)
      for (const auto& [spec, part] : packed->parts())
        out.insert(out.end(), (*part)[static_cast<size_t>(h)].pos.begin(), (*part)[static_cast<size_t>(h)].pos.end());
    if (src.has_positions()) out.insert(out.end(), src.pos_at(h, 0), src.pos_at(h, 0) + src.head_length(h));
  }
  return out;
}

LayerKV CpuBackend::download_layer(const BackendCache& cache, int64_t layer) {
  const CpuCache& cc = cpu_cache(cache);
  check_layer(cc.kv, layer);
  const LayerKV& src = cc.kv.layers[static_cast<size_t>(layer)];
  if (const PackedLayer* packed = cc.packed_layer(layer)) {  // dequantized, each head exactly its length
    LayerKV out;
    unpack_layer(*packed, src, 0, out);
    return out;
  }
  // The same head lengths, each region exactly its length.
  LayerKV out = build_exact_layer(src.n_kv_heads, src.head_dim, src.length, src.head_lengths, src.has_positions());
  const int64_t d = src.head_dim;
  for (int64_t h = 0; h < src.n_kv_heads; ++h) {
    const int64_t n = src.head_length(h);
    if (n == 0) continue;
    std::memcpy(out.k_at(h, 0), src.k_at(h, 0), static_cast<size_t>(n * d) * sizeof(float));
    std::memcpy(out.v_at(h, 0), src.v_at(h, 0), static_cast<size_t>(n * d) * sizeof(float));
    if (src.has_positions()) std::memcpy(out.pos_at(h, 0), src.pos_at(h, 0), static_cast<size_t>(n) * sizeof(int32_t));
  }
  return out;
}

TensorView CpuBackend::layer_view(const BackendCache& cache, int64_t layer, bool values) {
  const CpuCache& cc = cpu_cache(cache);
  const KVCache& kv = cc.kv;
  check_layer(kv, layer);
  refuse_packed(cc, layer, "a tensor view");
  const LayerKV& l = kv.layers[static_cast<size_t>(layer)];
  if (l.per_head())
    throw InputError("layer " + str(layer) + " holds per-head lengths (per-head budgets); it has no [H_kv, T, d] view");
  const int64_t shape[3] = {l.n_kv_heads, l.length, l.head_dim};
  const int64_t strides[3] = {l.capacity * l.head_dim, l.head_dim, 1};
  void* data = const_cast<float*>(values ? l.v.data() : l.k.data());
  return TensorView(data, DLDevice{kDLCPU, 0}, DLDataType{kDLFloat, 32, 1}, 3, shape, strides);
}

void CpuBackend::compact_layer(BackendCache& cache, int64_t layer, const Selection& sel) {
  CpuCache& cc = cpu_cache(cache);
  KVCache& kv = cc.kv;
  check_layer(kv, layer);
  refuse_packed(cc, layer, "compaction");
  rkv::compact_layer(kv.layers[static_cast<size_t>(layer)], sel);
}

void CpuBackend::reserve(BackendCache& cache, int64_t extra) {
  if (extra < 0) throw InputError("reserve: extra must be >= 0, got " + str(extra));
  CpuCache& cc = cpu_cache(cache);
  for (int64_t l = 0; l < static_cast<int64_t>(cc.kv.layers.size()); ++l) {
    if (cc.packed_layer(l) || cc.shared_source(l) != l) continue;
    LayerKV& layer = cc.kv.layers[static_cast<size_t>(l)];
    rkv::reserve_layer(layer, layer.length + extra);
  }
}

void CpuBackend::truncate(BackendCache& cache, int64_t length) {
  CpuCache& cc = cpu_cache(cache);
  for (int64_t l = 0; l < cc.n_layers(); ++l) {  // every check before the first change
    refuse_packed(cc, l, "truncation");
    const LayerKV& layer = cc.kv.layers[static_cast<size_t>(l)];
    if (layer.per_head()) throw InputError("truncate: layer " + str(l) + " holds per-head lengths; cannot cut it back");
    if (length < 0 || length > layer.length)
      throw InputError("truncate: length " + str(length) + " is outside [0, " + str(layer.length) + "] of layer " +
                       str(l));
  }
  for (LayerKV& layer : cc.kv.layers) rkv::truncate_layer(layer, length);
}

std::vector<float> CpuBackend::value_output_norms(const BackendCache& cache, int64_t layer) {
  const CpuCache& cc = cpu_cache(cache);
  check_layer(cc.kv, layer);
  refuse_packed(cc, layer, "value-output norms");
  const LayerKV& kv = cc.kv.layers[static_cast<size_t>(layer)];
  if (kv.per_head()) throw InputError("value-output norms: layer " + str(layer) + " holds per-head lengths");
  const ModelConfig& c = model_.config;
  const LayerWeights& w = model_.layers[static_cast<size_t>(layer)];
  return rkv::cpu::value_output_norms(kv, weight_ref(w.wo, w.quant.wo, c.d_model, c.n_heads * c.head_dim), c.n_heads);
}

void CpuBackend::rerotate_layer(BackendCache& cache, int64_t layer) {
  CpuCache& cc = cpu_cache(cache);
  KVCache& kv = cc.kv;
  check_layer(kv, layer);
  refuse_packed(cc, layer, "key re-rotation");
  rkv::rerotate_layer(kv.layers[static_cast<size_t>(layer)], model_.layer_inv_freq(layer), layer);
}

void CpuBackend::encode_layer(BackendCache& cache, int64_t layer, const CodecSpec& codec) {
  encode_layer_classes(cache, layer, codec, {});
}

void CpuBackend::encode_layer_classes(BackendCache& cache, int64_t layer, const CodecSpec& codec,
                                      const std::vector<uint8_t>& entry_class) {
  CpuCache& cc = cpu_cache(cache);
  check_layer(cc.kv, layer);
  refuse_packed(cc, layer, "encoding");
  LayerKV& tail = cc.kv.layers[static_cast<size_t>(layer)];
  check_codec(codec, tail.head_dim, "layer " + str(layer));
  if (codec.none()) return;
  if (model_.config.is_sliding(layer) && std::any_of(entry_class.begin(), entry_class.end(), [](uint8_t c) { return c != 0; }))
    throw InputError("layer " + str(layer) + ": token precision classes reorder a layer's entries, and a "
                     "sliding-window layer's attention needs them in position order");
  const std::vector<CodecSpec> classes = token_class_codecs(codec);
  for (const CodecSpec& c : classes) check_codec(c, tail.head_dim, "layer " + str(layer) + " token class");
  PackedLayer p = build_packed_layer(codec, tail.n_kv_heads, tail.head_dim);
  pack_classes(p, tail, classes, entry_class);  // checks entry_class before it moves anything
  if (cc.packed.empty()) cc.packed.resize(cc.kv.layers.size());
  cc.packed[static_cast<size_t>(layer)] = std::move(p);
}

void CpuBackend::share_layer(BackendCache& cache, int64_t layer, int64_t source) {
  CpuCache& cc = cpu_cache(cache);
  check_share_layer(cc, layer, source);
  refuse_packed(cc, layer, "sharing");
  if (cc.sources.empty())
    for (int64_t l = 0; l < cc.n_layers(); ++l) cc.sources.push_back(l);
  LayerKV& own = cc.kv.layers[static_cast<size_t>(layer)];
  own = build_exact_layer(own.n_kv_heads, own.head_dim, 0, {}, own.has_positions());  // frees every entry
  cc.sources[static_cast<size_t>(layer)] = source;
}

std::unique_ptr<ProfilerSession> CpuBackend::new_profiler(int64_t prefix_tokens, int64_t window_tokens,
                                                          const ProtectedSpec& protect) {
  return std::make_unique<CpuProfilerSession>(model_, prefix_tokens, window_tokens, protect);
}

void CpuBackend::begin_phase(const std::string& name) { open_phases_.push_back(name); }

void CpuBackend::end_phase() {
  if (open_phases_.empty()) throw InputError("cpu backend: end_phase() without begin_phase()");
  phases_.push_back(PhaseMemoryRecord{open_phases_.back(), peak_rss_bytes()});
  open_phases_.pop_back();
}

}  // namespace rkv::cpu
