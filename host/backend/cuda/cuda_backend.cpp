#include "backend/cuda/cuda_backend.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/compression.hpp"
#include "backend/cuda/context.hpp"
#include "backend/cuda/device_cache.hpp"
#include "backend/cuda/device_model.hpp"
#include "backend/cuda/dlpack_view.hpp"
#include "backend/cuda/forward.hpp"
#include "backend/cuda/gemm.hpp"
#include "backend/cuda/packed_cache.hpp"
#include "cache/token_bits.hpp"
#include "backend/cuda/profiler.hpp"
#include "backend/cuda/rerotation.hpp"
#include "core/errors.hpp"
#include "model/half.hpp"

namespace rkv::RKV_CUDA_NS {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

/// A cache in device memory. A layer a codec stores (encode_layer) keeps its packed entries in `packed[l]` and only its
/// float tail in `kv.layers[l]` (packed_cache.hpp).
class CudaCache final : public BackendCache {
 public:
  explicit CudaCache(DeviceKVCache c) : kv(std::move(c)) {}
  int64_t n_layers() const override { return static_cast<int64_t>(kv.layers.size()); }
  int64_t length(int64_t layer) const override {
    check(layer);
    int64_t longest = 0;
    for (int64_t h = 0; h < kv.layers[static_cast<size_t>(layer)].n_kv_heads; ++h)
      longest = std::max(longest, head_length(layer, h));
    return longest;
  }
  int64_t head_length(int64_t layer, int64_t head) const override {
    check(layer);
    const DeviceLayerKV& l = kv.layers[static_cast<size_t>(layer)];
    if (head < 0 || head >= l.n_kv_heads)
      throw InputError("layer " + str(layer) + ": KV head " + str(head) + " outside [0, " + str(l.n_kv_heads) + ")");
    const DevicePackedLayer* p = packed_layer(layer);
    return l.head_length(head) + (p ? p->entries(head) : 0);
  }
  size_t bytes() const override {
    size_t b = kv.bytes();
    for (const auto& p : packed) b += p.bytes();
    return b;
  }
  size_t bytes_in_use() const override {
    size_t b = kv.bytes_in_use();
    for (const auto& p : packed) b += p.bytes_in_use();
    return b;
  }
  int64_t shared_source(int64_t layer) const override {
    check(layer);
    return sources.empty() ? layer : sources[static_cast<size_t>(layer)];
  }
  void check(int64_t layer) const {
    if (layer < 0 || layer >= n_layers())
      throw InputError("cache layer " + str(layer) + " outside [0, " + str(n_layers()) + ")");
  }
  /// The packed part of `layer`, or null when the layer is all in the cache's dtype.
  const DevicePackedLayer* packed_layer(int64_t layer) const {
    return packed.empty() || !packed[static_cast<size_t>(layer)].packed() ? nullptr : &packed[static_cast<size_t>(layer)];
  }
  DevicePackedLayer* packed_layer(int64_t layer) {
    return packed.empty() || !packed[static_cast<size_t>(layer)].packed() ? nullptr : &packed[static_cast<size_t>(layer)];
  }
  /// Throws rkv::InputError when `layer` is packed or shared: `what` works on a layer's own unpacked entries only.
  void refuse_packed(int64_t layer, const std::string& what) const {
    if (const DevicePackedLayer* p = packed_layer(layer))
      throw InputError("layer " + str(layer) + " is stored by the codec " + p->codec.label() + "; " + what +
                       " works on unpacked entries only (compress first, then encode)");
    if (shared_source(layer) != layer)
      throw InputError("layer " + str(layer) + " is shared (it reads layer " + str(shared_source(layer)) +
                       "'s entries and holds none); " + what + " works on a layer's own entries only");
  }
  DeviceKVCache kv;
  std::vector<DevicePackedLayer> packed;  ///< [L] once a layer is encoded; else empty
  std::vector<int64_t> sources;           ///< [L] once a layer is shared: the layer each one reads; else empty
};

CudaCache& device_cache(BackendCache& c) {
  auto* d = dynamic_cast<CudaCache*>(&c);
  if (!d) throw InputError("cuda backend: the cache was made by another backend");
  return *d;
}
const CudaCache& device_cache(const BackendCache& c) {
  const auto* d = dynamic_cast<const CudaCache*>(&c);
  if (!d) throw InputError("cuda backend: the cache was made by another backend");
  return *d;
}

/// Host float32 [n, H*d] rows of `dtype` (float32 or bfloat16 bits) -> float32 [H, n, d].
std::vector<float> queries_by_head(const std::vector<char>& rows, DType dtype, int64_t n, int64_t H, int64_t d) {
  std::vector<float> out(static_cast<size_t>(H * n * d));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t e = 0; e < d; ++e) {
        const size_t src = static_cast<size_t>((i * H + h) * d + e);
        float v;
        if (dtype == DType::F32) {
          std::memcpy(&v, rows.data() + src * 4, 4);
        } else {
          uint16_t b;
          std::memcpy(&b, rows.data() + src * 2, 2);
          v = bf16_to_fp32(b);
        }
        out[static_cast<size_t>((h * n + i) * d + e)] = v;
      }
  return out;
}

