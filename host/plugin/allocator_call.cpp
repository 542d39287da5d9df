#include "plugin/allocator_call.hpp"

#include <cmath>
#include <numeric>
#include <sstream>

#include "cache/budget.hpp"
#include "core/errors.hpp"

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
                          int64_t n_layers, int64_t protected_count) {
  const std::string who = "allocator '" + inst.id() + "'";
  if (n_layers < 1) throw InputError(who + ": no compressible layers");
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

  Allocation out;
  out.budget_total = B;
  // Its own heap allocation of exactly |A| doubles, so a write past it is caught by the sanitizer build.
  out.raw = std::vector<double>(static_cast<size_t>(n_layers), std::nan(""));
  int64_t out_shape[1] = {n_layers};
  DLTensor out_tensor = cpu_f64_vector(out.raw.data(), out_shape);
  DiagnosticLog log;
  const rkv_status s = vt->allocate(inst.raw(), &req, &out_tensor, log.abi());
  if (s == RKV_ERROR_CANCELLED) throw Cancelled();
  if (s != RKV_OK) throw InputError(who + " failed (" + status_name(s) + "): " + log.error_text());
  for (const auto& w : log.warnings()) out.warnings.push_back(who + ": " + w);
  return out;
}

Allocation run_allocator(const PluginInstance& inst, const std::vector<double>& profile, int64_t B, int64_t T,
                         int64_t n_layers, int64_t protected_count) {
  const std::string who = "allocator '" + inst.id() + "'";
  Allocation out = call_allocator(inst, profile, B, T, n_layers, protected_count);
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
  out.budgets = integerize_budgets(out.raw, B, T);
  return out;
}

}  // namespace rkv
