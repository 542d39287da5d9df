// [[scorer.route]]: parsing, validation, labels and records of a route (runner/plan/scorer_route.hpp).
#include "runner/plan/scorer_route.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <sstream>

#include "core/errors.hpp"
#include "plugin/params.hpp"
#include "runner/plan/toml_reader.hpp"

namespace rkv {

namespace {

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

/// A non-negative decimal index of at most kMaxLayer digits' worth; -1 when `s` is not one.
int64_t parse_index(const std::string& s) {
  if (s.empty() || s.size() > 9 || !std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
    return -1;
  return std::stoll(s);
}

/// `s` as a TOML basic string: quoted, with backslashes, quotes and control characters escaped.
std::string toml_string(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\', out += ch;
    else if (static_cast<unsigned char>(ch) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", ch);
      out += buf;
    } else out += ch;
  }
  return out + "\"";
}

/// `layers` of one entry: a layer-set string or an array of integer indices.
std::vector<int64_t> entry_layers(const std::string& origin, const toml::node& n, const std::string& key) {
  if (n.is_string()) return parse_layer_set(n.as_string()->get(), where(origin, n, key), kMaxLayer);
  if (!n.is_array())
    throw InputError(where(origin, n, key) + " must be a layer set such as \"0-9, 12\" or an array of layer indices");
  std::vector<int64_t> layers;
  for (const auto& e : *n.as_array()) {
    if (!e.is_integer()) throw InputError(where(origin, n, key) + " must be an array of integer layer indices");
    const int64_t l = e.as_integer()->get();
    if (l < 0 || l > kMaxLayer)
      throw InputError(where(origin, n, key) + " must hold layer indices in [0, " + std::to_string(kMaxLayer) +
                       "] (got " + std::to_string(l) + ")");
    if (std::find(layers.begin(), layers.end(), l) != layers.end())
      throw InputError(where(origin, n, key) + " lists layer " + std::to_string(l) + " twice");
    layers.push_back(l);
  }
  if (layers.empty()) throw InputError(where(origin, n, key) + " lists no layer");
  std::sort(layers.begin(), layers.end());
  return layers;
}

/// One [[scorer.route]] table.
RouteEntry parse_entry(const std::string& origin, const toml::table& t, const std::string& name,
                       const PluginRegistry& registry) {
  RouteEntry entry;
  const toml::node* pn = t.get("plugin");
  if (!pn) throw InputError(where(origin, t, name) + " needs plugin = \"id\" (a scorer)");
  if (!pn->is_string()) throw InputError(where(origin, *pn, name + ".plugin") + " must be a string");
  try {
    entry.scorer.info = &registry.resolve(pn->as_string()->get(), RKV_KIND_SCORER);
  } catch (const InputError& e) {
    throw InputError(where(origin, *pn, name + ".plugin") + ": " + e.what());
  }
  entry.scorer.id = entry.scorer.info->id();
  const toml::node* ln = t.get("layers");
  if (!ln) throw InputError(where(origin, t, name) + " needs layers = \"0-9\" or [0, 3, 5]");
  entry.layers = entry_layers(origin, *ln, name + ".layers");
  std::vector<UserParam> user;
  for (const auto& [k, v] : t) {
    const std::string key(k.str());
    if (key == "plugin" || key == "layers") continue;
    const std::string full = name + "." + key;
    if (key != short_id(entry.scorer.id) && key != entry.scorer.id)
      throw InputError(where(origin, v, full) + " is not a known key of a route entry; valid: layers, plugin, and " +
                       short_id(entry.scorer.id) + " = { ... } (the params of its plugin)");
    if (!v.is_table()) throw InputError(where(origin, v, full) + " must be a table of " + entry.scorer.id + "'s params");
    for (const auto& [pk, pv] : *v.as_table()) {
      std::ostringstream at;  // a swept route's tables carry no line: name the file alone then
      at << origin;
      if (pv.source().begin.line) at << ":" << pv.source().begin.line;
      user.push_back(UserParam{std::string(pk.str()), to_param_value(origin, pv, full + "." + std::string(pk.str())), false,
                               at.str()});
    }
  }
  try {
    entry.scorer.params = ParamSet::validate(*entry.scorer.info->descriptor, user);
  } catch (const InputError& e) {
    throw InputError(where(origin, t, name) + ": " + e.what());
  }
  std::sort(user.begin(), user.end(), [](const UserParam& a, const UserParam& b) { return a.key < b.key; });
  for (const auto& u : user)
    entry.user_params += (entry.user_params.empty() ? "" : ",") + u.key + "=" + param_value_to_string(u.value);
  return entry;
}

}  // namespace

std::vector<int64_t> parse_layer_set(const std::string& text, const std::string& at, int64_t max_layer) {
  std::vector<int64_t> layers;
  std::stringstream ss(text);
  for (std::string part; std::getline(ss, part, ',');) {
    part = trim(part);
    const auto dash = part.find('-');
    const int64_t lo = parse_index(trim(part.substr(0, dash)));
    const int64_t hi = dash == std::string::npos ? lo : parse_index(trim(part.substr(dash + 1)));
    if (lo < 0 || hi < 0)
      throw InputError(at + ": '" + part + "' is not a layer index or range (write \"0-9, 12\": indices and "
                            "inclusive ranges, comma-separated)");
    if (hi < lo) throw InputError(at + ": range '" + part + "' is descending");
    if (hi > max_layer)
      throw InputError(at + ": layer " + std::to_string(hi) + " is above " + std::to_string(max_layer));
    for (int64_t l = lo; l <= hi; ++l) {
      if (std::find(layers.begin(), layers.end(), l) != layers.end())
        throw InputError(at + " names layer " + std::to_string(l) + " twice");
      layers.push_back(l);
    }
  }
  if (layers.empty()) throw InputError(at + " names no layer");
  std::sort(layers.begin(), layers.end());
  return layers;
}

std::string layer_set_text(const std::vector<int64_t>& layers) {
  std::string out;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + std::to_string(layers[i]);
    if (j > i) out += "-" + std::to_string(layers[j]);
    i = j + 1;
  }
  return out;
}