/// The profiler session over DeviceProfiler (profiler.hpp), adding custom value writes.
class CudaProfilerSession final : public ProfilerSession {
 public:
  CudaProfilerSession(const DeviceModel& model, int64_t P, int64_t n_w, const ProtectedSpec& protect)
      : model_(model), profiler_(model, P, n_w, protect), changed_(static_cast<size_t>(model.config().n_layers), 0) {}

  int64_t prefix_tokens() const override { return profiler_.prefix_tokens(); }
  int64_t window_tokens() const override { return profiler_.window_tokens(); }
  void prepare_example(int64_t example, const std::vector<int32_t>& tokens) override {
    check_token_ids(tokens, model_.config().vocab_size);
    std::fill(changed_.begin(), changed_.end(), 0);
    profiler_.prepare_example(example, tokens);
  }
  void perturb_values(int64_t layer, double alpha, uint64_t seed, int64_t draw) override {
    profiler_.perturb_values(layer, alpha, seed, draw);
    changed_[static_cast<size_t>(layer)] = 1;
  }
  std::vector<double> window_kl(int64_t from_layer) override { return profiler_.window_kl(from_layer); }
  std::vector<float> attention_output(int64_t layer, bool perturbed) override {
    return profiler_.attention_output(layer, perturbed);
  }
  void restore(int64_t layer) override {
    profiler_.restore(layer);
    changed_[static_cast<size_t>(layer)] = 0;
  }
  std::vector<float> read_values(int64_t layer) override {
    const LayerKV host = download_layer(model_.context(), profiler_.values(layer));
    changed_[static_cast<size_t>(layer)] = 1;  // values() keeps the originals for restore()
    return host.v;                             // [H_kv, P, d]: the layer holds the P prefix entries between calls
  }
  void write_values(int64_t layer, const std::vector<float>& values) override {
    DeviceLayerKV& kv = profiler_.values(layer);
    changed_[static_cast<size_t>(layer)] = 1;
    const int64_t P = profiler_.prefix_tokens(), d = kv.head_dim;
    const size_t count = static_cast<size_t>(P * d), es = kv.elem_bytes();
    if (values.size() != static_cast<size_t>(kv.n_kv_heads) * count)
      throw InputError("values_view: " + std::to_string(values.size()) + " values for a [H_kv, P, d] layer of " +
                       std::to_string(static_cast<size_t>(kv.n_kv_heads) * count));
    std::vector<uint16_t> bf(count);
    for (int64_t h = 0; h < kv.n_kv_heads; ++h) {
      const float* src = values.data() + static_cast<size_t>(h) * count;
      char* dst = kv.v.as<char>() + static_cast<size_t>(h * kv.capacity * d) * es;
      if (kv.dtype == DType::F32) {
        copy_to_device(model_.context(), dst, src, count * 4);
      } else {
        for (size_t i = 0; i < count; ++i) bf[i] = fp32_to_bf16(src[i]);
        copy_to_device(model_.context(), dst, bf.data(), count * 2);
      }
    }
  }
  bool is_changed(int64_t layer) const override {
    return layer >= 0 && layer < static_cast<int64_t>(changed_.size()) && changed_[static_cast<size_t>(layer)] != 0;
  }

