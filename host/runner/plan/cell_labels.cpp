#include "runner/plan/cell_labels.hpp"

#include <map>
#include <set>
#include <sstream>

#include "runner/plan/damage_signal_spec.hpp"
#include "runner/plan/scorer_route.hpp"

namespace rkv {

namespace {

/// Swept values a cell's label names: per plugin id, "param=value" of its swept params; and the other swept settings
/// its plugins and budget do not show, as "key=value". Only keys whose values differ between cells are named.
struct SweptNames {
  std::map<std::string, std::vector<std::string>> plugin_params;  // plugin id -> ["window=16", ...]
  std::vector<std::string> others;                                // ["data.eval.prefix_tokens=512", ...]
};

/// A swept value as a label shows it: strings without quotes, numbers and booleans as TOML writes them.
std::string label_value(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

/// The sweep keys the label already shows through the plugin ids, the budget and the decode policy.
bool shown_by_label(const std::string& key) {
  static const std::set<std::string> shown = {"signal.plugin",   "scorer.plugin",        "allocator.plugin",
                                              "allocator.heads", "budget.fraction",      "budget.tokens",
                                              "budget.bytes_fraction",
                                              "compression.decode.policy", "scorer.route"};
  return shown.count(key) > 0;
}

SweptNames swept_names(const Cell& cell, const std::set<std::string>& varying) {
  SweptNames names;
  const CellConfig& cc = cell.config;
  for (const auto& [key, value] : cell.values.items()) {
    if (!varying.count(key) || shown_by_label(key)) continue;
    const auto first_dot = key.find('.'), last_dot = key.rfind('.');
    const std::string kind = key.substr(0, first_dot);
    const std::optional<PluginChoice>* choice = kind == "signal"    ? &cc.signal
                                                : kind == "scorer"  ? &cc.scorer
                                                : kind == "allocator" ? &cc.allocator
                                                                      : nullptr;
    if (choice && first_dot != last_dot) {  // "<kind>.<plugin>.<param>": named inside that plugin's parentheses
      const std::string plugin = key.substr(first_dot + 1, last_dot - first_dot - 1);
      const std::string param = key.substr(last_dot + 1);
      const PluginChoice* own = choice->has_value() ? &**choice : nullptr;
      const PluginChoice* heads = kind == "allocator" && own ? own->heads.get() : nullptr;
      for (const PluginChoice* p : {own, heads}) {
        if (p && (plugin == p->id || plugin == short_id(p->id))) {
          names.plugin_params[p->id].push_back(param + "=" + label_value(value));
          break;
        }
      }
      continue;  // a param of a plugin this cell does not use changes nothing it computes
    }
    if (key.rfind("compression.decode.", 0) == 0) continue;  // DecodeSpec::describe names the params a policy reads
    if (key.rfind("compression.codec.", 0) == 0) continue;   // CodecSpec::label names the params a format reads
    if (key.rfind("compression.share.", 0) == 0) continue;   // ShareSpec::label names the sharing
    if (key.rfind("compression.joint.", 0) == 0) continue;   // JointSpec::label names the plan's grid
    names.others.push_back(key + "=" + label_value(value));
  }
  return names;
}

/// "snapkv" or "snapkv(window=16,kernel=5)".
std::string plugin_label(const PluginChoice& p, const SweptNames& names) {
  std::string s = short_id(p.id);
  const auto it = names.plugin_params.find(p.id);
  if (it == names.plugin_params.end()) return s;
  std::string params;
  for (const auto& kv : it->second) params += (params.empty() ? "" : ",") + kv;
  return s + "(" + params + ")";
}

/// A cell's group in two parts: "<allocator>(<signal>)/<heads> + <scorer>" and the settings after its budget
/// (", decode ...", ", key=value"). Not for the full-cache cell.
std::pair<std::string, std::string> cell_group(const Cell& cell, const std::set<std::string>& varying) {
  const CellConfig& cc = cell.config;
  const SweptNames names = swept_names(cell, varying);
  std::ostringstream methods, settings;
  if (!cc.joint.none()) {  // the plan replaces the allocator, the codec and sharing
    methods << "joint(" << cc.joint.plan << ") + " << plugin_label(*cc.scorer, names);
    settings << ", " << cc.joint.label();
    for (const auto& o : names.others) settings << ", " << o;
    return {methods.str(), settings.str()};
  }
  methods << plugin_label(*cc.allocator, names);
  // The damage signal is the oracle (runner/profile/damage_signal.hpp): its cells are the ceiling, and their label says so;
  // with of = "sharing" it is the sharing damage. The signal is shown where the profile is used: beside the
  // allocator (or the codec's per-layer bits), and in the share chooser's setting.
  std::string signal;
  if (cc.uses_profile && cc.signal) {
    const auto of = cc.signal->params.values().find("of");
    const bool sharing = of != cc.signal->params.values().end() && of->second == ParamValue(std::string("sharing"));
    signal = plugin_label(*cc.signal, names) +
             (is_damage_signal(cc.signal->info) ? (sharing ? ": sharing damage" : ": oracle") : "");
  }
  const bool allocator_profile = (cc.allocator->info->descriptor->flags & RKV_FLAG_NEEDS_PROFILE) != 0;
  if (cc.uses_profile && (allocator_profile || cc.codec.layer_bits == "profile")) methods << "(" << signal << ")";
  if (cc.allocator->heads) methods << "/" << plugin_label(*cc.allocator->heads, names);
  methods << " + " << plugin_label(*cc.scorer, names);
  if (!cc.route.empty()) methods << " + route[" << route_label(cc.route) << "]";
  if (cc.decode.traits().evicts) settings << ", decode " << cc.decode.describe();
  if (!cc.codec.none()) settings << ", kv " << cc.codec.label();
  if (cc.share.count > 0)
    settings << ", share " << cc.share.count << " layers by " << signal;
  else if (!cc.share.none())
    settings << ", share " << cc.share.label();
  for (const auto& o : names.others) settings << ", " << o;
  return {methods.str(), settings.str()};
}

std::string budget_label(const CellConfig& cc) {
  std::ostringstream os;
  if (cc.budget_bytes_fraction) os << "kv bytes=" << *cc.budget_bytes_fraction;
  else if (cc.budget_fraction) os << "f=" << *cc.budget_fraction;
  else os << *cc.budget_tokens << " tok";
  return os.str();
}

}  // namespace

namespace {

/// The distinct values of each key over `cells` (the full-cache cell aside), a cell that does not set the key counting
/// as one more value ("methods" tables set different keys: a key only one method sets tells that method apart).
template <typename CellRange, typename Get>
std::map<std::string, std::set<std::string>> values_by_key(const CellRange& cells, Get cell_of) {
  std::map<std::string, std::set<std::string>> values_of;
  size_t compressed = 0;
  for (const auto& item : cells) {
    const Cell& c = cell_of(item);
    if (c.config.full_cache) continue;
    ++compressed;
    for (const auto& [key, value] : c.values.items()) values_of[key].insert(value.dump());
  }
  for (auto& [key, values] : values_of) {
    size_t setting = 0;
    for (const auto& item : cells)
      if (!cell_of(item).config.full_cache && cell_of(item).values.contains(key)) ++setting;
    if (setting < compressed) values.insert("<unset>");
  }
  return values_of;
}

}  // namespace

void label_cells(std::vector<Cell>& cells, bool rerotate, const PrefillSpec& prefill) {
  const std::map<std::string, std::set<std::string>> values_of =
      values_by_key(cells, [](const Cell& c) -> const Cell& { return c; });
  std::set<std::string> varying;
  for (const auto& [key, values] : values_of)
    if (values.size() > 1) varying.insert(key);
  for (Cell& c : cells) {
    if (c.config.full_cache) continue;
    auto [methods, settings] = cell_group(c, varying);
    if (rerotate) settings += ", rerotated keys";
    if (prefill.compress_between_chunks)
      settings += ", compressed between chunks of " + std::to_string(prefill.chunk_tokens);
    c.group = methods + settings;
    c.label = methods + " @ " + budget_label(c.config) + settings;
  }
  std::map<std::string, std::vector<Cell*>> by_label;
  for (Cell& c : cells) by_label[c.label].push_back(&c);
  for (auto& [label, same] : by_label) {
    if (same.size() < 2) continue;
    // the keys that set these cells apart
    const std::map<std::string, std::set<std::string>> values_here =
        values_by_key(same, [](const Cell* c) -> const Cell& { return *c; });
    for (Cell* c : same) {
      std::string extra;
      for (const auto& [key, value] : c->values.items())
        if (values_here.at(key).size() > 1) extra += (extra.empty() ? "" : ", ") + key + "=" + label_value(value);
      if (extra.empty()) continue;  // the one cell of the set that sets none of the keys the others set
      c->label += " [" + extra + "]";
      c->group += " [" + extra + "]";
    }
  }
}

std::string effective_key(const CellConfig& cell) {
  if (cell.full_cache) return "full";
  std::ostringstream os;
  auto plugin = [&](const std::optional<PluginChoice>& p) {
    if (p) os << p->id << "{" << p->params.to_string() << "}";
    os << "|";
  };
  plugin(cell.uses_profile ? cell.signal : std::nullopt);
  plugin(cell.scorer);
  if (!cell.route.empty()) os << "route=" << route_key(cell.route) << "|";
  plugin(cell.joint.none() ? cell.allocator : std::nullopt);  // a joint cell's plan replaces the allocator
  if (cell.joint.none() && cell.allocator && cell.allocator->heads) {
    os << "heads=";
    plugin(std::optional<PluginChoice>(*cell.allocator->heads));
  }
  if (cell.budget_bytes_fraction) os << "bytes=" << *cell.budget_bytes_fraction;
  else if (cell.budget_fraction) os << "f=" << *cell.budget_fraction;
  else os << "tokens=" << *cell.budget_tokens;
  os << "|decode=" << cell.decode.describe();
  // A codec, sharing and a joint plan join the key only when set, so a cell without them keys as a plain cell.
  if (!cell.codec.none()) os << "|codec=" << cell.codec.label();
  if (!cell.share.none()) os << "|share=" << cell.share.label();
  if (!cell.joint.none()) os << "|joint=" << cell.joint.plan << ":" << cell.joint.label();
  return os.str();
}

}  // namespace rkv
