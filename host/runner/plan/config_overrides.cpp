// `--set KEY=VALUE` (runner/plan/config_overrides.hpp).
#include "runner/plan/config_overrides.hpp"

#include <charconv>
#include <map>
#include <sstream>

namespace rkv {

namespace {

/// The '=' that ends KEY: the first one outside a quoted key segment.
size_t key_end(const std::string& s) {
  char quote = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    if (quote) {
      if (ch == '\\' && quote == '"' && i + 1 < s.size()) ++i;
      else if (ch == quote) quote = 0;
    } else if (ch == '"' || ch == '\'') {
      quote = ch;
    } else if (ch == '=') {
      return i;
    }
  }
  return std::string::npos;
}

/// `text` as a TOML basic string.
std::string toml_string(const std::string& text) {
  std::string out = "\"";
  for (char ch : text) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

/// Merges `from` into `into`: tables are merged key by key, anything else replaces what was there. `prefix` and
/// `keys` collect the dotted keys set; `spec` names the override in messages.
void merge(toml::table& into, const toml::table& from, const std::string& prefix, std::set<std::string>& keys,
           const std::string& spec) {
  for (const auto& [k, v] : from) {
    const std::string key(k.str());
    const std::string full = prefix.empty() ? key : prefix + "." + key;
    toml::node* have = into.get(key);
    if (const toml::table* sub = v.as_table(); sub && !sub->is_inline()) {
      if (have && !have->is_table())
        throw InputError("--set '" + spec + "': '" + full + "' is a value in the config, not a table");
      if (!have) into.insert(key, toml::table{});
      merge(*into.get(key)->as_table(), *sub, full, keys, spec);
      continue;
    }
    into.insert_or_assign(key, v);
    keys.insert(full);
  }
}

/// Every leaf of `t` as dotted key -> its TOML text.
void flatten(const toml::table& t, const std::string& prefix, std::map<std::string, std::string>& out) {
  for (const auto& [k, v] : t) {
    const std::string full = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (const toml::table* sub = v.as_table(); sub && !sub->is_inline()) {
      flatten(*sub, full, out);
      continue;
    }
    if (const auto* f = v.as_floating_point()) {  // the shortest text that reads back as the same double (0.3, not
      char buf[64];                               // toml++'s 0.29999999999999999)
      const auto r = std::to_chars(buf, buf + sizeof buf, f->get());
      out[full] = std::string(buf, r.ptr);
      continue;
    }
    std::ostringstream os;
    v.visit([&](const auto& node) { os << node; });
    out[full] = os.str();
  }
}

}  // namespace

std::set<std::string> apply_config_overrides(toml::table& root, const std::vector<std::string>& overrides) {
  std::set<std::string> keys;
  for (const std::string& spec : overrides) {
    const size_t eq = key_end(spec);
    if (eq == std::string::npos) throw InputError("--set '" + spec + "': expected KEY=VALUE");
    std::string key = spec.substr(0, eq), value = spec.substr(eq + 1);
    auto trim = [](std::string& s) {
      while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.pop_back();
      while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.erase(s.begin());
    };
    trim(key), trim(value);
    if (key.empty()) throw InputError("--set '" + spec + "': the key is empty");
    if (spec.find('\n') != std::string::npos) throw InputError("--set '" + spec + "': a value spans one line");
    toml::table parsed;
    try {
      parsed = toml::parse(std::string_view(key + " = " + value), std::string_view("--set"));
    } catch (const toml::parse_error& e) {
      // A bare word ("snapkv", "h2o") is a string; anything else that is not TOML is refused, not guessed at.
      const bool bare = !value.empty() && value.find_first_of("\"'[]{}#=") == std::string::npos;
      if (!bare) throw InputError("--set '" + spec + "': not a TOML key and value: " + std::string(e.description()));
      try {
        parsed = toml::parse(std::string_view(key + " = " + toml_string(value)), std::string_view("--set"));
      } catch (const toml::parse_error& e2) {
        throw InputError("--set '" + spec + "': '" + key + "' is not a TOML key: " + std::string(e2.description()));
      }
    }
    merge(root, parsed, "", keys, spec);
  }
  return keys;
}

std::string effective_config_text(const toml::table& root, const std::string& origin,
                                  const std::vector<std::string>& overrides) {
  if (overrides.empty()) return "";
  std::ostringstream os;
  os << "# the effective config: " << origin << " with";
  for (const std::string& o : overrides) os << " --set " << o;
  std::ostringstream out;
  out << one_line(os.str()) << "\n" << root << "\n";
  return out.str();
}

std::string one_line(std::string text) {
  for (char& ch : text)
    if (ch == '\n' || ch == '\r') ch = ' ';
  return text;
}

std::vector<std::string> changed_config_keys(const std::string& then_text, const std::string& now_text, size_t limit) {
  std::map<std::string, std::string> then_keys, now_keys;
  try {
    toml::table then_root = toml::parse(then_text), now_root = toml::parse(now_text);
    then_root.erase("sweep"), now_root.erase("sweep");
    flatten(then_root, "", then_keys);
    flatten(now_root, "", now_keys);
  } catch (const toml::parse_error&) {
    return {};
  }
  std::vector<std::string> out;
  size_t more = 0;
  auto add = [&](const std::string& line) { out.size() < limit ? out.push_back(line) : void(++more); };
  for (const auto& [k, v] : then_keys) {
    const auto it = now_keys.find(k);
    if (it == now_keys.end()) add(k + ": " + v + " then, unset now");
    else if (it->second != v) add(k + ": " + v + " then, " + it->second + " now");
  }
  for (const auto& [k, v] : now_keys)
    if (!then_keys.count(k)) add(k + ": unset then, " + v + " now");
  if (more) out.push_back("and " + std::to_string(more) + " more");
  return out;
}

}  // namespace rkv
