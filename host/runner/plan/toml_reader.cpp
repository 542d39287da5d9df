#include "runner/plan/toml_reader.hpp"

#include <algorithm>
#include <sstream>

namespace rkv {

toml::table parse_toml(const std::string& text, const std::string& origin) {
  try {
    return toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << origin << ":" << e.source().begin.line << ":" << e.source().begin.column << ": TOML syntax error: "
       << e.description();
    throw InputError(os.str());
  }
}

std::string where(const std::string& origin, const toml::node& n, const std::string& key) {
  std::ostringstream os;
  os << origin;
  if (n.source().begin.line) os << ":" << n.source().begin.line;
  os << ": '" << key << "'";
  return os.str();
}

std::string where(const TomlContext& c, const toml::node& n, const std::string& key) {
  // A value --set put there has no line in the file: say where it came from instead.
  if (!n.source().begin.line && !c.overridden.empty()) return c.origin + " with --set: '" + key + "'";
  return where(c.origin, n, key);
}

std::string where_table(const TomlContext& c, const toml::table& t, const std::string& key) {
  std::ostringstream os;
  os << c.origin;
  if (t.source().begin.line) os << ":" << t.source().begin.line;
  os << ": [" << key << "]";
  return os.str();
}

void check_keys(const TomlContext& c, const toml::table& t, const std::string& table_name,
                const std::vector<std::string>& allowed) {
  for (const auto& [k, v] : t) {
    const std::string key(k.str());
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    const std::string full = table_name.empty() ? key : table_name + "." + key;
    std::string msg = where(c, v, full) + " is not a known key";
    if (!allowed.empty()) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      msg += (table_name.empty() ? std::string(" at the top level") : " in [" + table_name + "]") + "; valid: " +
             list + "; did you mean '" + closest_match(key, allowed) + "'?";
    }
    throw InputError(msg);
  }
}

const toml::table* sub_table(const TomlContext& c, const toml::table& t, const std::string& key,
                             const std::string& full) {
  const toml::node* n = t.get(key);
  if (!n) return nullptr;
  if (!n->is_table()) throw InputError(where(c, *n, full) + " must be a table");
  return n->as_table();
}

int64_t get_int(const TomlContext& c, const toml::table& t, const std::string& key, const std::string& full,
                int64_t def, int64_t min_value, int64_t max_value) {
  const toml::node* n = t.get(key);
  if (!n) return def;
  if (!n->is_integer()) throw InputError(where(c, *n, full) + " must be an integer");
  const int64_t v = n->as_integer()->get();
  if (v < min_value)
    throw InputError(where(c, *n, full) + " must be >= " + std::to_string(min_value) + " (got " + std::to_string(v) + ")");
  if (v > max_value)
    throw InputError(where(c, *n, full) + " must be <= " + std::to_string(max_value) + " (got " + std::to_string(v) + ")");
  return v;
}

double get_float(const TomlContext& c, const toml::node& n, const std::string& full) {
  if (n.is_floating_point()) return n.as_floating_point()->get();
  if (n.is_integer()) return static_cast<double>(n.as_integer()->get());
  throw InputError(where(c, n, full) + " must be a number");
}

std::string get_string(const TomlContext& c, const toml::table& t, const std::string& key, const std::string& full,
                       const std::string& def) {
  const toml::node* n = t.get(key);
  if (!n) return def;
  if (!n->is_string()) throw InputError(where(c, *n, full) + " must be a string");
  return n->as_string()->get();
}

bool get_bool(const TomlContext& c, const toml::table& t, const std::string& key, const std::string& full, bool def) {
  const toml::node* n = t.get(key);
  if (!n) return def;
  if (!n->is_boolean()) throw InputError(where(c, *n, full) + " must be true or false");
  return n->as_boolean()->get();
}

std::vector<std::string> get_string_list(const TomlContext& c, const toml::table& t, const std::string& key,
                                         const std::string& full) {
  std::vector<std::string> out;
  const toml::node* n = t.get(key);
  if (!n) return out;
  if (!n->is_array()) throw InputError(where(c, *n, full) + " must be an array of strings");
  for (const auto& e : *n->as_array()) {
    if (!e.is_string()) throw InputError(where(c, e, full) + " must be an array of strings");
    out.push_back(e.as_string()->get());
  }
  return out;
}

ParamValue to_param_value(const std::string& origin, const toml::node& n, const std::string& full) {
  if (n.is_boolean()) return n.as_boolean()->get();
  if (n.is_integer()) return n.as_integer()->get();
  if (n.is_floating_point()) return n.as_floating_point()->get();
  if (n.is_string()) return n.as_string()->get();
  throw InputError(where(origin, n, full) + " must be a bool, number or string");
}

nlohmann::json to_json(const toml::node& n) {
  if (n.is_boolean()) return n.as_boolean()->get();
  if (n.is_integer()) return n.as_integer()->get();
  if (n.is_floating_point()) return n.as_floating_point()->get();
  if (n.is_string()) return n.as_string()->get();
  std::ostringstream os;
  n.visit([&](const auto& v) { os << v; });
  return os.str();
}

}  // namespace rkv
