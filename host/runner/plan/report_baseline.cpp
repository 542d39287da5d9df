// [output] baseline (runner/plan/report_baseline.hpp).
#include "runner/plan/report_baseline.hpp"

#include <algorithm>
#include <set>

#include "core/errors.hpp"
#include "runner/plan/run_plan.hpp"
#include "runner/plan/sweep.hpp"
#include "runner/plan/toml_reader.hpp"

namespace rkv {

namespace {

/// The settings of an inline table as dotted keys: { scorer = { plugin = "snapkv" } } sets "scorer.plugin", as a
/// "methods" table does (sweep.hpp).
/// An empty table is kept as a setting of its own (so the caller refuses it instead of dropping it silently).
void flatten(const toml::table& t, const std::string& prefix, std::vector<std::pair<std::string, const toml::node*>>& out) {
  for (const auto& [k, v] : t) {
    const std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (v.is_table() && !v.as_table()->empty()) flatten(*v.as_table(), key, out);
    else out.emplace_back(key, &v);
  }
}

/// Every key a cell's swept values may hold, and for each key of a "methods" axis the keys of that axis.
struct SweptKeys {
  std::set<std::string> all;
  std::set<std::string> methods;  ///< the keys some "methods" table sets
};

SweptKeys swept_keys(const std::vector<SweepAxis>& axes) {
  SweptKeys k;
  for (const SweepAxis& axis : axes) {
    if (axis.key != "methods") {
      k.all.insert(axis.key);
      continue;
    }
    for (size_t i = 0; i < axis.values.size(); ++i) {
      std::vector<std::pair<std::string, const toml::node*>> settings;
      flatten(*axis.values.get(i)->as_table(), "", settings);
      for (const auto& [key, node] : settings) k.all.insert(key), k.methods.insert(key);
    }
  }
  return k;
}

}  // namespace

nlohmann::json ReportBaseline::to_json() const {
  if (kind == Kind::uniform) return "uniform";
  if (kind == Kind::full) return "full";
  return {{"select", select}, {"free", free}};
}

ReportBaseline ReportBaseline::from_json(const nlohmann::json& j, const std::string& where) {
  ReportBaseline b;
  if (j.is_string() && j.get<std::string>() == "uniform") return b;
  if (j.is_string() && j.get<std::string>() == "full") {
    b.kind = Kind::full;
    return b;
  }
  if (j.is_object() && j.contains("select") && j.at("select").is_object() && !j.at("select").empty() &&
      j.contains("free") && j.at("free").is_array()) {
    b.kind = Kind::selector;
    b.select = j.at("select");
    for (const auto& k : j.at("free")) {
      if (!k.is_string()) break;
      b.free.push_back(k.get<std::string>());
    }
    if (b.free.size() == j.at("free").size()) return b;
  }
  throw InputError(where + ": report_baseline is not \"uniform\", \"full\" or {\"select\": {...}, \"free\": [...]}");
}

std::string ReportBaseline::describe() const {
  if (kind == Kind::uniform) return "uniform";
  if (kind == Kind::full) return "the full cache";
  std::string s;
  for (const auto& [k, v] : select.items())
    s += (s.empty() ? "" : ", ") + k + " = " + (v.is_string() ? v.get<std::string>() : v.dump());
  return s;
}

bool ReportBaseline::selects(const nlohmann::json& values) const {
  if (kind != Kind::selector || !values.is_object()) return false;
  for (const auto& [k, v] : select.items())
    if (!values.contains(k) || values.at(k) != v) return false;
  return true;
}

bool ReportBaseline::same_other_values(const nlohmann::json& a, const nlohmann::json& b) const {
  auto is_free = [&](const std::string& k) { return std::binary_search(free.begin(), free.end(), k); };
  for (const nlohmann::json* x : {&a, &b})
    for (const auto& [k, v] : x->items()) {
      if (is_free(k)) continue;
      const nlohmann::json& other = x == &a ? b : a;
      if (!other.contains(k) || other.at(k) != v) return false;
    }
  return true;
}

ReportBaseline read_report_baseline(const TomlContext& c, const toml::table* output, const std::vector<SweepAxis>& axes,
                                    const std::vector<Cell>& cells) {
  ReportBaseline b;
  const toml::node* n = output ? output->get("baseline") : nullptr;
  if (!n) return b;
  const std::string at = where(c, *n, "output.baseline");
  if (const auto* s = n->as_string()) {
    if (s->get() == "uniform") return b;
    if (s->get() == "full") {
      b.kind = ReportBaseline::Kind::full;
      return b;
    }
    throw InputError(at + ": \"" + s->get() + "\" is not a baseline (expected \"uniform\", \"full\" or a table of "
                     "swept values such as { \"scorer.plugin\" = \"snapkv\" })");
  }
  if (!n->is_table() || n->as_table()->empty())
    throw InputError(at + " must be \"uniform\", \"full\" or a non-empty table of swept values such as "
                          "{ \"scorer.plugin\" = \"snapkv\" }");
  const SweptKeys keys = swept_keys(axes);
  std::vector<std::pair<std::string, const toml::node*>> settings;
  flatten(*n->as_table(), "", settings);
  b.kind = ReportBaseline::Kind::selector;
  std::set<std::string> free;
  bool touches_methods = false;
  for (const auto& [key, node] : settings) {
    if (!keys.all.count(key)) {
      std::string listed;
      for (const auto& k : keys.all) listed += (listed.empty() ? "" : ", ") + k;
      throw InputError(where(c, *node, "output.baseline." + key) + ": '" + key + "' is not swept" +
                       (listed.empty() ? " (the config has no [sweep])" : " (swept keys: " + listed + ")"));
    }
    if (node->is_table())
      throw InputError(where(c, *node, "output.baseline." + key) + " must be a value of the sweep, not a table");
    const nlohmann::json value = to_json(*node);
    const bool taken = std::any_of(cells.begin(), cells.end(), [&](const Cell& cell) {
      return cell.values.is_object() && cell.values.contains(key) && cell.values.at(key) == value;
    });
    if (!taken)
      throw InputError(where(c, *node, "output.baseline." + key) + ": no cell of the sweep has " + key + " = " +
                       value.dump());
    b.select[key] = value;
    free.insert(key);
    touches_methods = touches_methods || keys.methods.count(key);
  }
  if (touches_methods) free.insert(keys.methods.begin(), keys.methods.end());  // a method is one choice
  b.free.assign(free.begin(), free.end());
  if (!std::any_of(cells.begin(), cells.end(), [&](const Cell& cell) { return b.selects(cell.values); }))
    throw InputError(at + ": no cell of the sweep has every value " + b.describe() + " (the baseline cells)");
  return b;
}

}  // namespace rkv
