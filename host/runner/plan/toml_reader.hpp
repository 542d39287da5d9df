// Reading a config's TOML: where a key stands (file and line) for messages, and typed getters that check every value
// where it is read, so `ripplekv validate` reports what a run would refuse. Every error is rkv::InputError naming the
// file, the line and the dotted key.
//
// Thread rules: pure functions over their arguments.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <toml++/toml.h>
#include <type_traits>
#include <vector>

#include "core/errors.hpp"
#include "plugin/params.hpp"

namespace rkv {

/// The config being read: its name in messages and the folder its relative paths resolve against.
struct TomlContext {
  std::string origin;    ///< the config file's name (or "<string>") for messages
  std::string base_dir;  ///< the folder relative paths resolve against
  std::set<std::string> overridden;  ///< dotted keys set by --set (runner/plan/config_overrides.hpp): no line number
};

// Upper bounds of integer settings, checked where they are read: what their consumers hold (int counts, memory for
// per-token buffers) with room to spare, never a silent narrowing.
inline constexpr int64_t kMaxTokens = int64_t{1} << 24;          ///< any length in tokens (16,777,216)
inline constexpr int64_t kMaxCount = 1000000;                    ///< examples, trials, resamples, sinks, new tokens
inline constexpr int64_t kMaxCells = 100000;                     ///< [output] max_cells
inline constexpr int64_t kMaxThreads = 4096;                     ///< model.threads
inline constexpr int64_t kMaxLayer = 100000;                     ///< a layer index (budget.layers, routes, sharing)
inline constexpr uint64_t kMaxConfigBytes = uint64_t{64} << 20;  ///< a config file (TOML) of at most 64 MiB

/// Parses `text` as TOML; rkv::InputError "<origin>:<line>:<column>: TOML syntax error: ..." when it is not.
toml::table parse_toml(const std::string& text, const std::string& origin);

/// "<origin>:<line>: '<key>'" (the line omitted when the node has none, e.g. a swept value): how messages name a key.
std::string where(const std::string& origin, const toml::node& n, const std::string& key);
std::string where(const TomlContext& c, const toml::node& n, const std::string& key);
/// "<origin>:<line>: [<key>]": how messages name a table.
std::string where_table(const TomlContext& c, const toml::table& t, const std::string& key);

/// Refuses a key of `t` not in `allowed`, naming it, the table, the valid keys and the closest one.
void check_keys(const TomlContext& c, const toml::table& t, const std::string& table_name,
                const std::vector<std::string>& allowed);

/// The table at `key` of `t`, null when absent; rkv::InputError naming `full` when it is not a table.
const toml::table* sub_table(const TomlContext& c, const toml::table& t, const std::string& key,
                             const std::string& full);

/// The integer at `key`, or `def` when absent; an error when it is not an integer or lies outside
/// [min_value, max_value].
int64_t get_int(const TomlContext& c, const toml::table& t, const std::string& key, const std::string& full,
                int64_t def, int64_t min_value, int64_t max_value);
/// The number `n` (an integer is converted); an error when it is neither.
double get_float(const TomlContext& c, const toml::node& n, const std::string& full);
std::string get_string(const TomlContext& c, const toml::table& t, const std::string& key, const std::string& full,
                       const std::string& def);
bool get_bool(const TomlContext& c, const toml::table& t, const std::string& key, const std::string& full, bool def);
/// An array of strings; empty when absent.
std::vector<std::string> get_string_list(const TomlContext& c, const toml::table& t, const std::string& key,
                                         const std::string& full);

/// An array of integers (T integral) or numbers (T floating); `def` when absent.
template <typename T>
std::vector<T> get_number_list(const TomlContext& c, const toml::table& t, const std::string& key,
                               const std::string& full, std::vector<T> def) {
  const toml::node* n = t.get(key);
  if (!n) return def;
  if (!n->is_array()) throw InputError(where(c, *n, full) + " must be an array of numbers");
  std::vector<T> out;
  for (const auto& e : *n->as_array()) {
    if constexpr (std::is_integral_v<T>) {
      if (!e.is_integer()) throw InputError(where(c, e, full) + " must be an array of integers");
      out.push_back(static_cast<T>(e.as_integer()->get()));
    } else {
      out.push_back(static_cast<T>(get_float(c, e, full)));
    }
  }
  return out;
}

/// A plugin parameter's value: bool, integer, float or string; an error naming `origin` and `full` otherwise.
ParamValue to_param_value(const std::string& origin, const toml::node& n, const std::string& full);

/// A scalar as JSON (arrays and tables as their TOML text): how a swept value is recorded.
nlohmann::json to_json(const toml::node& n);

}  // namespace rkv
