// The host side of "rkv.signal/1": call a signal plugin and validate its sensitivity profile.
#pragma once
#include <ripplekv/plugin.h>

#include <string>
#include <vector>

#include "plugin/instance.hpp"

namespace rkv {

/// A signal's raw output: s [L] and d [N][L], plus the plugin's warnings.
struct SignalOutput {
  std::vector<double> s;
  std::vector<std::vector<double>> per_example;
  std::vector<std::string> warnings;
};

/// The call alone, without checking the answer: calls the plugin as run_signal() does and returns s [L] and d [N][L]
/// as written (NaN where it wrote nothing) with its warnings. For tools that judge the answer themselves
/// (conformance/conformance.hpp). Throws rkv::InputError naming the plugin for L < 1, N < 1 or an error status;
/// rkv::Cancelled when it returned RKV_ERROR_CANCELLED.
SignalOutput call_signal(const PluginInstance& inst, int64_t n_layers, int64_t n_examples,
                         const rkv_profiler_v1* profiler);

/// Calls signal `inst` for n_layers layers over n_examples calibration examples. `profiler` may be NULL for
/// model-free signals. Throws rkv::InputError naming the plugin when it fails or returns NaN/infinite values;
/// rkv::Cancelled when it returned RKV_ERROR_CANCELLED.
SignalOutput run_signal(const PluginInstance& inst, int64_t n_layers, int64_t n_examples,
                        const rkv_profiler_v1* profiler);

}  // namespace rkv
