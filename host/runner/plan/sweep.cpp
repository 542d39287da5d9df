#include "runner/plan/sweep.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "core/fnv1a.hpp"
#include "runner/plan/cell_config.hpp"
#include "runner/plan/cell_labels.hpp"
#include "runner/plan/compression_sections.hpp"
#include "runner/plan/damage_signal_spec.hpp"
#include "runner/plan/run_axes.hpp"
#include "runner/plan/scorer_route.hpp"

namespace rkv {

namespace {

/// Sets a dotted key in a table (creating intermediate tables); used to apply a sweep value. Throws InputError when a
/// part of the key names something other than a table (e.g. `scorer = 1` with a sweep of "scorer.plugin").
void set_dotted(const TomlContext& c, toml::table& root, const std::string& dotted, const toml::node& value) {
  toml::table* t = &root;
  std::stringstream ss(dotted);
  std::vector<std::string> parts;
  for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    toml::node* n = t->get(parts[i]);
    if (!n) {
      t->insert_or_assign(parts[i], toml::table{});
      n = t->get(parts[i]);
    }
    std::string prefix = parts[0];
    for (size_t k = 1; k <= i; ++k) prefix += "." + parts[k];
    if (!n->is_table()) throw InputError(where(c, *n, prefix) + " must be a table to sweep \"" + dotted + "\"");
    t = n->as_table();
  }
  t->insert_or_assign(parts.back(), value);
}

/// Removes a dotted key from `root` when it is there (a method's key the next cell does not set).
void erase_dotted(toml::table& root, const std::string& dotted) {
  const auto dot = dotted.rfind('.');
  toml::table* parent = dot == std::string::npos ? &root : root.at_path(dotted.substr(0, dot)).as_table();
  if (parent) parent->erase(dot == std::string::npos ? dotted : dotted.substr(dot + 1));
}

/// Keys a sweep may vary: any key of the cell-level sections (plugin choices, plugin params, budget). Returns the
/// setting the key names, canonically ("scorer.<full plugin id>.<param>"), so two keys naming one setting are found.
std::string check_sweep_key(const TomlContext& c, const toml::node& where_node, const std::string& key,
                            const PluginRegistry& reg, const std::string& shown = "") {
  const std::string name = shown.empty() ? "sweep." + key : shown;  // how messages name the key
  auto fail = [&](const std::string& why) { throw InputError(where(c, where_node, name) + ": " + why); };
  // "allocator.plugin." or "scorer..window" would silently name another setting than the one recorded.
  if (key.empty() || key.front() == '.' || key.back() == '.' || key.find("..") != std::string::npos)
    fail("a sweep key has no empty components (no leading, trailing or doubled '.')");
  std::stringstream ss(key);
  std::vector<std::string> parts;
  for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
  const std::vector<std::string> sections = {"signal", "scorer", "allocator", "budget", "compression"};
  if (parts.size() < 2) fail("a sweep key is a dotted key such as \"allocator.plugin\" or \"budget.fraction\"");
  if (parts[0] == "prefill")
    fail("[prefill] is a run-level setting and cannot be swept (one prefill per example serves every cell); run one "
         "config per prefill mode");
  if (is_run_axis_key(key))  // a method's key: [sweep]'s own run-level keys never reach here (runner/plan/run_axes.hpp)
    fail("is a run-level key: sweep it on its own, [sweep] \"" + key + "\" = [...] (each value a run of its own, "
         "reported side by side), not inside a method");
  if (std::find(sections.begin(), sections.end(), parts[0]) == sections.end())
    fail("cannot be swept; sweep keys start with one of: signal, scorer, allocator, budget, compression.decode, "
         "compression.codec, compression.share, compression.joint, or are the run-level keys model.path and "
         "data.eval.seed (did you mean '" + closest_match(parts[0], sections) + "'?)");
  if (parts[0] == "compression") {
    const std::vector<std::string>& keys = compression_table_keys(parts.size() == 3 ? parts[1] : "");
    if (keys.empty() || std::find(keys.begin(), keys.end(), parts[2]) == keys.end())
      fail("of [compression] only the decode policy, the codec, sharing and the joint plan are swept: "
           "compression.decode.policy, .sinks, .recent, .interval, .target; compression.codec.format, .bits, .group, "
           ".symmetric, .residual, .layer_bits, .bits_ratio, .token_bits, .token_shares; compression.share.groups, "
           ".map, .count; compression.joint.plan, .fractions, .bits, .share, .group, .symmetric");
    return key;
  }
  if (parts[0] == "budget") {
    const std::vector<std::string> keys = {"fraction", "tokens", "bytes_fraction"};
    if (parts.size() != 2 || std::find(keys.begin(), keys.end(), parts[1]) == keys.end())
      fail("unknown budget key; valid: budget.fraction, budget.tokens, budget.bytes_fraction");
    return key;
  }
  const rkv_plugin_kind kind =
      parts[0] == "signal" ? RKV_KIND_SIGNAL : parts[0] == "scorer" ? RKV_KIND_SCORER : RKV_KIND_ALLOCATOR;
  if (parts.size() == 2) {
    if (parts[1] == "heads" && kind == RKV_KIND_ALLOCATOR) return key;
    if (parts[1] == "route" && kind == RKV_KIND_SCORER) return key;  // each value an array of route tables ([]: none)
    if (parts[1] != "plugin") fail("unknown key; did you mean '" + parts[0] + ".plugin'?");
    return key;
  }
  if (parts.size() != 3) fail("plugin params are swept as \"" + parts[0] + ".<plugin>.<param>\"");
  const PluginInfo* info = nullptr;
  try {
    info = &resolve_plugin_or_builtin(reg, parts[1], kind);
  } catch (const InputError& e) {
    fail(e.what());
  }
  std::vector<std::string> names;
  for (auto* s = info->descriptor->params; s && *s; ++s) names.emplace_back((*s)->name);
  if (std::find(names.begin(), names.end(), parts[2]) == names.end()) {
    std::string list;
    for (auto& n : names) list += (list.empty() ? "" : ", ") + n;
    fail("plugin '" + info->id() + "' has no parameter '" + parts[2] + "'" +
         (names.empty() ? "" : "; valid: " + list + "; did you mean '" + closest_match(parts[2], names) + "'?"));
  }
  return parts[0] + "." + info->id() + "." + parts[2];
}

/// True when the cell at `index` differs from an earlier one only in swept values it ignores: a float32 cache (codec
/// format "none") ignores every other codec key, a joint cell every codec key (its plan picks the bits), and a cell
/// without a joint plan every compression.joint key but the plan. Of such a sweep the cell at their first values is
/// kept, instead of repeating one computation under several values.
bool repeats_a_first_value(const CellConfig& cell, const std::vector<SweepAxis>& axes, const std::vector<size_t>& index) {
  const bool joint = !cell.joint.none();
  for (size_t a = 0; a < axes.size(); ++a) {
    if (index[a] == 0) continue;
    const std::string& key = axes[a].key;
    const bool codec_key = key.rfind("compression.codec.", 0) == 0, joint_key = key.rfind("compression.joint.", 0) == 0;
    if ((codec_key && (joint || (cell.codec.none() && key != "compression.codec.format"))) ||
        (joint_key && !joint && key != "compression.joint.plan"))
      return true;
  }
  return false;
}

/// The settings of one "methods" table as (dotted key, value) pairs in the table's order: nested tables are walked
/// ({ scorer = { plugin = "snapkv" } } sets "scorer.plugin"), every other value (arrays included) is a setting.
void flatten_settings(const toml::table& t, const std::string& prefix,
                      std::vector<std::pair<std::string, const toml::node*>>& out) {
  for (const auto& [k, v] : t) {
    const std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (v.is_table()) flatten_settings(*v.as_table(), key, out);
    else out.emplace_back(key, &v);
  }
}

/// The settings of value `i` of a "methods" axis (a table; read_sweep_axes checked it).
std::vector<std::pair<std::string, const toml::node*>> method_settings(const SweepAxis& axis, size_t i) {
  std::vector<std::pair<std::string, const toml::node*>> out;
  flatten_settings(*axis.values.get(i)->as_table(), "", out);
  return out;
}

/// Checks the "methods" axis `v` of [sweep]: a non-empty array of non-empty tables whose keys are sweep keys, each
/// setting at most once per table; records each setting's key in `key_of_setting` (a setting may appear in several
/// tables, but not also as its own axis: checked by the caller through the map).
void check_methods_axis(const TomlContext& c, const toml::node& v, const PluginRegistry& reg,
                        std::map<std::string, std::string>& key_of_setting) {
  if (!v.is_array() || v.as_array()->empty())
    throw InputError(where(c, v, "sweep.methods") + " must be a non-empty array of tables of settings, e.g. "
                     "[{ \"scorer.plugin\" = \"snapkv\", \"allocator.plugin\" = \"uniform\" }]");
  std::set<std::string> all;
  for (size_t i = 0; i < v.as_array()->size(); ++i) {
    const toml::node& m = *v.as_array()->get(i);
    const std::string name = "sweep.methods[" + std::to_string(i) + "]";
    if (!m.is_table() || m.as_table()->empty())
      throw InputError(where(c, m, name) + " must be a non-empty table of settings such as \"scorer.plugin\" = \"snapkv\"");
    std::vector<std::pair<std::string, const toml::node*>> settings;
    flatten_settings(*m.as_table(), "", settings);
    std::set<std::string> here;
    for (const auto& [key, node] : settings) {
      if (key == "methods" || key.rfind("methods.", 0) == 0)
        throw InputError(where(c, *node, name + "." + key) + ": a method cannot hold methods");
      const std::string setting = check_sweep_key(c, *node, key, reg, name + "." + key);
      if (!here.insert(setting).second)
        throw InputError(where(c, *node, name + "." + key) + ": names a setting this method already sets (" + setting + ")");
      all.insert(setting);
    }
  }
  for (const std::string& setting : all)
    if (const auto [it, fresh] = key_of_setting.emplace(setting, "methods"); !fresh)
      throw InputError(where(c, v, "sweep.methods") + ": sets " + setting + ", which \"" + it->second +
                       "\" also sweeps; sweep each setting once");
}

}  // namespace

