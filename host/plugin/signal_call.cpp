#include "plugin/signal_call.hpp"

#include <cmath>

#include "core/cancel.hpp"
#include "core/errors.hpp"
#include "plugin/call_guard.hpp"

namespace rkv {

SignalOutput call_signal(const PluginInstance& inst, int64_t L, int64_t N, const rkv_profiler_v1* profiler) {
  const std::string who = "signal '" + inst.id() + "'";
  if (L < 1 || N < 1) throw InputError(who + ": needs at least one layer and one calibration example");
  const auto* vt = static_cast<const rkv_signal_v1*>(inst.interface(RKV_INTERFACE_SIGNAL_V1));
  if (!RKV_HAS_FIELD(vt, rkv_signal_v1, profile) || !vt->profile) throw InputError(who + ": vtable lacks profile");

  std::vector<double> s(static_cast<size_t>(L), std::nan("")), d(static_cast<size_t>(N * L), std::nan(""));
  int64_t s_shape[1] = {L}, d_shape[2] = {N, L};
  DLTensor s_t{}, d_t{};
  s_t.data = s.data();
  s_t.device = DLDevice{kDLCPU, 0};
  s_t.ndim = 1;
  s_t.dtype = DLDataType{kDLFloat, 64, 1};
  s_t.shape = s_shape;
  d_t = s_t;
  d_t.data = d.data();
  d_t.ndim = 2;
  d_t.shape = d_shape;

  rkv_signal_request req{};
  req.struct_size = sizeof req;
  req.n_layers = L;
  req.n_examples = N;
  req.profiler = profiler;
  DiagnosticLog log;
  throw_if_cancelled();  // a cancellation point between plugin calls (core/cancel.hpp)
  const rkv_status st = [&] {
    const PluginCallScope in_flight(inst.id(), "profile");
    return vt->profile(inst.raw(), &req, &s_t, &d_t, log.abi());
  }();
  if (st == RKV_ERROR_CANCELLED) throw Cancelled();
  if (st != RKV_OK) throw InputError(who + " failed (" + status_name(st) + "): " + log.error_text());

  SignalOutput out;
  out.s = s;
  out.per_example.assign(static_cast<size_t>(N), std::vector<double>(static_cast<size_t>(L)));
  for (int64_t i = 0; i < N; ++i)
    for (int64_t l = 0; l < L; ++l)
      out.per_example[static_cast<size_t>(i)][static_cast<size_t>(l)] = d[static_cast<size_t>(i * L + l)];
  for (const auto& w : log.warnings()) out.warnings.push_back(who + ": " + w);
  return out;
}

SignalOutput run_signal(const PluginInstance& inst, int64_t L, int64_t N, const rkv_profiler_v1* profiler) {
  const std::string who = "signal '" + inst.id() + "'";
  SignalOutput out = call_signal(inst, L, N, profiler);
  for (int64_t l = 0; l < L; ++l)
    if (!std::isfinite(out.s[static_cast<size_t>(l)]))
      throw InputError(who + " returned a non-finite sensitivity for layer " + std::to_string(l));
  for (int64_t i = 0; i < N; ++i)
    for (int64_t l = 0; l < L; ++l)
      if (!std::isfinite(out.per_example[static_cast<size_t>(i)][static_cast<size_t>(l)]))
        throw InputError(who + " returned a non-finite value for example " + std::to_string(i) + ", layer " +
                         std::to_string(l));
  return out;
}

}  // namespace rkv
