#include "plugin/scorer_call.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/cancel.hpp"
#include "core/errors.hpp"
#include "model/rope.hpp"
#include "plugin/call_guard.hpp"

namespace rkv {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

constexpr uint64_t kKnownStats = RKV_STAT_KEYS | RKV_STAT_VALUES | RKV_STAT_WINDOW_ATTENTION |
                                 RKV_STAT_CUMULATIVE_ATTENTION | RKV_STAT_WINDOW_QUERIES | RKV_STAT_PRE_ROPE_KEYS |
                                 RKV_STAT_QUERY_MOMENTS | RKV_STAT_VALUE_OUTPUT_NORMS | RKV_STAT_RESIDUAL_COSINE;

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

/// Keys before RoPE of entries 0 .. T-1 as a contiguous [H_kv, T, d] copy: each key turned back by its stored
/// position (kv.pos, or its cache index when none are tracked) with the layer's frequencies.
std::vector<float> pre_rope_keys(const LayerKV& kv, int64_t T, const std::vector<double>& inv_freq) {
  const int64_t d = kv.head_dim, half = d / 2;
  std::vector<float> scratch;
  const float* k = contiguous(kv.k, kv, T, scratch);
  std::vector<float> out(k, k + kv.n_kv_heads * T * d);
  std::vector<int64_t> pos(static_cast<size_t>(T));
  std::vector<float> cs, sn;
  for (int64_t h = 0; h < kv.n_kv_heads; ++h) {
    for (int64_t j = 0; j < T; ++j) pos[static_cast<size_t>(j)] = kv.has_positions() ? *kv.pos_at(h, j) : j;
    rope_tables(inv_freq, pos.data(), T, cs, sn);
    for (int64_t j = 0; j < T; ++j)
      rope_unrotate_half(out.data() + (h * T + j) * d, half, cs.data() + j * half, sn.data() + j * half);
  }
  return out;
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
  o.query_moments = wants(RKV_STAT_QUERY_MOMENTS);
  o.query_skip = o.query_moments ? query_skip : 0;
  o.residual_cosine = wants(RKV_STAT_RESIDUAL_COSINE);
  return o;
}

ScorerRequirements query_scorer_requirements(const PluginInstance& inst, const rkv_attention_shape& shape) {
  std::optional<ScorerRequirements> req = query_scorer_requirements(inst, shape, false);
  return *req;  // set: a refusal threw
}

std::optional<ScorerRequirements> query_scorer_requirements(const PluginInstance& inst,
                                                            const rkv_attention_shape& shape, bool shape_may_fail) {
  // A per-prompt signal states its needs through the same struct (rkv.prompt_signal/1, ABI minor 7).
  const bool signal = inst.info().descriptor->kind == RKV_KIND_SIGNAL;
  const std::string who = (signal ? "per-prompt signal '" : "scorer '") + inst.id() + "'";
  decltype(rkv_scorer_v1::requirements) requirements = nullptr;
  if (signal) {
    const auto* vt = static_cast<const rkv_prompt_signal_v1*>(inst.interface(RKV_INTERFACE_PROMPT_SIGNAL_V1));
    if (!RKV_HAS_FIELD(vt, rkv_prompt_signal_v1, layer_value) || !vt->requirements || !vt->layer_value)
      throw InputError(who + ": does not serve " RKV_INTERFACE_PROMPT_SIGNAL_V1 " (requirements/layer_value)");
    requirements = vt->requirements;
  } else {
    const auto* vt = static_cast<const rkv_scorer_v1*>(inst.interface(RKV_INTERFACE_SCORER_V1));
    if (!RKV_HAS_FIELD(vt, rkv_scorer_v1, score) || !vt->requirements || !vt->score)
      throw InputError(who + ": vtable lacks requirements/score");
    requirements = vt->requirements;
  }
  rkv_attention_shape sh = shape;
  sh.struct_size = sizeof sh;
  rkv_scorer_requirements r{};
  r.struct_size = sizeof r;
  DiagnosticLog log;
  throw_if_cancelled();  // a cancellation point between plugin calls (core/cancel.hpp)
  const rkv_status s = [&] {
    const PluginCallScope in_flight(inst.id(), "requirements");
    return requirements(inst.raw(), &sh, &r, log.abi());
  }();
  if (s == RKV_ERROR_CANCELLED) throw Cancelled();
  if (s != RKV_OK && shape_may_fail) return std::nullopt;
  if (s != RKV_OK) throw InputError(who + ": requirements failed (" + status_name(s) + "): " + log.error_text());
  ScorerRequirements req;
  req.stats = r.stats;
  req.window = r.window;
  req.sinks = r.sinks;
  req.recent = r.recent;
  req.decode_scoring = r.decode_scoring != 0;  // zero-filled above: 0 for a plugin built before ABI minor 2
  req.decode_stats = req.decode_scoring ? r.decode_stats : 0;
  req.query_skip = r.query_skip;  // zero-filled: 0 for a plugin built before ABI minor 4
  req.budget_dependent = r.budget_dependent;  // zero-filled: RKV_BUDGET_NONE for a plugin built before ABI minor 6
  if (req.budget_dependent > RKV_BUDGET_ALLOCATION)
    throw InputError(who + " declared budget_dependent = " + std::to_string(req.budget_dependent) +
                     " (RKV_BUDGET_NONE 0, RKV_BUDGET_FINAL 1 or RKV_BUDGET_ALLOCATION 2)");
  if (signal && (req.decode_scoring || req.budget_dependent))
    throw InputError(who + " declared decode_scoring or budget_dependent: a per-prompt signal reads the prefill's "
                     "statistics, before any budget exists (both must be 0)");
  if (signal) req.sinks = req.recent = 0;  // a signal protects nothing
  if ((req.decode_stats & ~kKnownStats) != 0)
    throw InputError(who + " asks for unknown decode-time statistics (mask " + std::to_string(req.decode_stats) + ")");
  if ((req.stats & ~kKnownStats) != 0)
    throw InputError(who + " asks for unknown statistics (mask " + std::to_string(req.stats) + ")");
  if (req.window < 0 || req.sinks < 0 || req.recent < 0 || req.query_skip < 0)
    throw InputError(who + " declared negative requirements (window " + str(req.window) + ", sinks " +
                     str(req.sinks) + ", recent " + str(req.recent) + ", query_skip " + str(req.query_skip) + ")");
  if ((req.decode_stats & RKV_STAT_QUERY_MOMENTS) != 0)
    throw InputError(who + " asks for the prompt's query moments at decode time (a prefill-only statistic)");
  if ((req.decode_stats & RKV_STAT_VALUE_OUTPUT_NORMS) != 0)
    throw InputError(who + " asks for the value-output norms at decode time (a prefill-only statistic)");
  if ((req.decode_stats & RKV_STAT_RESIDUAL_COSINE) != 0)
    throw InputError(who + " asks for the residual cosine at decode time (a prefill-only statistic)");
  const uint64_t windowed = RKV_STAT_WINDOW_ATTENTION | RKV_STAT_WINDOW_QUERIES;
  if (((req.stats | req.decode_stats) & windowed) != 0 && req.window < 1)
    throw InputError(who + " asks for window statistics with window " + str(req.window) + " (must be >= 1)");
  return req;
}

ScorerInputTensors::ScorerInputTensors(const std::string& who, const ScorerRequirements& req,
                                       const ScorerCallInputs& in) {
  if (!in.kv) throw InputError(who + ": no cache given");
  const LayerKV& kv = *in.kv;
  const int64_t T = in.prefix_tokens < 0 ? kv.length : in.prefix_tokens;
  const int64_t Hkv = kv.n_kv_heads, d = kv.head_dim, H = in.n_heads;
  if (T < 1 || T > kv.length)
    throw InputError(who + ": prefix length T = " + str(T) + " must be in [1, " + str(kv.length) + "] (the cache)");
  const int64_t w = in.window >= 0 ? in.window : req.effective_window(T);
  prefix_tokens_ = T;
  n_kv_heads_ = Hkv;
  kv_shape_[0] = Hkv, kv_shape_[1] = T, kv_shape_[2] = d;
  ht_shape_[0] = H, ht_shape_[1] = T;
  wq_shape_[0] = H, wq_shape_[1] = w, wq_shape_[2] = d;
  mean_shape_[0] = H, mean_shape_[1] = d;
  cov_shape_[0] = H, cov_shape_[1] = d, cov_shape_[2] = d;
  freq_shape_[0] = d / 2;
  budgets_shape_[0] = Hkv;
  t_shape_[0] = T;
  rkv_scorer_inputs& si = si_;
  si = rkv_scorer_inputs{};
  si.struct_size = sizeof si;
  si.layer = in.layer;
  si.prefix_tokens = T;
  si.window = w;
  if (req.wants(RKV_STAT_KEYS)) {
    keys_ = cpu_f32(contiguous(kv.k, kv, T, k_scratch_), 3, kv_shape_);
    si.keys = &keys_;
  }
  if (req.wants(RKV_STAT_VALUES)) {
    values_ = cpu_f32(contiguous(kv.v, kv, T, v_scratch_), 3, kv_shape_);
    si.values = &values_;
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
    win_ = cpu_f32(in.stats->window_attention.data(), 2, ht_shape_);
    si.window_attention = &win_;
  }
  if (req.wants(RKV_STAT_CUMULATIVE_ATTENTION)) {
    need_stats("cumulative attention");
    if (in.stats->cumulative_attention.size() != static_cast<size_t>(H * T))
      throw InputError(who + ": cumulative attention missing");
    cum_ = cpu_f32(in.stats->cumulative_attention.data(), 2, ht_shape_);
    si.cumulative_attention = &cum_;
  }
  if (req.wants(RKV_STAT_WINDOW_QUERIES)) {
    if (!in.window_queries || in.window_queries->size() != static_cast<size_t>(H * w * d))
      throw InputError(who + ": window queries [H = " + str(H) + ", w = " + str(w) + ", d = " + str(d) +
                       "] requested but not given");
    wq_ = cpu_f32(in.window_queries->data(), 3, wq_shape_);
    si.window_queries = &wq_;
  }
  if (in.rope_inv_freq) {
    if (static_cast<int64_t>(in.rope_inv_freq->size()) * 2 != d)
      throw InputError(who + ": " + str(static_cast<int64_t>(in.rope_inv_freq->size())) +
                       " RoPE frequencies for head dimension " + str(d));
    freq_.data = const_cast<double*>(in.rope_inv_freq->data());
    freq_.device = DLDevice{kDLCPU, 0};
    freq_.ndim = 1;
    freq_.dtype = DLDataType{kDLFloat, 64, 1};
    freq_.shape = freq_shape_;
    si.rope_inv_freq = &freq_;
  }
  if (req.wants(RKV_STAT_PRE_ROPE_KEYS)) {
    if (!in.rope_inv_freq) throw InputError(who + ": keys before RoPE requested but no RoPE frequencies given");
    k0_ = pre_rope_keys(kv, T, *in.rope_inv_freq);
    k0t_ = cpu_f32(k0_.data(), 3, kv_shape_);
    si.pre_rope_keys = &k0t_;
  }
  if (req.wants(RKV_STAT_QUERY_MOMENTS)) {
    need_stats("query moments");
    if (in.stats->query_mean.size() != static_cast<size_t>(H * d) ||
        in.stats->query_covariance.size() != static_cast<size_t>(H * d * d))
      throw InputError(who + ": query moments [H = " + str(H) + ", d = " + str(d) + "] missing");
    qmean_ = cpu_f32(in.stats->query_mean.data(), 2, mean_shape_);
    qcov_ = cpu_f32(in.stats->query_covariance.data(), 3, cov_shape_);
    si.query_mean = &qmean_;
    si.query_covariance = &qcov_;
  }
  if (req.wants(RKV_STAT_VALUE_OUTPUT_NORMS)) {
    const std::vector<float>* n = in.value_output_norms;
    if (!n || n->size() != static_cast<size_t>(H * kv.length))
      throw InputError(who + ": value-output norms [H = " + str(H) + ", " + str(kv.length) +
                       " entries] requested but not given");
    const float* rows = n->data();
    if (T < kv.length) {  // the first T entries of each head's row
      norm_rows_.resize(static_cast<size_t>(H * T));
      for (int64_t h = 0; h < H; ++h) std::copy_n(n->data() + h * kv.length, T, norm_rows_.data() + h * T);
      rows = norm_rows_.data();
    }
    vnorms_ = cpu_f32(rows, 2, ht_shape_);
    si.value_output_norms = &vnorms_;
  }
  if (req.wants(RKV_STAT_RESIDUAL_COSINE)) {
    need_stats("residual cosine");
    if (in.stats->residual_cosine.size() != static_cast<size_t>(T))
      throw InputError(who + ": residual cosine [T = " + str(T) + "] missing (a one-shot prefill computes it)");
    rc_ = cpu_f32(in.stats->residual_cosine.data(), 1, t_shape_);
    si.residual_cosine = &rc_;
  }
  if (req.budget_dependent && in.head_budgets) {
    const std::vector<int64_t>& b = *in.head_budgets;
    if (static_cast<int64_t>(b.size()) != Hkv)
      throw InputError(who + ": " + str(static_cast<int64_t>(b.size())) + " head budgets for " + str(Hkv) +
                       " KV heads");
    for (int64_t h = 0; h < Hkv; ++h)
      if (b[static_cast<size_t>(h)] < 0 || b[static_cast<size_t>(h)] > T)
        throw InputError(who + ": KV head " + str(h) + " budget " + str(b[static_cast<size_t>(h)]) +
                         " outside [0, T = " + str(T) + "]");
    budgets_.data = const_cast<int64_t*>(b.data());
    budgets_.device = DLDevice{kDLCPU, 0};
    budgets_.ndim = 1;
    budgets_.dtype = DLDataType{kDLInt, 64, 1};
    budgets_.shape = budgets_shape_;
    si.head_budgets = &budgets_;
  }
  if (in.attention_window < 0) throw InputError(who + ": attention window " + str(in.attention_window) + " < 0");
  si.attention_window = in.attention_window;
  si.stream = nullptr;
}

ScoreResult call_scorer(const PluginInstance& inst, const ScorerRequirements& req, const ScorerCallInputs& in) {
  const std::string who = "scorer '" + inst.id() + "' (layer " + str(in.layer) + ")";
  const auto* vt = static_cast<const rkv_scorer_v1*>(inst.interface(RKV_INTERFACE_SCORER_V1));
  const ScorerInputTensors inputs(who, req, in);
  const int64_t Hkv = inputs.n_kv_heads(), T = inputs.prefix_tokens();
  int64_t out_shape[2] = {Hkv, T};
  ScoreResult res;
  // The output is its own heap allocation of exactly H_kv * T floats (never a view into a bigger buffer), so a
  // plugin writing past it is a heap-buffer-overflow in the sanitizer build (tests/reliability).
  // Pre-filled with NaN: a scorer that leaves entries unwritten is caught by the finiteness check.
  res.scores = std::vector<float>(static_cast<size_t>(Hkv * T), std::numeric_limits<float>::quiet_NaN());
  DLTensor out = cpu_f32(res.scores.data(), 2, out_shape);
  DiagnosticLog log;
  throw_if_cancelled();  // between per-layer calls: a run's SIGTERM does not wait for the remaining layers
  const rkv_status s = [&] {
    const PluginCallScope in_flight(inst.id(), "score");
    return vt->score(inst.raw(), inputs.abi(), &out, log.abi());
  }();
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
