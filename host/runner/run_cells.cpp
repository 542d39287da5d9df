// Reading the finished cell files of one or more output folders (runner/run_cells.hpp).
#include "runner/run_cells.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <set>
#include <sstream>

#include "core/atomic_file.hpp"
#include "core/errors.hpp"
#include "eval/stats.hpp"

namespace fs = std::filesystem;

namespace rkv {

/// "cpu (f32)": the backend and compute dtype a cell file records (cells written before the dtype existed are f32).
std::string backend_of(const nlohmann::json& meta) {
  return meta.at("backend").get<std::string>() + " (" + meta.value("compute_dtype", std::string("f32")) + ")";
}



std::string fmt(double v, int prec) {
  if (std::isnan(v)) return "nan";
  std::ostringstream os;
  os << std::setprecision(prec) << v;
  return os.str();
}

nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

std::string short_id(const nlohmann::json& plugin) {
  if (plugin.is_null()) return "";
  const std::string id = plugin.at("id").get<std::string>();
  const auto dot = id.rfind('.');
  return id.substr(dot == std::string::npos ? 0 : dot + 1);
}

/// The group a cell belongs to in plots and comparisons: allocator(signal) + scorer with its params.
std::string group_of(const nlohmann::json& m) {
  if (m.at("full_cache").get<bool>()) return "full cache";
  if (m.contains("group")) return m.at("group").get<std::string>();  // cell files since labels name swept params
  std::string g = short_id(m.at("allocator"));
  if (!m.at("signal").is_null()) g += "(" + short_id(m.at("signal")) + ")";
  if (m.contains("heads") && !m.at("heads").is_null()) g += "/" + short_id(m.at("heads"));
  g += " + " + short_id(m.at("scorer"));
  if (m.contains("decode") && m.at("decode") != "none") g += ", decode " + m.at("decode").get<std::string>();
  return g;
}

/// The decode policy a cell ran under ("none" for cell files written before it was recorded).
std::string decode_of(const nlohmann::json& m) { return m.contains("decode") ? m.at("decode").get<std::string>() : "none"; }

/// Everything the tables, the report and the plots read from a cell file's fields (besides its examples) has the
/// type they read it as: a hand-edited cell file is skipped with a warning naming the key, never an internal error.
void check_cell_meta(const nlohmann::json& m) {
  auto require = [&](const char* key, bool ok, const char* what) {
    if (!ok) throw InputError(std::string("'") + key + "' is missing or not " + what);
  };
  auto field = [&](const char* key) { return m.contains(key) ? &m.at(key) : nullptr; };
  for (const char* key : {"cell_id", "base_sha256", "run_id", "config_sha256", "label", "backend"}) {
    const nlohmann::json* v = field(key);
    require(key, v && v->is_string(), "a string");
  }
  for (const char* key : {"model_sha256", "compute_dtype"}) {
    const nlohmann::json* v = field(key);
    require(key, !v || v->is_string(), "a string");
  }
  require("cell", field("cell") != nullptr, "present");
  require("decode", !field("decode") || field("decode")->is_string(), "a string");
  require("group", !field("group") || field("group")->is_string(), "a string");
  require("rerotate", !field("rerotate") || field("rerotate")->is_boolean(), "true or false");
  require("seconds", field("seconds") && field("seconds")->is_number(), "a number");
  require("full_cache", field("full_cache") && field("full_cache")->is_boolean(), "true or false");
  const nlohmann::json* fraction = field("budget_fraction");
  require("budget_fraction", fraction && (fraction->is_null() || fraction->is_number()), "null or a number");
  const nlohmann::json* tokens = field("budget_tokens");
  require("budget_tokens", tokens && (tokens->is_null() || tokens->is_number_integer()), "null or an integer");
  const bool full = m.at("full_cache").get<bool>();
  for (const char* key : {"signal", "scorer", "allocator", "heads"}) {
    const nlohmann::json* v = field(key);
    const bool optional = std::string(key) == "heads" || std::string(key) == "signal" || full;
    const bool ok = v ? (v->is_null() ? optional : v->is_object() && v->contains("id") && v->at("id").is_string())
                      : std::string(key) == "heads";
    require(key, ok, "a plugin record with a string id");
  }
}

double budget_x(const nlohmann::json& m) {
  if (!m.at("budget_fraction").is_null()) return m.at("budget_fraction").get<double>();
  if (!m.at("budget_tokens").is_null()) return static_cast<double>(m.at("budget_tokens").get<int64_t>());
  return 1.0;
}

/// Cell files of every input, deduplicated by id; throws when they belong to different runs. `order` receives the
/// sweep's cell ids as the first readable run.json lists them, `labels` their labels.
std::vector<CellData> collect_cells(const std::vector<std::string>& inputs, std::vector<std::string>* order,
                                    std::map<std::string, std::string>* labels, bool only_listed) {
  std::map<std::string, CellData> by_id;
  std::map<std::string, std::string> groups;  // run.json's plot groups by cell id
  std::string base_sha;
  std::string first_backend, first_backend_file;
  std::string first_model, first_model_file;
  for (const auto& dir : inputs) {
    const fs::path cells = fs::path(dir) / "cells";
    if (order->empty() && fs::exists(fs::path(dir) / "run.json")) {
      try {
        const auto rj = nlohmann::json::parse(read_file((fs::path(dir) / "run.json").string()));
        for (const auto& c : rj.at("cells")) {
          order->push_back(c.at("id").get<std::string>());
          (*labels)[order->back()] = c.value("label", std::string());
          if (c.contains("group")) groups[order->back()] = c.at("group").get<std::string>();
        }
      } catch (const std::exception& e) {
        std::cerr << "warning: " << (fs::path(dir) / "run.json").string() << " is unreadable (" << e.what() << ")\n";
      }
    }
    std::error_code ec;
    if (!fs::is_directory(cells, ec)) {
      if (!fs::is_directory(dir, ec)) throw InputError("merge: '" + dir + "' is not a folder");
      std::cerr << "warning: '" << dir << "' has no cells/ folder (not a ripplekv run output?)\n";
      continue;
    }
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(cells, ec))
      if (e.path().extension() == ".json") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      CellData cd;
      try {
        nlohmann::json j = nlohmann::json::parse(read_file(f.string()));
        for (const auto& e : j.at("examples")) cd.examples.push_back(ExampleOutcomeRecord::from_json(e));
        if (cd.examples.empty()) throw InputError("it holds no examples");
        j.erase("examples");
        cd.meta = std::move(j);
        check_cell_meta(cd.meta);
      } catch (const std::exception& e) {
        std::cerr << "warning: skipping corrupt cell file '" << f.string() << "': " << e.what() << "\n";
        continue;
      }
      // Cells are comparable when they share the non-swept config (a cell's id is a hash of its swept values).
      const std::string base = cd.meta.at("base_sha256").get<std::string>();
      if (base_sha.empty()) base_sha = base;
      if (base != base_sha)
        throw InputError("merge: '" + f.string() + "' comes from a run whose non-swept config differs (base sha256 " +
                         base.substr(0, 12) + " vs " + base_sha.substr(0, 12) + "); such results are not comparable");
      // One report, one backend: cells of cpu and cuda (or of f32 and bf16) are not the same measurement.
      const std::string backend = backend_of(cd.meta);
      if (first_backend.empty()) first_backend = backend, first_backend_file = f.string();
      if (backend != first_backend)
        throw InputError("merge: '" + f.string() + "' was computed on backend " + backend + " but '" +
                         first_backend_file + "' on " + first_backend + "; merge runs of one backend and dtype");
      // One report, one model file: cells of two model files are not comparable either.
      const std::string model = cd.meta.value("model_sha256", std::string());
      if (!model.empty()) {
        if (first_model.empty()) first_model = model, first_model_file = f.string();
        if (model != first_model)
          throw InputError("merge: '" + f.string() + "' was computed with model sha256 " + model.substr(0, 16) +
                           " but '" + first_model_file + "' with " + first_model.substr(0, 16) +
                           "; merge runs of one model file");
      }
      by_id.emplace(cd.meta.at("cell_id").get<std::string>(), std::move(cd));
    }
  }
  std::vector<CellData> out;
  for (const auto& id : *order) {
    auto it = by_id.find(id);
    if (it == by_id.end()) continue;
    // A label names the swept settings that differ across the whole sweep: a cell finished before --resume widened
    // the sweep takes the label and group the current sweep (run.json) gives it.
    if (const auto l = labels->find(id); l != labels->end() && !l->second.empty()) it->second.meta["label"] = l->second;
    if (const auto g = groups.find(id); g != groups.end() && !g->second.empty()) it->second.meta["group"] = g->second;
    out.push_back(std::move(it->second)), by_id.erase(it);
  }
  if (!only_listed)
    for (auto& [id, cd] : by_id) out.push_back(std::move(cd));
  return out;
}

