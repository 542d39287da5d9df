// A plugin's descriptor as JSON: what `ripplekv plugins list/describe --json` prints and rkv_plugins_json returns.
#pragma once
#include <ripplekv/plugin.h>

#include <nlohmann/json.hpp>

#include "plugin/registry.hpp"

namespace rkv {

/// {"name", "type" ("bool" | "int" | "float" | "choice" | "string"), "doc", "default", ["min"], ["max"],
/// ["choices"]} of one param spec. Thread-safe; reads the descriptor (which lives as long as its library).
nlohmann::json param_spec_json(const rkv_param_spec& spec);

/// {"id", "kind", "version", "path" (of its library), "description", "params" (param_spec_json each)} of one plugin.
nlohmann::json plugin_json(const PluginInfo& plugin);

}  // namespace rkv