std::string hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::vector<SweepAxis> read_sweep_axes(const TomlContext& c, const toml::table& root, const PluginRegistry& reg) {
  std::vector<SweepAxis> axes;
  const toml::table* sw = sub_table(c, root, "sweep", "sweep");
  if (!sw) return axes;
  std::map<std::string, std::string> key_of_setting;  // canonical setting -> the sweep key that names it
  for (const auto& [k, v] : *sw) {
    const std::string key(k.str());
    if (key == "methods") {
      check_methods_axis(c, v, reg, key_of_setting);
      axes.push_back({key, *v.as_array()});
      continue;
    }
    const std::string setting = check_sweep_key(c, v, key, reg);
    if (const auto [it, fresh] = key_of_setting.emplace(setting, key); !fresh)
      throw InputError(where(c, v, "sweep." + key) + ": names the same setting as \"" + it->second + "\" (" + setting +
                       "); sweep each setting once");
    if (!v.is_array() || v.as_array()->empty())
      throw InputError(where(c, v, "sweep." + key) + " must be a non-empty array of values");
    axes.push_back({key, *v.as_array()});
  }
  return axes;
}

/// The cartesian product of the sweep's lists must have at most `max_cells` cells ([output] max_cells): refused here,
/// before any cell is built, naming [sweep], the count and the limit and how to raise it.
void check_sweep_size(const TomlContext& c, const toml::table& root, const std::vector<SweepAxis>& axes, int64_t max_cells) {
  double cells = 1;  // a double: the product of many long lists must not wrap around
  std::string factors;
  for (const SweepAxis& axis : axes) {
    cells *= static_cast<double>(axis.values.size());
    factors += (factors.empty() ? "" : " x ") + std::to_string(axis.values.size());
  }
  if (cells <= static_cast<double>(max_cells)) return;
  const toml::node* sw = root.get("sweep");
  std::ostringstream count;
  count.precision(0);
  count << std::fixed << cells;
  throw InputError((sw ? where(c, *sw, "sweep") : c.origin + ": [sweep]") + ": the sweep has " + count.str() +
                   " cells (" + factors + "), more than the limit of " + std::to_string(max_cells) +
                   "; shorten its lists, split it into several configs, or raise the limit with max_cells = N in "
                   "[output] (at most " + std::to_string(kMaxCells) + ")");
}

