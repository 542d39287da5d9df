#include "plugin/allocator_call.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "cache/budget.hpp"
#include "core/cancel.hpp"
#include "core/errors.hpp"
#include "plugin/call_guard.hpp"

namespace rkv {

namespace {

DLTensor cpu_f64_vector(double* data, int64_t* shape) {
  DLTensor t{};
  t.data = data;
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 1;
  t.dtype = DLDataType{kDLFloat, 64, 1};
  t.shape = shape;
  t.strides = nullptr;
  t.byte_offset = 0;
  return t;
}

DLTensor cpu_tensor(void* data, DLDataType dtype, int32_t ndim, int64_t* shape) {
  DLTensor t{};
  t.data = data;
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = ndim;
  t.dtype = dtype;
  t.shape = shape;
  return t;
}

/// The spans [|A|] a request carries: `spans` checked (length |A|, each in [1, T]), or T for every layer when empty.
std::vector<int64_t> layer_spans_or_T(const std::vector<int64_t>& spans, int64_t n_layers, int64_t T,
                                      const std::string& who) {
  if (spans.empty()) return std::vector<int64_t>(static_cast<size_t>(std::max<int64_t>(n_layers, 0)), T);
  if (static_cast<int64_t>(spans.size()) != n_layers)
    throw InputError(who + ": " + std::to_string(spans.size()) + " layer spans for " + std::to_string(n_layers) +
                     " compressible layers");
  for (size_t l = 0; l < spans.size(); ++l)
    if (spans[l] < 1 || spans[l] > T)
      throw InputError(who + ": span of compressible layer " + std::to_string(l) + " is " + std::to_string(spans[l]) +
                       ", outside [1, T = " + std::to_string(T) + "]");
  return spans;
}

}  // namespace

void validate_profile(const std::vector<double>& profile, int64_t n_layers, const std::string& what) {
  if (static_cast<int64_t>(profile.size()) != n_layers)
    throw InputError(what + ": sensitivity profile has " + std::to_string(profile.size()) +
                     " values but there are " + std::to_string(n_layers) + " compressible layers");
  for (size_t l = 0; l < profile.size(); ++l)
    if (!std::isfinite(profile[l]))
      throw InputError(what + ": sensitivity profile value " + std::to_string(l) + " is not finite (" +
                       std::to_string(profile[l]) + ")");
}

Allocation call_allocator(const PluginInstance& inst, const std::vector<double>& profile, int64_t B, int64_t T,
                          int64_t n_layers, int64_t protected_count, const std::vector<int64_t>& spans) {
  const std::string who = "allocator '" + inst.id() + "'";
  if (n_layers < 1) throw InputError(who + ": no compressible layers");
  std::vector<int64_t> span = layer_spans_or_T(spans, n_layers, T, who);
  int64_t span_shape[1] = {n_layers};
  DLTensor span_tensor = cpu_tensor(span.data(), DLDataType{kDLInt, 64, 1}, 1, span_shape);
  if (T < 1) throw InputError(who + ": prefix length T must be >= 1");
  if (B < n_layers)
    throw InputError("global budget B = " + std::to_string(B) + " is below the number of compressible layers |A| = " +
                     std::to_string(n_layers) + ": every layer keeps at least one position; raise the budget");
  const bool needs_profile = (inst.info().descriptor->flags & RKV_FLAG_NEEDS_PROFILE) != 0;
  std::vector<double> prof;
  int64_t prof_shape[1] = {n_layers};
  DLTensor prof_tensor{};
  if (needs_profile) {
    if (profile.empty()) throw InputError(who + " needs a sensitivity profile (give --profile or --sensitivity)");
    validate_profile(profile, n_layers, who);
    prof = profile;
    prof_tensor = cpu_f64_vector(prof.data(), prof_shape);
  }
  const auto* vt = static_cast<const rkv_allocator_v1*>(inst.interface(RKV_INTERFACE_ALLOCATOR_V1));
  if (!RKV_HAS_FIELD(vt, rkv_allocator_v1, allocate) || !vt->allocate) throw InputError(who + ": vtable lacks allocate");

  rkv_allocation_request req{};
  req.struct_size = sizeof req;
  req.profile = needs_profile ? &prof_tensor : nullptr;
  req.budget_total = B;
  req.prefix_tokens = T;
  req.n_layers = n_layers;
  req.protected_count = protected_count;
  req.layer_spans = &span_tensor;

  Allocation out;
  out.budget_total = B;
  // Its own heap allocation of exactly |A| doubles, so a write past it is caught by the sanitizer build.
  out.raw = std::vector<double>(static_cast<size_t>(n_layers), std::nan(""));
  int64_t out_shape[1] = {n_layers};
  DLTensor out_tensor = cpu_f64_vector(out.raw.data(), out_shape);
  DiagnosticLog log;
  throw_if_cancelled();  // a cancellation point between plugin calls (core/cancel.hpp)
  const rkv_status s = [&] {
    const PluginCallScope in_flight(inst.id(), "allocate");
    return vt->allocate(inst.raw(), &req, &out_tensor, log.abi());
  }();
  if (s == RKV_ERROR_CANCELLED) throw Cancelled();
  if (s != RKV_OK) throw InputError(who + " failed (" + status_name(s) + "): " + log.error_text());
  for (const auto& w : log.warnings()) out.warnings.push_back(who + ": " + w);
  return out;
}

Allocation run_allocator(const PluginInstance& inst, const std::vector<double>& profile, int64_t B, int64_t T,
                         int64_t n_layers, int64_t protected_count, const std::vector<int64_t>& spans) {
  const std::string who = "allocator '" + inst.id() + "'";
  Allocation out = call_allocator(inst, profile, B, T, n_layers, protected_count, spans);
  double sum = 0;
  for (int64_t l = 0; l < n_layers; ++l) {
    const double v = out.raw[static_cast<size_t>(l)];
    if (!std::isfinite(v))
      throw InputError(who + " returned a non-finite budget for layer " + std::to_string(l) + " (" +
                       std::to_string(v) + ")");
    if (v < 0)
      throw InputError(who + " returned a negative budget for layer " + std::to_string(l) + " (" +
                       std::to_string(v) + ")");
    sum += v;
  }
  if (std::fabs(sum - static_cast<double>(B)) > 1e-6 * static_cast<double>(B)) {
    std::ostringstream os;
    os.precision(12);
    os << who << " returned budgets summing to " << sum << ", not B = " << B << " (tolerance 1e-6 * B)";
    throw InputError(os.str());
  }
  out.budgets = integerize_budgets(out.raw, B, layer_spans_or_T(spans, n_layers, T, who));
  return out;
}

bool serves_layer_budgets(const PluginInstance& inst) {
  return inst.serves(RKV_INTERFACE_ALLOCATOR_V1);
}

bool serves_head_budgets(const PluginInstance& inst) {
  return inst.serves(RKV_INTERFACE_ALLOCATOR_V2);
}

HeadAllocation run_head_allocator(const PluginInstance& inst, const HeadAllocationInputs& in) {
  const std::string who = "allocator '" + inst.id() + "'";
  const int64_t L = in.n_layers, H = in.n_kv_heads, T = in.prefix_tokens, B = in.budget_total;
  if (L < 1 || H < 1 || T < 1) throw InputError(who + ": per-head allocation needs |A|, H_kv and T >= 1");
  std::vector<int64_t> spans = layer_spans_or_T(in.layer_spans, L, T, who);
  const int64_t room = std::accumulate(spans.begin(), spans.end(), int64_t{0});
  if (B < L || B > room)
    throw InputError(who + ": budget B = " + std::to_string(B) + " must lie in [|A|, sum of spans] = [" +
                     std::to_string(L) + ", " + std::to_string(room) + "]");
  int64_t span_shape[1] = {L};
  DLTensor span_t = cpu_tensor(spans.data(), DLDataType{kDLInt, 64, 1}, 1, span_shape);
  if (!inst.serves(RKV_INTERFACE_ALLOCATOR_V2))
    throw InputError(who + " does not serve " RKV_INTERFACE_ALLOCATOR_V2 " (per-head budgets)");
  const auto* vt = static_cast<const rkv_allocator_v2*>(inst.interface(RKV_INTERFACE_ALLOCATOR_V2));
  if (!RKV_HAS_FIELD(vt, rkv_allocator_v2, allocate_heads) || !vt->allocate_heads)
    throw InputError(who + ": vtable lacks allocate_heads");
  const uint64_t flags = inst.info().descriptor->flags;

  rkv_head_allocation_request req{};
  req.struct_size = sizeof req;
  std::vector<double> prof;
  int64_t prof_shape[1] = {L};
  DLTensor prof_t{};
  if (flags & RKV_FLAG_NEEDS_PROFILE) {
    if (in.profile.empty()) throw InputError(who + " needs a sensitivity profile (give --profile or --sensitivity)");
    validate_profile(in.profile, L, who);
    prof = in.profile;
    prof_t = cpu_tensor(prof.data(), DLDataType{kDLFloat, 64, 1}, 1, prof_shape);
    req.profile = &prof_t;
  }
  std::vector<float> scores;
  int64_t scores_shape[3] = {L, H, T};
  DLTensor scores_t{};
  if (flags & RKV_FLAG_NEEDS_SCORES) {
    if (!in.scores) throw InputError(who + " needs the scorer's scores (it runs only inside a run with a scorer)");
    if (static_cast<int64_t>(in.scores->size()) != L * H * T)
      throw InputError(who + ": scores hold " + std::to_string(in.scores->size()) + " values, expected |A| H_kv T");
    for (size_t i = 0; i < in.scores->size(); ++i)
      if (!std::isfinite((*in.scores)[i]))
        throw InputError(who + ": score of layer rank " + std::to_string(static_cast<int64_t>(i) / (H * T)) +
                         ", KV head " + std::to_string(static_cast<int64_t>(i) / T % H) + ", position " +
                         std::to_string(static_cast<int64_t>(i) % T) + " is not finite");
    scores = *in.scores;  // its own copy: the plugin never sees host storage it could keep
    scores_t = cpu_tensor(scores.data(), DLDataType{kDLFloat, 32, 1}, 3, scores_shape);
    req.scores = &scores_t;
  }
  std::vector<uint8_t> mask = in.protected_mask;
  int64_t mask_shape[1] = {T};
  DLTensor mask_t{};
  if (!mask.empty()) {
    if (static_cast<int64_t>(mask.size()) != T) throw InputError(who + ": protected mask of the wrong length");
    mask_t = cpu_tensor(mask.data(), DLDataType{kDLUInt, 8, 1}, 1, mask_shape);
    req.protected_mask = &mask_t;
  }
  std::vector<int64_t> layer_b;
  int64_t layer_shape[1] = {L};
  DLTensor layer_t{};
  if (in.layer_budgets) {
    layer_b = *in.layer_budgets;
    if (static_cast<int64_t>(layer_b.size()) != L) throw InputError(who + ": layer budgets of the wrong length");
    layer_t = cpu_tensor(layer_b.data(), DLDataType{kDLInt, 64, 1}, 1, layer_shape);
    req.layer_budgets = &layer_t;
  }
  req.budget_total = H * B;
  req.prefix_tokens = T;
  req.n_layers = L;
  req.n_kv_heads = H;
  req.protected_count = in.protected_count;
  req.layer_spans = &span_t;

  HeadAllocation out;
  out.raw = std::vector<double>(static_cast<size_t>(L * H), std::nan(""));
  int64_t out_shape[2] = {L, H};
  DLTensor out_t = cpu_tensor(out.raw.data(), DLDataType{kDLFloat, 64, 1}, 2, out_shape);
  DiagnosticLog log;
  throw_if_cancelled();
  const rkv_status s = [&] {
    const PluginCallScope in_flight(inst.id(), "allocate_heads");
    return vt->allocate_heads(inst.raw(), &req, &out_t, log.abi());
  }();
  if (s == RKV_ERROR_CANCELLED) throw Cancelled();
  if (s != RKV_OK) throw InputError(who + " failed (" + status_name(s) + "): " + log.error_text());
  for (const auto& w : log.warnings()) out.warnings.push_back(who + ": " + w);

  // Validate: finite, non-negative, sums.
  std::vector<double> row_sum(static_cast<size_t>(L), 0.0);
  for (int64_t i = 0; i < L * H; ++i) {
    const double v = out.raw[static_cast<size_t>(i)];
    if (!std::isfinite(v) || v < 0)
      throw InputError(who + " returned budget " + std::to_string(v) + " for layer rank " + std::to_string(i / H) +
                       ", KV head " + std::to_string(i % H) + " (must be finite and >= 0)");
    row_sum[static_cast<size_t>(i / H)] += v;
  }
  double total = 0;
  for (double r : row_sum) total += r;
  const double want = static_cast<double>(H * B);
  if (std::fabs(total - want) > 1e-6 * want) {
    std::ostringstream os;
    os.precision(12);
    os << who << " returned per-head budgets summing to " << total << ", not H_kv B = " << H * B
       << " (tolerance 1e-6 relative)";
    throw InputError(os.str());
  }
  if (in.layer_budgets) {
    out.layer_budgets = layer_b;
    for (int64_t l = 0; l < L; ++l) {
      const double w = static_cast<double>(H * layer_b[static_cast<size_t>(l)]);
      if (std::fabs(row_sum[static_cast<size_t>(l)] - w) > 1e-6 * std::max(1.0, w)) {
        std::ostringstream os;
        os.precision(12);
        os << who << ": layer rank " << l << "'s heads sum to " << row_sum[static_cast<size_t>(l)] << ", not H_kv b_l = "
           << H * layer_b[static_cast<size_t>(l)];
        throw InputError(os.str());
      }
    }
  } else {
    std::vector<double> per_head(row_sum);
    for (double& r : per_head) r /= static_cast<double>(H);
    out.layer_budgets = integerize_budgets(per_head, B, spans);
  }
  // Integerize each layer's heads to exactly H_kv b_l, every head in [max(1, min(protected, b_l)), span_l].
  for (int64_t l = 0; l < L; ++l) {
    const int64_t span = spans[static_cast<size_t>(l)];
    const int64_t b = std::min(out.layer_budgets[static_cast<size_t>(l)], span);
    const int64_t lo = std::max<int64_t>(1, std::min(in.protected_count, b));
    std::vector<double> row(out.raw.begin() + l * H, out.raw.begin() + (l + 1) * H);
    out.budgets.push_back(integerize_between(row, H * b, lo, span));
  }
  return out;
}

}  // namespace rkv