 private:
  const DeviceModel& model_;
  DeviceProfiler profiler_;
  std::vector<char> changed_;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(const Model& model, const BackendOptions& o)
      : model_(model),
        ctx_(std::make_unique<Context>(o.device)),
        dmodel_(*ctx_, model, parse_precision(o.dtype == "f32" ? "fp32" : o.dtype)),
        ws_(*ctx_) {}

  std::string kind() const override { return "cuda"; }
  std::string compute_dtype() const override { return dmodel_.precision() == Precision::FP32 ? "f32" : "bf16"; }
  std::string description() const override {
    return "cuda: " + ctx_->device_name() + ", " + compute_dtype() + ", weights " +
           std::to_string(dmodel_.weight_bytes() >> 20) + " MiB";
  }
  const Model& model() const override { return model_; }

  PrefillResult prefill(const std::vector<int32_t>& tokens, const PrefillRequest& request) override {
    const auto t0 = std::chrono::steady_clock::now();
    const ModelConfig& c = model_.config;
    const int64_t T = static_cast<int64_t>(tokens.size()), H = c.n_heads, d = c.head_dim;
    if (T < 1) throw InputError("prefill: empty prompt");
    PrefillResult r;
    auto cache = std::make_unique<CudaCache>(make_cache(dmodel_, T));
    std::vector<StatsCapture> captures(request.stats.size());
    std::vector<StatsCapture*> pointers;
    for (size_t k = 0; k < captures.size(); ++k) {
      captures[k].options = request.stats[k];
      start_stats_capture(dmodel_, captures[k], T);
      pointers.push_back(&captures[k]);
    }
    r.n_queries = std::clamp<int64_t>(request.keep_queries, 0, T);
    const int64_t nq = r.n_queries;
    r.queries.assign(nq > 0 ? static_cast<size_t>(c.n_layers) : 0, {});
    const bool any_moments = std::any_of(request.stats.begin(), request.stats.end(),
                                         [](const AttentionStatsOptions& o) { return o.query_moments; });
    const bool any_cosine = std::any_of(request.stats.begin(), request.stats.end(),
                                        [](const AttentionStatsOptions& o) { return o.residual_cosine; });
    // RKV_STAT_RESIDUAL_COSINE: the residual rows before each layer and its attention output (hooks.attn_output),
    // both copied to the host when asked, and compared there (cache/attention_stats.hpp residual_cosines).
    std::vector<std::vector<float>> cosines(any_cosine ? static_cast<size_t>(c.n_layers) : 0);
    DeviceBuffer attn_out;
    std::vector<float> x_before, o_host;
    // [request][layer]: RKV_STAT_QUERY_MOMENTS (cache/attention_stats.hpp add_query_moments), merged below.
    std::vector<std::vector<AttentionStats>> moments(captures.size(),
                                                     std::vector<AttentionStats>(static_cast<size_t>(c.n_layers)));

    float* x = embed(dmodel_, tokens, ws_);
    std::vector<int64_t> pos(static_cast<size_t>(T));
    for (int64_t i = 0; i < T; ++i) pos[static_cast<size_t>(i)] = i;
    const DeviceBuffer positions = upload(*ctx_, pos);
    DeviceLayerHooks hooks;
    hooks.stats = pointers;
    const int64_t D = c.d_model;
    if (any_cosine) {
      attn_out = DeviceBuffer(*ctx_, static_cast<size_t>(T * D) * sizeof(float));
      hooks.attn_output = attn_out.as<float>();
      x_before.resize(static_cast<size_t>(T * D));
      o_host.resize(static_cast<size_t>(T * D));
    }
    const size_t es = kernels::dtype_size(dmodel_.dtype());
    for (int64_t l = 0; l < c.n_layers; ++l) {
      if (any_cosine) copy_to_host(*ctx_, x_before.data(), x, x_before.size() * sizeof(float));
      forward_layer(dmodel_, l, x, T, positions.as<int64_t>(), cache->kv.layers[static_cast<size_t>(l)], ws_,
                    pointers.empty() ? nullptr : &hooks);
      if (any_cosine) {
        copy_to_host(*ctx_, o_host.data(), attn_out.data(), o_host.size() * sizeof(float));
        cosines[static_cast<size_t>(l)] = residual_cosines(x_before.data(), o_host.data(), T, D);
      }
      if (nq > 0) {  // ws_.q holds this layer's rotated queries [T, H*d] until the next layer
        std::vector<char> rows(static_cast<size_t>(nq * H * d) * es);
        copy_to_host(*ctx_, rows.data(), ws_.q.as<char>() + static_cast<size_t>((T - nq) * H * d) * es, rows.size());
        r.queries[static_cast<size_t>(l)] = queries_by_head(rows, dmodel_.dtype(), nq, H, d);
      }
      if (any_moments) {  // the query moments from all T rotated queries, turned back before RoPE on the host
        std::vector<char> rows(static_cast<size_t>(T * H * d) * es);
        copy_to_host(*ctx_, rows.data(), ws_.q.as<char>(), rows.size());
        const std::vector<float> q = queries_by_head(rows, dmodel_.dtype(), T, H, d);
        const std::vector<float> pre = unrotate_queries(QueriesView{q.data(), H, T, d}, model_.layer_inv_freq(l));
        for (size_t k = 0; k < captures.size(); ++k)
          if (request.stats[k].query_moments)
            add_query_moments(QueriesView{pre.data(), H, T, d}, request.stats[k].query_skip,
                              moments[k][static_cast<size_t>(l)]);
      }
    }
    if (request.logits != LogitsFor::None) {
      std::vector<int64_t> rows;
      if (request.logits == LogitsFor::Last) {
        rows.push_back(T - 1);
      } else {
        for (int64_t i = 0; i < T; ++i) rows.push_back(i);
      }
      r.logits = final_logits(dmodel_, x, T, rows, ws_);
    }
    r.stats.resize(captures.size());
    for (size_t k = 0; k < captures.size(); ++k)
      for (int64_t l = 0; l < c.n_layers; ++l) {
        r.stats[k].push_back(captures[k].download(*ctx_, l));
        r.stats[k].back().query_mean = std::move(moments[k][static_cast<size_t>(l)].query_mean);
        r.stats[k].back().query_covariance = std::move(moments[k][static_cast<size_t>(l)].query_covariance);
        if (request.stats[k].residual_cosine) r.stats[k].back().residual_cosine = cosines[static_cast<size_t>(l)];
        // A sliding-window layer's key j is seen by the queries j .. j + W - 1 only: min(T - j, W) of them.
        if (const int64_t W = c.layer_window(l); W > 0)
          for (float& n : r.stats[k].back().query_counts) n = std::min(n, static_cast<float>(W));
      }
    ctx_->synchronize();
    r.cache = std::move(cache);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  }