std::vector<RouteEntry> parse_scorer_route(const toml::node& value, const std::string& origin,
                                           const PluginRegistry& registry) {
  if (!value.is_array())
    throw InputError(where(origin, value, "scorer.route") +
                     " must be an array of tables: [[scorer.route]] with layers = \"0-9\" and plugin = \"id\"");
  std::vector<RouteEntry> route;
  std::map<int64_t, size_t> owner;  // layer -> the entry that routes it
  const toml::array& entries = *value.as_array();
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string name = "scorer.route[" + std::to_string(i) + "]";
    const toml::node& e = *entries.get(i);
    if (!e.is_table()) throw InputError(where(origin, e, name) + " must be a table with layers and plugin");
    RouteEntry entry = parse_entry(origin, *e.as_table(), name, registry);
    for (int64_t l : entry.layers) {
      const auto [it, fresh] = owner.emplace(l, i);
      if (!fresh)
        throw InputError(where(origin, *e.as_table()->get("layers"), name + ".layers") + ": layer " +
                         std::to_string(l) + " is also routed by scorer.route[" + std::to_string(it->second) +
                         "]; a layer has one scorer");
    }
    route.push_back(std::move(entry));
  }
  return route;
}

std::string route_label(const std::vector<RouteEntry>& route) {
  std::string s;
  for (const auto& e : route) {
    std::string layers = layer_set_text(e.layers);
    layers.erase(std::remove(layers.begin(), layers.end(), ' '), layers.end());
    s += (s.empty() ? "" : "; ") + short_id(e.scorer.id) + (e.user_params.empty() ? "" : "(" + e.user_params + ")") +
         ":" + layers;
  }
  return s;
}

std::string route_key(const std::vector<RouteEntry>& route) {
  std::string s;
  for (const auto& e : route) s += e.scorer.id + "{" + e.scorer.params.to_string() + "}@" + layer_set_text(e.layers) + ";";
  return s;
}

nlohmann::json route_json(const std::vector<RouteEntry>& route) {
  if (route.empty()) return nullptr;
  nlohmann::json out = nlohmann::json::array();
  for (const auto& e : route) {
    nlohmann::json j;
    j["layers"] = e.layers;
    j["id"] = e.scorer.id;
    j["version"] = e.scorer.info ? e.scorer.info->descriptor->version : "";
    nlohmann::json params = nlohmann::json::object();
    for (const auto& [k, v] : e.scorer.params.values())
      std::visit([&, key = k](const auto& x) { params[key] = x; }, v);
    j["params"] = params;
    out.push_back(j);
  }
  return out;
}

void check_route_layers(const std::vector<RouteEntry>& route, int64_t n_layers, const std::string& what) {
  for (size_t i = 0; i < route.size(); ++i)
    for (int64_t l : route[i].layers)
      if (l >= n_layers)
        throw InputError(what + ": scorer.route[" + std::to_string(i) + "].layers names layer " + std::to_string(l) +
                         " but the model has " + std::to_string(n_layers) + " layers (0-" +
                         std::to_string(n_layers - 1) + ")");
}

std::string route_toml(const std::vector<RouteTomlEntry>& entries) {
  std::ostringstream os;
  for (const auto& e : entries) {
    if (e.layers.empty()) continue;
    os << "[[scorer.route]]\nlayers = \"" << layer_set_text(e.layers) << "\"\nplugin = \"" << e.plugin << "\"\n";
    if (e.params.empty()) continue;
    os << short_id(e.plugin) << " = { ";
    for (size_t k = 0; k < e.params.size(); ++k) {
      const ParamValue& v = e.params[k].second;
      os << (k ? ", " : "") << e.params[k].first << " = ";
      if (const auto* s = std::get_if<std::string>(&v)) os << toml_string(*s);
      else os << param_value_to_string(v);
    }
    os << " }\n";
  }
  return os.str();
}

}  // namespace rkv
