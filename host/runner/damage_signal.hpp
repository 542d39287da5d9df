// The builtin `damage` signal: the oracle profile s_l = D_l(f), the compression damage of layer l
// (runner/compression_damage.hpp) measured on the CALIBRATION split with the cell's scorer (issue 15). Allocating by
// it bounds what any sensitivity signal can gain, so reports show it as the ceiling next to the signals.
//
// It is host code, not a plugin: it compresses with the configured scorer and measures KL through the backend, which
// the signal ABI (a profiler service over perturbations) cannot do. It still looks like a signal everywhere a config,
// a sweep, a label or the profile cache expects one: damage_signal_info() is a host-owned descriptor (library =
// null) with id "org.ripplekv.signal.damage" (short id "damage") and five params, `fraction` ([signal.damage]
// fraction = 0.2; a float in (0, 1]) and `of` ("compression", the default, or "sharing": s_l = the sharing damage of
// layer l, only layer l reading layer l - 1's cache, runner/compression_damage.hpp sharing_damage; layer 0, which
// cannot share, gets the largest of them -- the profile [compression.share] count = k chooses by), and with of =
// "compression" `bits` (32: float32, the default; 8, 4, 2: the kept entries of layer l are also stored with the
// integer codec of `group` channels per scale, `symmetric`), so D_l(f, bits) is one option of the joint allocator
// (cache/joint_plan.hpp); ParamSet validates them like any plugin's params.
//
// Calibration example i is its window of P prefix tokens followed by n_w tokens: the prefix is compressed, the n_w
// tokens are the teacher-forced continuation. per_example[i][l] = d_{f,i,l}; s_l = mean_i d_{f,i,l}.
#pragma once
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "cache/codec.hpp"
#include "plugin/registry.hpp"
#include "runner/config.hpp"
#include "runner/text_windows.hpp"

namespace rkv {

/// Full id of the builtin damage signal.
inline constexpr const char* kDamageSignalId = "org.ripplekv.signal.damage";

/// The host-owned descriptor of the damage signal (static; library is null). Thread-safe.
const PluginInfo& damage_signal_info();

/// True when `info` is the damage signal's.
bool is_damage_signal(const PluginInfo* info);

/// Resolves a plugin id for a config or the CLI: "damage" or kDamageSignalId when `kind` is RKV_KIND_SIGNAL (or 0)
/// gives damage_signal_info(), anything else reg.resolve(id_or_short, kind) (errors as that).
const PluginInfo& resolve_plugin_or_builtin(const PluginRegistry& reg, const std::string& id_or_short,
                                            rkv_plugin_kind kind);

/// The codec a damage signal's params ask layer l's kept entries to be stored with: none for bits = 32, else the
/// integer codec at `bits` with `group` and `symmetric` (cache/codec.hpp). rkv::InputError for bits outside
/// {32, 8, 4, 2}, bits < 32 with of = "sharing", or a group that does not suit `head_dim` (check_codec).
CodecSpec damage_codec(const ParamSet& params, int64_t head_dim);

/// d_{f,i,l} [N][L] of the damage signal with validated `params` (its fraction f) on `examples` (each P + n_w ids,
/// n_w >= 1), compressing with `scorer` (its registry must be alive) on `backend`. Throws rkv::InputError as
/// compression_damage() does or when the scorer cannot be created (naming it).
std::vector<std::vector<double>> damage_per_example(Backend& backend, const PluginChoice& scorer, const ParamSet& params,
                                                    const std::vector<TextWindow>& examples, int64_t prefix_tokens);

}  // namespace rkv
