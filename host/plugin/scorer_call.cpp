#include "plugin/scorer_call.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/errors.hpp"

namespace rkv {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

constexpr uint64_t kKnownStats = RKV_STAT_KEYS | RKV_STAT_VALUES | RKV_STAT_WINDOW_ATTENTION |
                                 RKV_STAT_CUMULATIVE_ATTENTION | RKV_STAT_WINDOW_QUERIES;

/// A CPU float32 row-major view; `shape` must outlive the tensor.
DLTensor cpu_f32(const float* data, int32_t ndim, int64_t* shape) {
  DLTensor t{};
  t.data = const_cast<float*>(data);
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = ndim;
  t.dtype = DLDataType{kDLFloat, 32, 1};
  t.shape = shape;
  t.strides = nullptr;
  t.byte_offset = 0;
  return t;
}

/// Keys or values of positions 0 .. T-1 as a contiguous [H_kv, T, d] array: the layer's own storage when its
/// capacity is exactly T, else a copy into `scratch`.
const float* contiguous(const std::vector<float>& storage, const LayerKV& kv, int64_t T, std::vector<float>& scratch) {
  if (kv.capacity == T) return storage.data();
  const int64_t d = kv.head_dim;
  scratch.resize(static_cast<size_t>(kv.n_kv_heads * T * d));
  for (int64_t h = 0; h < kv.n_kv_heads; ++h)
    std::memcpy(scratch.data() + h * T * d, storage.data() + h * kv.capacity * d, static_cast<size_t>(T * d) * sizeof(float));
  return scratch.data();
}

}  // namespace

int64_t ScorerRequirements::effective_window(int64_t T) const { return std::min(window, T); }

int64_t ScorerRequirements::protected_count(int64_t T) const {
  return static_cast<int64_t>(protected_positions(T, protected_spec()).size());
}

AttentionStatsOptions ScorerRequirements::stats_options() const {
  AttentionStatsOptions o;
  o.window_attention = wants(RKV_STAT_WINDOW_ATTENTION);
  o.cumulative_attention = wants(RKV_STAT_CUMULATIVE_ATTENTION);
  o.window = window;
  return o;
}

ScorerRequirements query_scorer_requirements(const PluginInstance& inst, const rkv_attention_shape& shape) {
  const std::string who = "scorer '" + inst.id() + "'";
  const auto* vt = static_cast<const rkv_scorer_v1*>(inst.interface(RKV_INTERFACE_SCORER_V1));
  if (!RKV_HAS_FIELD(vt, rkv_scorer_v1, score) || !vt->requirements || !vt->score)
    throw InputError(who + ": vtable lacks requirements/score");
  rkv_attention_shape sh = shape;
  sh.struct_size = sizeof sh;
  rkv_scorer_requirements r{};
  r.struct_size = sizeof r;
  DiagnosticLog log;
  const rkv_status s = vt->requirements(inst.raw(), &sh, &r, log.abi());
  if (s == RKV_ERROR_CANCELLED) throw Cancelled();
  if (s != RKV_OK) throw InputError(who + ": requirements failed (" + status_name(s) + "): " + log.error_text());
  ScorerRequirements req;
  req.stats = r.stats;
  req.window = r.window;
  req.sinks = r.sinks;
  req.recent = r.recent;
  req.decode_scoring = r.decode_scoring != 0;  // zero-filled above: 0 for a plugin built before ABI minor 2
  req.decode_stats = req.decode_scoring ? r.decode_stats : 0;
  if ((req.decode_stats & ~kKnownStats) != 0)
    throw InputError(who + " asks for unknown decode-time statistics (mask " + std::to_string(req.decode_stats) + ")");
  if ((req.stats & ~kKnownStats) != 0)
    throw InputError(who + " asks for unknown statistics (mask " + std::to_string(req.stats) + ")");
  if (req.window < 0 || req.sinks < 0 || req.recent < 0)
    throw InputError(who + " declared negative requirements (window " + str(req.window) + ", sinks " +
                     str(req.sinks) + ", recent " + str(req.recent) + ")");
  const uint64_t windowed = RKV_STAT_WINDOW_ATTENTION | RKV_STAT_WINDOW_QUERIES;
  if (((req.stats | req.decode_stats) & windowed) != 0 && req.window < 1)
    throw InputError(who + " asks for window statistics with window " + str(req.window) + " (must be >= 1)");
  return req;
}

