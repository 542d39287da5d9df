// Routes: which scorer ranks which layers' positions ([[scorer.route]] in an ablation config).
//
// A homogeneous cell scores every compressible layer with its [scorer]. A route assigns other scorers (each with its
// own params) to layer ranges or lists; layers no entry names keep the cell's [scorer]. Budgets are unchanged: the
// cell's allocator still gives b_l for every layer of A, and the route only decides which scorer picks layer l's b_l
// positions ("Should eviction methods themselves vary across layers?", and PolyKV, 2026, compose methods per layer;
// kvpress has no equivalent: a press applies one scoring rule to every layer).
//
//   [[scorer.route]]
//   layers = "0-9, 12"          # or [0, 3, 5]
//   plugin = "knorm"
//   [[scorer.route]]
//   layers = "20-29"
//   plugin = "snapkv"
//   snapkv = { window = 16 }    # the entry's own params (or a [scorer.route.snapkv] table after its [[scorer.route]])
//
// Thread rules: pure functions over their arguments.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "plugin/registry.hpp"
#include "runner/plan/run_plan.hpp"

namespace rkv {

/// Parses a layer set: comma-separated indices and inclusive ranges, "0-9, 12, 14-15" -> [0..9, 12, 14, 15]
/// (ascending, each once). Throws rkv::InputError prefixed by `where` for an empty set, a malformed or descending
/// range, an index above `max_layer`, or an index given twice.
std::vector<int64_t> parse_layer_set(const std::string& text, const std::string& where, int64_t max_layer);

/// `layers` (ascending) as parse_layer_set reads it: runs of consecutive indices as ranges, "0-9, 12, 14-15".
std::string layer_set_text(const std::vector<int64_t>& layers);

/// Parses the value of `scorer.route`: an array of tables (an empty array is no route), each with `layers` (a string
/// for parse_layer_set or an array of integers), `plugin` (a scorer id or short id in `registry`) and optionally a
/// table named after that plugin (short or full id) with its params, validated against its param spec. Throws
/// rkv::InputError naming `origin`, the line and the key (e.g. 'scorer.route[1].layers') for any other key, a layer
/// in two entries (naming both), an unknown plugin or a bad param.
std::vector<RouteEntry> parse_scorer_route(const toml::node& value, const std::string& origin,
                                           const PluginRegistry& registry);

/// A route in a cell label: "knorm:0-9,12; snapkv(window=16):20-29" (params only as the entry set them).
std::string route_label(const std::vector<RouteEntry>& route);

/// A route in an effective key or cell id: every entry's full id, all params and layers; "" for no route.
std::string route_key(const std::vector<RouteEntry>& route);

/// A route as cell files and results record it: [{"layers": [...], "id", "version", "params": {...}}]; null for none.
nlohmann::json route_json(const std::vector<RouteEntry>& route);

/// Throws rkv::InputError naming `what` and 'scorer.route' when an entry names a layer >= n_layers.
void check_route_layers(const std::vector<RouteEntry>& route, int64_t n_layers, const std::string& what);

/// One entry of a route to write as TOML: a scorer (short or full id), its params, and the layers it takes.
struct RouteTomlEntry {
  std::string plugin;
  std::vector<std::pair<std::string, ParamValue>> params;  ///< written as an inline table; none: omitted
  std::vector<int64_t> layers;
};

/// The [[scorer.route]] tables of `entries`, ready to paste into a config (entries without layers are skipped).
std::string route_toml(const std::vector<RouteTomlEntry>& entries);

}  // namespace rkv
