// The builtin `damage` signal's measurement: the oracle profile s_l = D_l(f), the compression damage of layer l
// (runner/profile/compression_damage.hpp) measured on the CALIBRATION split with the cell's scorer. Allocating by it
// bounds what any sensitivity signal can gain, so reports show it as the ceiling next to the signals. Its descriptor
// and params are runner/plan/damage_signal_spec.hpp.
//
// It is host code, not a plugin: it compresses with the configured scorer and measures KL through the backend, which
// the signal ABI (a profiler service over perturbations) cannot do.
//
// Calibration example i is its window of P prefix tokens followed by n_w tokens: the prefix is compressed, the n_w
// tokens are the teacher-forced continuation. per_example[i][l] = d_{f,i,l}; s_l = mean_i d_{f,i,l}. With of =
// "sharing", d_{i,l} is the sharing damage, and layer 0, which cannot share, gets the largest of its example's values
// (the profile [compression.share] count = k chooses by).
//
// Thread rules: runs on the backend it is given; not concurrently with other work on it.
#pragma once
#include <functional>
#include <vector>

#include "backend/backend.hpp"
#include "plugin/params.hpp"
#include "runner/plan/damage_signal_spec.hpp"
#include "runner/plan/run_plan.hpp"
#include "runner/tasks/text_windows.hpp"

namespace rkv {

/// d_{f,i,l} [N][L] of the damage signal with validated `params` (its fraction f) on `examples` (each P + n_w ids,
/// n_w >= 1), compressing with `scorer` (its registry must be alive) on `backend`. Throws rkv::InputError as
/// compression_damage() does or when the scorer cannot be created (naming it).
/// `on_example(i)` is called as example i finishes (may be empty).
std::vector<std::vector<double>> damage_per_example(Backend& backend, const PluginChoice& scorer, const ParamSet& params,
                                                    const std::vector<TextWindow>& examples, int64_t prefix_tokens,
                                                    const std::function<void(int64_t)>& on_example = {});

}  // namespace rkv