Cell full_cache_cell(const std::string& base_sha256) {
  Cell full;
  full.values = nlohmann::json::object();
  full.config.full_cache = true;
  full.id = hex16(fnv1a64("full-cache/" + base_sha256));
  full.label = full.group = "full cache";
  full.effective_key = "full";
  return full;
}

std::vector<Cell> expand_sweep(const TomlContext& c, toml::table& root, const std::vector<SweepAxis>& axes,
                               const PluginRegistry& reg) {
  std::vector<Cell> cells;
  std::vector<size_t> index(axes.size(), 0);
  std::set<std::string> seen_ids;
  // A base value the sweep overrides is never parsed as a cell's, but a config holds no NaN or infinity anywhere.
  for (const SweepAxis& axis : axes)
    if (const toml::node* n = axis.key == "methods" ? nullptr : root.at_path(axis.key).node();
        n && n->is_floating_point() && !std::isfinite(n->as_floating_point()->get()))
      throw InputError(where(c, *n, axis.key) + " is not a finite number (the sweep overrides it, but every value of "
                       "a config must be valid)");
  // Range-checked too: when the base config sets every swept key (no methods axis, whose keys a base may leave out),
  // it is parsed as a cell of its own, so an out-of-range base value (budget.fraction = -1 under a budget axis) is
  // refused where it is read rather than silently replaced.
  bool base_complete = !axes.empty();
  for (const SweepAxis& axis : axes) base_complete = base_complete && axis.key != "methods" && root.at_path(axis.key).node();
  // Its error is raised after the cells parsed: a value every cell shares then fails in the first cell (named as
  // such), and the base's own error is left to a swept key's base value, which is what its note says.
  std::optional<std::string> base_error;
  if (base_complete) try {
      parse_cell(c, root, reg);
    } catch (const InputError& e) {
      base_error = e.what();
    }
  // A method's keys must not leak into the next cell, which may not set them: before each cell every key some method
  // sets is put back as the base config has it (or removed), in place, so every node keeps its source line.
  std::map<std::string, std::unique_ptr<toml::node>> base;  // dotted key -> its base value (null: absent)
  for (const SweepAxis& axis : axes)
    if (axis.key == "methods")
      for (size_t i = 0; i < axis.values.size(); ++i)
        for (const auto& [key, node] : method_settings(axis, i)) {
          if (base.count(key)) continue;
          const toml::node* at = root.at_path(key).node();
          base[key] = at ? at->visit([](const auto& n) -> std::unique_ptr<toml::node> {
            return std::make_unique<std::decay_t<decltype(n)>>(n);
          }) : nullptr;
        }
  while (true) {
    for (const auto& [key, value] : base) {
      if (value) set_dotted(c, root, key, *value);
      else erase_dotted(root, key);
    }
    nlohmann::json values = nlohmann::json::object();
    for (size_t a = 0; a < axes.size(); ++a) {
      if (axes[a].key == "methods") {
        for (const auto& [key, node] : method_settings(axes[a], index[a])) {
          set_dotted(c, root, key, *node);
          values[key] = to_json(*node);
        }
        continue;
      }
      const toml::node& v = *axes[a].values.get(index[a]);
      set_dotted(c, root, axes[a].key, v);
      values[axes[a].key] = to_json(v);
    }
    Cell cell;
    try {
      cell.config = parse_cell(c, root, reg);
    } catch (const InputError& e) {
      throw InputError(std::string(e.what()) + (axes.empty() ? "" : " (in sweep cell " + values.dump() + ")"));
    }
    cell.values = values;
    // A route is part of the cell even when it is not swept: its key joins the hash (a cell without one hashes its
    // swept values alone).
    cell.id = hex16(fnv1a64(values.dump() + (cell.config.route.empty() ? "" : "|route=" + route_key(cell.config.route))));
    cell.effective_key = effective_key(cell.config);
    if (!repeats_a_first_value(cell.config, axes, index) && seen_ids.insert(cell.id).second) cells.push_back(cell);
    size_t a = 0;
    for (; a < axes.size(); ++a) {
      if (++index[a] < axes[a].values.size()) break;
      index[a] = 0;
    }
    if (a == axes.size()) break;
  }
  if (base_error)
    throw InputError(*base_error + " (a base value: the sweep overrides it, but every value of a config must be valid)");
  return cells;
}

}  // namespace rkv