/// Per task, the metric names in a stable order.
std::map<std::string, std::vector<std::string>> metrics_by_task(const std::vector<CellData>& cells) {
  std::map<std::string, std::set<std::string>> seen;
  for (const auto& c : cells)
    for (const auto& e : c.examples)
      for (const auto& [m, v] : e.values) seen[e.task].insert(m);
  std::map<std::string, std::vector<std::string>> out;
  for (auto& [t, s] : seen) out[t] = std::vector<std::string>(s.begin(), s.end());
  return out;
}


Summary summarize(const CellData& c, const std::string& task, const std::string& metric, int resamples) {
  Summary s;
  std::vector<double> full;
  for (const auto& e : c.examples) {
    if (e.task != task) continue;
    auto it = e.values.find(metric);
    if (it == e.values.end() || !std::isfinite(it->second)) continue;
    s.per_example.push_back(it->second);
    if (auto f = e.full_values.find(metric); f != e.full_values.end()) full.push_back(f->second);
  }
  s.n = s.per_example.size();
  if (s.n == 0) return s;
  s.value = mean_of(s.per_example);
  const uint64_t seed = fnv1a64(c.meta.at("cell_id").get<std::string>() + "/" + task + "/" + metric);
  const Interval ci = bootstrap_mean_ci(s.per_example, seed, resamples);
  s.ci_low = ci.low;
  s.ci_high = ci.high;
  s.full = full.empty() ? NAN : mean_of(full);
  return s;
}
}  // namespace rkv
