// Run-level sweep keys (runner/plan/run_axes.hpp).
#include "runner/plan/run_axes.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "core/errors.hpp"
#include "core/fnv1a.hpp"
#include "runner/plan/config_overrides.hpp"

namespace rkv {

namespace {

/// The index of each axis' value in run k (the first axis varies fastest).
std::vector<size_t> value_indices(const std::vector<SweepAxis>& axes, size_t k) {
  std::vector<size_t> idx;
  for (const SweepAxis& a : axes) {
    idx.push_back(k % a.values.size());
    k /= a.values.size();
  }
  return idx;
}

/// A run name's part for one value: the model file's name without ".gguf" (a folder's own name), or "seed-N".
std::string name_part(const std::string& key, const toml::node& v) {
  if (key == "data.eval.seed") return "seed-" + std::to_string(v.value_or<int64_t>(0));
  std::string p = v.value_or<std::string>("");
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  std::string name = std::filesystem::path(p).filename().string();
  if (name.size() > 5 && name.compare(name.size() - 5, 5, ".gguf") == 0) name.resize(name.size() - 5);
  return name;
}

/// `s` as a folder name: letters, digits, '.', '-', '_' kept, anything else '-'; never empty, "." or "..", and never
/// starting with '.' or '-'; at most 80 characters (and "run" before).
std::string folder_safe(const std::string& s) {
  std::string out;
  for (char ch : s) {
    const unsigned char u = static_cast<unsigned char>(ch);
    const bool keep = (u < 0x80 && std::isalnum(u)) || ch == '.' || ch == '-' || ch == '_';
    if (keep) out += ch;
    else if (out.empty() || out.back() != '-') out += '-';  // one '-' for a run of others (a UTF-8 letter's bytes)
  }
  if (out.size() > 80) out.resize(80);
  if (out.empty() || out.front() == '.' || out.front() == '-') out = "run" + out;  // no hidden name, no option-like one
  return out;
}

}  // namespace

bool is_run_axis_key(const std::string& key) {
  return std::find(kRunAxisKeys.begin(), kRunAxisKeys.end(), key) != kRunAxisKeys.end();
}

std::vector<SweepAxis> take_run_axes(const TomlContext& c, toml::table& root) {
  std::vector<SweepAxis> axes;
  toml::table* sw = root.get_as<toml::table>("sweep");
  if (!sw) return axes;
  for (const std::string& key : kRunAxisKeys) {
    const toml::node* node = sw->get(key);
    if (!node) continue;
    const toml::node& v = *node;
    const std::string name = "sweep.\"" + key + "\"";
    const toml::array* values = v.as_array();
    if (!values || values->empty())
      throw InputError(where(c, v, name) + " must be a non-empty array of " +
                       (key == "model.path" ? "model paths (strings)" : "seeds (integers)"));
    std::set<std::string> seen;
    for (const toml::node& e : *values) {
      std::string shown;
      if (key == "model.path") {
        if (!e.is_string() || e.as_string()->get().empty())
          throw InputError(where(c, e, name) + ": every value must be a non-empty string (a .gguf file or a model "
                                               "folder)");
        shown = e.as_string()->get();
      } else {
        if (!e.is_integer() || e.as_integer()->get() < 0)
          throw InputError(where(c, e, name) + ": every value must be an integer seed in [0, 9223372036854775807]");
        shown = std::to_string(e.as_integer()->get());
      }
      if (!seen.insert(shown).second)
        throw InputError(where(c, e, name) + ": '" + shown + "' is listed twice; each value makes one run");
    }
    axes.push_back({key, *values});
  }
  for (const SweepAxis& a : axes) sw->erase(a.key);
  if (sw->empty()) root.erase("sweep");
  return axes;
}

size_t run_count(const std::vector<SweepAxis>& axes) {
  size_t n = 1;
  for (const SweepAxis& a : axes) n *= a.values.size();
  return n;
}

nlohmann::json run_values(const std::vector<SweepAxis>& axes, size_t k) {
  nlohmann::json out = nlohmann::json::object();
  const std::vector<size_t> idx = value_indices(axes, k);
  for (size_t i = 0; i < axes.size(); ++i) {
    const toml::node& v = *axes[i].values.get(idx[i]);
    if (v.is_integer()) out[axes[i].key] = v.as_integer()->get();
    else out[axes[i].key] = v.value_or<std::string>("");
  }
  return out;
}

void set_run_values(toml::table& root, const std::vector<SweepAxis>& axes, size_t k) {
  const std::vector<size_t> idx = value_indices(axes, k);
  for (size_t i = 0; i < axes.size(); ++i) {
    const toml::node& v = *axes[i].values.get(idx[i]);
    // "model.path" -> root.model.path; "data.eval.seed" -> root.data.eval.seed (tables created when missing; a
    // non-table there is left to the plan's own checks, which name it)
    std::stringstream ss(axes[i].key);
    std::vector<std::string> parts;
    for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
    toml::table* t = &root;
    for (size_t j = 0; j + 1 < parts.size(); ++j) {
      if (!t->contains(parts[j])) t->insert(parts[j], toml::table{});
      toml::table* next = t->get_as<toml::table>(parts[j]);
      if (!next) throw InputError("[" + parts[j] + "] is not a table, so [sweep] \"" + axes[i].key + "\" cannot set it");
      t = next;
    }
    if (v.is_integer()) t->insert_or_assign(parts.back(), v.as_integer()->get());
    else t->insert_or_assign(parts.back(), v.value_or<std::string>(""));
  }
}

std::vector<std::string> run_names(const std::vector<SweepAxis>& axes) {
  // Each value's part of a name: folder-safe, and where two values' parts would be equal ("x y.gguf", "x-y.gguf", or
  // one file name in two folders) each gets 6 hex digits of a hash of its own value, so a path keeps its name
  // whatever the order of the list (a reordered --resume finds each model's folder).
  std::map<std::string, std::vector<std::string>> parts;  // key -> part per value index
  for (const SweepAxis& a : axes) {
    std::map<std::string, int> uses;
    std::vector<std::string>& p = parts[a.key];
    for (const toml::node& v : a.values) p.push_back(folder_safe(name_part(a.key, v)));
    for (const std::string& s : p) ++uses[s];
    for (size_t i = 0; i < p.size(); ++i)
      if (uses[p[i]] > 1) {
        const std::string raw = a.values.get(i)->value_or<std::string>("");
        p[i] += "-" + hex16(fnv1a64(raw)).substr(0, 6);
      }
  }
  std::vector<std::string> names;
  for (size_t k = 0; k < run_count(axes); ++k) {
    const std::vector<size_t> idx = value_indices(axes, k);
    std::string name;
    for (const std::string key : {"model.path", "data.eval.seed"})  // the model first, then the seed
      for (size_t i = 0; i < axes.size(); ++i)
        if (axes[i].key == key) name += (name.empty() ? "" : "_") + parts[key][idx[i]];
    names.push_back(folder_safe(name));
  }
  // 6 hex digits could still meet (or cut names meet): number what is left, in run order
  std::set<std::string> taken;
  for (std::string& name : names) {
    const std::string stem = name;
    for (int n = 2; !taken.insert(name).second; ++n) name = stem + "-" + std::to_string(n);
  }
  return names;
}

std::string run_config_text(const toml::table& root, const std::string& origin, const std::string& name,
                            const nlohmann::json& values, const std::vector<std::string>& overrides) {
  std::ostringstream os;
  os << "# run " << name << " of the sweep in " << origin << ": ";
  bool first = true;
  for (const auto& [k, v] : values.items()) {
    os << (first ? "" : ", ") << k << " = " << v.dump();
    first = false;
  }
  if (!overrides.empty()) {
    os << "; with";
    for (const std::string& o : overrides) os << " --set " << o;
  }
  std::ostringstream out;
  out << one_line(os.str()) << "\n" << root << "\n";
  return out.str();
}

}  // namespace rkv
