// One cell of a run config: the plugin sections ([signal], [scorer] with its [[scorer.route]], [allocator] with its
// per-head allocator), [budget] and the [compression] tables, read into a CellConfig and checked as a whole (settings
// that do not combine are refused here, naming the keys). A sweep reads each of its cells with parse_cell.
//
// Thread rules: pure functions of the TOML and the registry (which must outlive the result).
#pragma once
#include <optional>
#include <string>
#include <toml++/toml.h>

#include "plugin/registry.hpp"
#include "runner/plan/run_plan.hpp"
#include "runner/plan/toml_reader.hpp"

namespace rkv {

/// [signal] / [scorer] / [allocator] (`kind_name`): resolves `plugin` (an id, a short id, or the builtin "damage"
/// signal) and validates the params of every [<kind>.<plugin>] table against that plugin's param spec; for
/// [allocator] also `heads` (the per-head allocator) and the interfaces both serve. nullopt when the section is absent.
std::optional<PluginChoice> parse_plugin_section(const TomlContext& c, const toml::table& root,
                                                 const std::string& kind_name, rkv_plugin_kind kind,
                                                 const PluginRegistry& reg);

/// The cell `root` describes. With `require_signal` (run configs) a cell whose allocator, per-layer bits or share
/// chooser reads a profile needs a [signal]; compression configs (`generate --compress`) take the profile from the
/// caller instead. Refuses settings that do not combine (a decode policy that evicts with a codec, sharing or a joint
/// plan; a re-scoring policy with a route; a joint plan without bytes_fraction, ...), naming the keys.
CellConfig parse_cell(const TomlContext& c, const toml::table& root, const PluginRegistry& reg,
                      bool require_signal = true);

}  // namespace rkv
