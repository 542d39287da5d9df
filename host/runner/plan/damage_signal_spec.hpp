// The builtin `damage` signal as a config sees it: a host-owned descriptor (library = null) with id
// "org.ripplekv.signal.damage" (short id "damage") and its params, so a config, a sweep, a label or the profile cache
// treat it like any signal plugin; and the codec its params ask for. The measurement itself is
// runner/profile/damage_signal.hpp (docs/ARCHITECTURE.md "Compression damage").
//
// Params (validated by ParamSet like any plugin's): `fraction` ([signal.damage] fraction = 0.2; a float in (0, 1]),
// `of` ("compression", the default, or "sharing": the sharing damage of layer l, only layer l reading layer l - 1's
// cache), and with of = "compression" `bits` (32: float32, the default; 8, 4, 2: the kept entries of layer l are also
// stored with the integer codec of `group` channels per scale, `symmetric`), so D_l(f, bits) is one option of the
// joint allocator (cache/joint_plan.hpp).
//
// Thread rules: the descriptor is static and immutable; the functions are thread-safe.
#pragma once
#include <string>

#include "cache/codec.hpp"
#include "plugin/params.hpp"
#include "plugin/registry.hpp"

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

}  // namespace rkv