  std::vector<float> extend(BackendCache& cache, const std::vector<int32_t>& tokens, int64_t start_pos,
                            LogitsFor which, const ExtendCapture& capture = {},
                            ExtendObservation* observed = nullptr) override {
    if (tokens.empty()) return {};
    CudaCache& c = device_cache(cache);
    if (!capture.attention_mass && !capture.queries && c.packed.empty() && c.sources.empty())
      return RKV_CUDA_NS::prefill(dmodel_, tokens, start_pos, c.kv, ws_, which);
    if ((capture.attention_mass || capture.queries) && !observed)
      throw InputError("extend: a capture was asked for without an observation to fill");
    ExtendObservation none;
    return extend_observed(c, tokens, start_pos, which, capture, observed ? *observed : none);
  }

  /// extend() with observations, packed or shared layers: the layer loop of RKV_CUDA_NS::prefill, with the
  /// attention-mass hook and a copy of each layer's rotated queries (ws_.q, [n, H d] until the next layer) as float32
  /// [H, n, d]; each layer's step is extend_layer().
  std::vector<float> extend_observed(CudaCache& cache, const std::vector<int32_t>& tokens, int64_t start_pos,
                                     LogitsFor which, const ExtendCapture& capture, ExtendObservation& observed) {
    DeviceKVCache& kv = cache.kv;
    const ModelConfig& c = model_.config;
    const int64_t n = static_cast<int64_t>(tokens.size()), H = c.n_heads, d = c.head_dim, L = c.n_layers;
    if (start_pos < 0 || start_pos > INT32_MAX - n)
      throw InputError("extend: positions " + str(start_pos) + " .. " + str(start_pos + n - 1) +
                       " are outside [0, 2^31) (the cache stores positions as int32)");
    if (static_cast<int64_t>(kv.layers.size()) != L)
      throw InputError("extend: the cache has " + str(static_cast<int64_t>(kv.layers.size())) + " layers, the model " +
                       str(L));
    observed = ExtendObservation{};
    if (capture.attention_mass) observed.attention_mass.resize(static_cast<size_t>(L));
    if (capture.queries) observed.queries.resize(static_cast<size_t>(L));
    float* x = embed(dmodel_, tokens, ws_);
    std::vector<int64_t> pos(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = start_pos + i;
    const DeviceBuffer positions = upload(*ctx_, pos);
    const size_t es = kernels::dtype_size(dmodel_.dtype());
    for (int64_t l = 0; l < L; ++l) {
      DeviceLayerHooks hooks;
      if (capture.attention_mass) hooks.attention_mass = &observed.attention_mass[static_cast<size_t>(l)];
      extend_layer(cache, l, x, n, positions.as<int64_t>(), &hooks);
      if (capture.queries) {
        std::vector<char> rows(static_cast<size_t>(n * H * d) * es);
        copy_to_host(*ctx_, rows.data(), ws_.q.data(), rows.size());
        observed.queries[static_cast<size_t>(l)] = queries_by_head(rows, dmodel_.dtype(), n, H, d);
      }
    }
    std::vector<float> logits;
    if (which != LogitsFor::None) {
      std::vector<int64_t> rows;
      for (int64_t i = which == LogitsFor::Last ? n - 1 : 0; i < n; ++i) rows.push_back(i);
      logits = final_logits(dmodel_, x, n, rows, ws_);
    }
    ctx_->synchronize();
    return logits;
  }

  /// One layer's step of extend_observed(): a shared layer attends over its source (unpacked into scratch_ when a
  /// codec stores it); a packed layer is unpacked into scratch_ for its attention, then the new entries join its tail
  /// and what leaves the residual window is packed (packed_cache.hpp); any other layer runs forward_layer.
  void extend_layer(CudaCache& cache, int64_t l, float* x, int64_t n, const int64_t* positions,
                    const DeviceLayerHooks* hooks) {
    DeviceKVCache& kv = cache.kv;
    if (const int64_t s = cache.shared_source(l); s != l) {
      const DevicePackedLayer* packed = cache.packed_layer(s);
      if (packed) unpack_layer(*ctx_, *packed, kv.layers[static_cast<size_t>(s)], 0, scratch_);
      forward_shared_layer(dmodel_, l, x, n, positions, packed ? scratch_ : kv.layers[static_cast<size_t>(s)], ws_,
                           hooks);
      return;
    }
    DeviceLayerKV& layer = kv.layers[static_cast<size_t>(l)];
    DevicePackedLayer* packed = cache.packed_layer(l);
    if (!packed) {
      forward_layer(dmodel_, l, x, n, positions, layer, ws_, hooks);
      return;
    }
    unpack_layer(*ctx_, *packed, layer, n, scratch_);
    std::vector<int64_t> first(static_cast<size_t>(layer.n_kv_heads));
    for (int64_t h = 0; h < layer.n_kv_heads; ++h) first[static_cast<size_t>(h)] = scratch_.head_length(h);
    forward_layer(dmodel_, l, x, n, positions, scratch_, ws_, hooks);
    append_entries(*ctx_, layer, scratch_, first, n);
    pack_oldest(*ctx_, *packed, layer);
  }

  std::unique_ptr<BackendCache> clone(const BackendCache& cache) override {
    const CudaCache& c = device_cache(cache);
    DeviceKVCache out;
    for (const DeviceLayerKV& l : c.kv.layers) out.layers.push_back(copy_layer(*ctx_, l, 0));
    auto copy = std::make_unique<CudaCache>(std::move(out));
    for (const DevicePackedLayer& p : c.packed) copy->packed.push_back(copy_packed(*ctx_, p));
    copy->sources = c.sources;
    return copy;
  }

  std::unique_ptr<BackendCache> clone_selected(const BackendCache& cache,
                                               const std::vector<const Selection*>& selections) override {
    const CudaCache& c = device_cache(cache);
    if (static_cast<int64_t>(selections.size()) != c.n_layers())
      throw InputError("clone_selected: " + str(static_cast<int64_t>(selections.size())) + " selections for " +
                       str(c.n_layers()) + " layers");
    DeviceKVCache out;
    for (size_t l = 0; l < c.kv.layers.size(); ++l) {
      DeviceLayerKV layer = copy_layer(*ctx_, c.kv.layers[l], 0);  // one layer at a time, compacted before the next
      if (selections[l]) {
        c.refuse_packed(static_cast<int64_t>(l), "compaction");
        RKV_CUDA_NS::compact_layer(*ctx_, layer, *selections[l]);
      }
      out.layers.push_back(std::move(layer));
    }
    auto copy = std::make_unique<CudaCache>(std::move(out));
    for (const DevicePackedLayer& p : c.packed) copy->packed.push_back(copy_packed(*ctx_, p));
    copy->sources = c.sources;
    return copy;
  }

  std::vector<int32_t> layer_positions(const BackendCache& cache, int64_t layer) override {
    const CudaCache& c = device_cache(cache);
    c.check(layer);
    const DeviceLayerKV& kv = c.kv.layers[static_cast<size_t>(layer)];
    const DevicePackedLayer* packed = c.packed_layer(layer);
    std::vector<int32_t> out;
    if (!kv.has_positions() && !(packed && packed->positions)) return out;
    for (int64_t h = 0; h < kv.n_kv_heads; ++h) {
      if (packed) {
        const std::vector<int32_t> p = packed_positions(*ctx_, *packed, h);
        out.insert(out.end(), p.begin(), p.end());
      }
      if (!kv.has_positions() || kv.head_length(h) == 0) continue;
      const std::vector<int32_t> head = download<int32_t>(
          *ctx_, kv.pos.as<char>() + static_cast<size_t>(kv.head_row(h)) * sizeof(int32_t),
          static_cast<size_t>(kv.head_length(h)));
      out.insert(out.end(), head.begin(), head.end());
    }
    return out;
  }

  LayerKV download_layer(const BackendCache& cache, int64_t layer) override {
    const CudaCache& c = device_cache(cache);
    c.check(layer);
    if (const DevicePackedLayer* packed = c.packed_layer(layer)) {  // dequantized, each head exactly its length
      DeviceLayerKV whole;
      unpack_layer(*ctx_, *packed, c.kv.layers[static_cast<size_t>(layer)], 0, whole);
      return RKV_CUDA_NS::download_layer(*ctx_, whole);
    }
    return RKV_CUDA_NS::download_layer(*ctx_, c.kv.layers[static_cast<size_t>(layer)]);
  }

  TensorView layer_view(const BackendCache& cache, int64_t layer, bool values) override {
    const CudaCache& c = device_cache(cache);
    c.check(layer);
    c.refuse_packed(layer, "a tensor view");
    return RKV_CUDA_NS::layer_view(*ctx_, c.kv.layers[static_cast<size_t>(layer)], values);
  }

  void reserve(BackendCache& cache, int64_t extra) override {
    if (extra < 0) throw InputError("reserve: extra must be >= 0, got " + str(extra));
    CudaCache& c = device_cache(cache);
    for (int64_t l = 0; l < c.n_layers(); ++l) {
      if (c.packed_layer(l) || c.shared_source(l) != l) continue;
      DeviceLayerKV& layer = c.kv.layers[static_cast<size_t>(l)];
      RKV_CUDA_NS::reserve_layer(*ctx_, layer, layer.length + extra);
    }
  }

  void truncate(BackendCache& cache, int64_t length) override {
    CudaCache& c = device_cache(cache);
    for (int64_t l = 0; l < c.n_layers(); ++l) {  // every check before the first change
      c.refuse_packed(l, "truncation");
      const DeviceLayerKV& layer = c.kv.layers[static_cast<size_t>(l)];
      if (layer.per_head()) throw InputError("truncate: layer " + str(l) + " holds per-head lengths; cannot cut it back");
      if (length < 0 || length > layer.length)
        throw InputError("truncate: length " + str(length) + " is outside [0, " + str(layer.length) + "] of layer " +
                         str(l));
    }
    for (DeviceLayerKV& layer : c.kv.layers) {
      layer.length = length;
      if (layer.capacity != length) layer = copy_layer(*ctx_, layer, 0);  // the old buffers are freed here
    }
  }

  std::vector<float> value_output_norms(const BackendCache& cache, int64_t layer) override {
    const CudaCache& c = device_cache(cache);
    c.check(layer);
    c.refuse_packed(layer, "value-output norms");
    const DeviceLayerKV& kv = c.kv.layers[static_cast<size_t>(layer)];
    if (kv.per_head()) throw InputError("value-output norms: layer " + str(layer) + " holds per-head lengths");
    const ModelConfig& mc = dmodel_.config();
    const int64_t T = kv.length, H = mc.n_heads, d = kv.head_dim, D = mc.d_model, G = H / kv.n_kv_heads;
    const int64_t rows = std::min<int64_t>(T, 256);  // a row block of one head's outputs: rows x D float32
    const DeviceLayerWeights& w = dmodel_.layer(layer);
    const DType wt = dmodel_.precision() == Precision::FP32 ? DType::F32 : DType::BF16;
    const size_t es = kernels::dtype_size(wt);
    DeviceBuffer y(*ctx_, static_cast<size_t>(std::max<int64_t>(rows, 1) * D) * sizeof(float));
    DeviceBuffer norms(*ctx_, static_cast<size_t>(std::max<int64_t>(H * T, 1)) * sizeof(float));
    for (int64_t h = 0; h < H; ++h) {
      const char* v = kv.v.as<char>() + static_cast<size_t>((h / G) * kv.capacity * d) * kv.elem_bytes();
      const char* wo_h = w.wo.as<char>() + static_cast<size_t>(h * d) * es;  // head h's columns of W_o [D, H d]
      for (int64_t j0 = 0; j0 < T; j0 += rows) {
        const int64_t m = std::min(rows, T - j0);
        linear(*ctx_, m, d, D, wo_h, wt, v + static_cast<size_t>(j0 * d) * kv.elem_bytes(), kv.dtype, y.data(),
               DType::F32, 0.0f, H * d);
        RKV_CUDA_CHECK(kernels::row_l1(y.as<float>(), m, D, norms.as<float>() + h * T + j0, ctx_->stream()));
      }
    }
    return download<float>(*ctx_, norms.as<float>(), static_cast<size_t>(H * T));
  }

  void compact_layer(BackendCache& cache, int64_t layer, const Selection& sel) override {
    CudaCache& c = device_cache(cache);
    c.check(layer);
    c.refuse_packed(layer, "compaction");
    RKV_CUDA_NS::compact_layer(*ctx_, c.kv.layers[static_cast<size_t>(layer)], sel);
  }

  void rerotate_layer(BackendCache& cache, int64_t layer) override {
    CudaCache& c = device_cache(cache);
    c.check(layer);
    c.refuse_packed(layer, "key re-rotation");
    RKV_CUDA_NS::rerotate_layer(*ctx_, c.kv.layers[static_cast<size_t>(layer)], dmodel_.layer_inv_freq(layer), layer);
  }

  void encode_layer(BackendCache& cache, int64_t layer, const CodecSpec& codec) override {
    encode_layer_classes(cache, layer, codec, {});
  }

  void encode_layer_classes(BackendCache& cache, int64_t layer, const CodecSpec& codec,
                            const std::vector<uint8_t>& entry_class) override {
    CudaCache& c = device_cache(cache);
    c.check(layer);
    c.refuse_packed(layer, "encoding");
    DeviceLayerKV& tail = c.kv.layers[static_cast<size_t>(layer)];
    check_codec(codec, tail.head_dim, "layer " + str(layer));
    if (codec.none()) return;
    if (model().config.is_sliding(layer) && std::any_of(entry_class.begin(), entry_class.end(), [](uint8_t c) { return c != 0; }))
      throw InputError("layer " + str(layer) + ": token precision classes reorder a layer's entries, and a "
                       "sliding-window layer's attention needs them in position order");
    const std::vector<CodecSpec> classes = token_class_codecs(codec);
    for (const CodecSpec& k : classes) check_codec(k, tail.head_dim, "layer " + str(layer) + " token class");
    DevicePackedLayer p = encode_device_layer(*ctx_, tail, codec, classes, entry_class);
    if (c.packed.empty()) c.packed.resize(c.kv.layers.size());
    c.packed[static_cast<size_t>(layer)] = std::move(p);
  }

  void share_layer(BackendCache& cache, int64_t layer, int64_t source) override {
    CudaCache& c = device_cache(cache);
    check_share_layer(c, layer, source);
    c.refuse_packed(layer, "sharing");
    if (c.sources.empty())
      for (int64_t l = 0; l < c.n_layers(); ++l) c.sources.push_back(l);
    DeviceLayerKV& own = c.kv.layers[static_cast<size_t>(layer)];
    DeviceLayerKV empty;  // the same geometry, no entries and no storage
    empty.n_kv_heads = own.n_kv_heads;
    empty.head_dim = own.head_dim;
    empty.dtype = own.dtype;
    own = std::move(empty);
    c.sources[static_cast<size_t>(layer)] = source;
  }

  std::unique_ptr<ProfilerSession> new_profiler(int64_t prefix_tokens, int64_t window_tokens,
                                                const ProtectedSpec& protect) override {
    if (protect.sinks < 0 || protect.recent < 0) throw InputError("profiler: negative sinks or recent count");
    return std::make_unique<CudaProfilerSession>(dmodel_, prefix_tokens, window_tokens, protect);
  }

  void begin_phase(const std::string& name) override { ctx_->begin_phase(name); }
  void end_phase() override {
    const PhaseMemory p = ctx_->end_phase();
    phases_.push_back(PhaseMemoryRecord{p.phase, p.peak_bytes});
  }
  std::vector<PhaseMemoryRecord> memory_phases() const override { return phases_; }

 private:
  const Model& model_;
  std::unique_ptr<Context> ctx_;
  DeviceModel dmodel_;
  DeviceWorkspace ws_;
  DeviceLayerKV scratch_;  ///< a packed layer unpacked while one extend runs over it
  std::vector<PhaseMemoryRecord> phases_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const Model& model, const BackendOptions& options) {
  return std::make_unique<CudaBackend>(model, options);
}

}  // namespace rkv::RKV_CUDA_NS