ScoreResult call_scorer(const PluginInstance& inst, const ScorerRequirements& req, const ScorerCallInputs& in) {
  const std::string who = "scorer '" + inst.id() + "' (layer " + str(in.layer) + ")";
  if (!in.kv) throw InputError(who + ": no cache given");
  const LayerKV& kv = *in.kv;
  const int64_t T = in.prefix_tokens < 0 ? kv.length : in.prefix_tokens;
  const int64_t Hkv = kv.n_kv_heads, d = kv.head_dim, H = in.n_heads;
  if (T < 1 || T > kv.length)
    throw InputError(who + ": prefix length T = " + str(T) + " must be in [1, " + str(kv.length) + "] (the cache)");
  const int64_t w = in.window >= 0 ? in.window : req.effective_window(T);
  const auto* vt = static_cast<const rkv_scorer_v1*>(inst.interface(RKV_INTERFACE_SCORER_V1));

  int64_t kv_shape[3] = {Hkv, T, d}, ht_shape[2] = {H, T}, wq_shape[3] = {H, w, d}, out_shape[2] = {Hkv, T};
  std::vector<float> k_scratch, v_scratch;
  DLTensor keys{}, values{}, win{}, cum{}, wq{};
  rkv_scorer_inputs si{};
  si.struct_size = sizeof si;
  si.layer = in.layer;
  si.prefix_tokens = T;
  si.window = w;
  if (req.wants(RKV_STAT_KEYS)) {
    keys = cpu_f32(contiguous(kv.k, kv, T, k_scratch), 3, kv_shape);
    si.keys = &keys;
  }
  if (req.wants(RKV_STAT_VALUES)) {
    values = cpu_f32(contiguous(kv.v, kv, T, v_scratch), 3, kv_shape);
    si.values = &values;
  }
  auto need_stats = [&](const char* what) {
    if (!in.stats) throw InputError(who + ": " + what + " requested but no attention statistics given");
    if (in.stats->n_heads != H || in.stats->prefix_tokens != T)
      throw InputError(who + ": attention statistics are [" + str(in.stats->n_heads) + ", " +
                       str(in.stats->prefix_tokens) + "], expected [H = " + str(H) + ", T = " + str(T) + "]");
  };
  if (req.wants(RKV_STAT_WINDOW_ATTENTION)) {
    need_stats("window attention");
    if (in.stats->window_attention.size() != static_cast<size_t>(H * T) || in.stats->window != w)
      throw InputError(who + ": window attention missing or not over the last " + str(w) + " queries");
    win = cpu_f32(in.stats->window_attention.data(), 2, ht_shape);
    si.window_attention = &win;
  }
  if (req.wants(RKV_STAT_CUMULATIVE_ATTENTION)) {
    need_stats("cumulative attention");
    if (in.stats->cumulative_attention.size() != static_cast<size_t>(H * T))
      throw InputError(who + ": cumulative attention missing");
    cum = cpu_f32(in.stats->cumulative_attention.data(), 2, ht_shape);
    si.cumulative_attention = &cum;
  }
  if (req.wants(RKV_STAT_WINDOW_QUERIES)) {
    if (!in.window_queries || in.window_queries->size() != static_cast<size_t>(H * w * d))
      throw InputError(who + ": window queries [H = " + str(H) + ", w = " + str(w) + ", d = " + str(d) +
                       "] requested but not given");
    wq = cpu_f32(in.window_queries->data(), 3, wq_shape);
    si.window_queries = &wq;
  }
  si.stream = nullptr;

  ScoreResult res;
  // The output is its own heap allocation of exactly H_kv * T floats (never a view into a bigger buffer), so a
  // plugin writing past it is a heap-buffer-overflow in the sanitizer build (tests/reliability).
  // Pre-filled with NaN: a scorer that leaves entries unwritten is caught by the finiteness check.
  res.scores = std::vector<float>(static_cast<size_t>(Hkv * T), std::numeric_limits<float>::quiet_NaN());
  DLTensor out = cpu_f32(res.scores.data(), 2, out_shape);
  DiagnosticLog log;
  const rkv_status s = vt->score(inst.raw(), &si, &out, log.abi());
  if (s == RKV_ERROR_CANCELLED) throw Cancelled();
  if (s != RKV_OK) throw InputError(who + " failed (" + status_name(s) + "): " + log.error_text());
  for (const auto& m : log.warnings()) res.warnings.push_back(who + ": " + m);
  return res;
}

ScoreResult run_scorer(const PluginInstance& inst, const ScorerRequirements& req, const ScorerCallInputs& in) {
  const std::string who = "scorer '" + inst.id() + "' (layer " + str(in.layer) + ")";
  ScoreResult res = call_scorer(inst, req, in);
  const int64_t Hkv = in.kv->n_kv_heads, T = in.prefix_tokens < 0 ? in.kv->length : in.prefix_tokens;
  for (int64_t h = 0; h < Hkv; ++h)
    for (int64_t j = 0; j < T; ++j) {
      const float v = res.scores[static_cast<size_t>(h * T + j)];
      if (!std::isfinite(v))
        throw InputError(who + " returned a non-finite score (" + std::to_string(v) + ") at KV head " + str(h) +
                         ", position " + str(j));
    }
  return res;
}

}  // namespace rkv
