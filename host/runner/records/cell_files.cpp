// Reading the finished cell files of one or more output folders (runner/records/cell_files.hpp).
#include "runner/records/cell_files.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>

#include "core/atomic_file.hpp"
#include "core/errors.hpp"
#include "core/format.hpp"
#include "plugin/registry.hpp"

namespace fs = std::filesystem;

namespace rkv {

/// "cpu (f32)": the backend and compute dtype a cell file records (cells written before the dtype existed are f32).
std::string backend_of(const nlohmann::json& meta) {
  return meta.at("backend").get<std::string>() + " (" + meta.value("compute_dtype", std::string("f32")) + ")";
}

nlohmann::json weights_of(const nlohmann::json& meta) {
  return meta.contains("weights") ? meta.at("weights") : nlohmann::json(nullptr);
}


std::string short_id(const nlohmann::json& plugin) {
  return plugin.is_null() ? "" : short_id(plugin.at("id").get<std::string>());
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
  for (const char* key : {"model_sha256", "compute_dtype", "weights"}) {
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
  if (m.contains("budget_bytes_fraction") && m.at("budget_bytes_fraction").is_number())
    return m.at("budget_bytes_fraction").get<double>();
  if (!m.at("budget_fraction").is_null()) return m.at("budget_fraction").get<double>();
  if (!m.at("budget_tokens").is_null()) return static_cast<double>(m.at("budget_tokens").get<int64_t>());
  return 1.0;
}

namespace {

/// The sweep a folder's run.json lists: cell ids in order, with their labels and plot groups. Empty (and `readable`
/// false) without a readable run.json.
struct RunListing {
  bool readable = false;
  std::vector<std::string> ids;
  std::map<std::string, std::string> labels, groups;
};

RunListing read_run_listing(const fs::path& dir) {
  RunListing listing;
  if (!fs::exists(dir / "run.json")) return listing;
  try {
    const auto rj = nlohmann::json::parse(read_file((dir / "run.json").string()));
    for (const auto& c : rj.at("cells")) {
      const std::string id = c.at("id").get<std::string>();
      listing.ids.push_back(id);
      listing.labels[id] = c.value("label", std::string());
      if (c.contains("group")) listing.groups[id] = c.at("group").get<std::string>();
    }
    listing.readable = true;
  } catch (const std::exception& e) {
    std::cerr << "warning: " << (dir / "run.json").string() << " is unreadable (" << printable_message(e.what()) << ")\n";
    listing = RunListing{};
  }
  return listing;
}

/// Reads one cell file into `cd`; false (with a warning naming the file and the field) when it is corrupt.
bool read_cell_file(const fs::path& f, CellData* cd) {
  try {
    nlohmann::json j = nlohmann::json::parse(read_file(f.string()));
    for (const auto& e : j.at("examples")) cd->examples.push_back(ExampleOutcomeRecord::from_json(e));
    if (cd->examples.empty()) throw InputError("it holds no examples");
    j.erase("examples");
    cd->meta = std::move(j);
    check_cell_meta(cd->meta);
    return true;
  } catch (const std::exception& e) {
    std::cerr << "warning: skipping corrupt cell file '" << f.string() << "': " << printable_message(e.what()) << "\n";
    return false;
  }
}

/// One report compares like with like: every cell must share the first one's non-swept config, backend and dtype,
/// and model file. Throws rkv::InputError naming both files otherwise.
class ComparableCells {
 public:
  void check(const fs::path& f, const nlohmann::json& m) {
    // Cells are comparable when they share the non-swept config (a cell's id is a hash of its swept values).
    same("base", m.at("base_sha256").get<std::string>(), f, [&](const std::string& a, const std::string& b) {
      return "comes from a run whose non-swept config differs (base sha256 " + a.substr(0, 12) + " vs " +
             b.substr(0, 12) + "); such results are not comparable";
    });
    // One report, one backend: cells of cpu and cuda (or of f32 and bf16) are not the same measurement.
    same("backend", backend_of(m), f, [&](const std::string& a, const std::string& b) {
      return "was computed on backend " + a + " but '" + first_file_.at("backend") + "' on " + b +
             "; merge runs of one backend and dtype";
    });
    // One report, one model file: cells of two model files are not comparable either.
    const std::string model = m.value("model_sha256", std::string());
    if (!model.empty())
      same("model", model, f, [&](const std::string& a, const std::string& b) {
        return "was computed with model sha256 " + a.substr(0, 16) + " but '" + first_file_.at("model") + "' with " +
               b.substr(0, 16) + "; merge runs of one model file";
      });
  }

 private:
  template <typename Message>
  void same(const std::string& what, const std::string& value, const fs::path& f, Message message) {
    const auto [it, first] = first_.emplace(what, value);
    if (first) first_file_[what] = f.string();
    else if (it->second != value) throw InputError("merge: '" + f.string() + "' " + message(value, it->second));
  }
  std::map<std::string, std::string> first_, first_file_;
};

}  // namespace

std::vector<CellData> collect_cells(const std::vector<std::string>& inputs, std::vector<std::string>* order,
                                    std::map<std::string, std::string>* labels, bool only_listed, bool warn) {
  std::map<std::string, CellData> by_id;
  std::map<std::string, std::string> groups;  // run.json's plot groups by cell id
  std::set<std::string> ordered;
  ComparableCells comparable;
  for (const auto& dir : inputs) {
    const RunListing listing = read_run_listing(dir);
    for (const auto& id : listing.ids)
      if (ordered.insert(id).second) order->push_back(id), (*labels)[id] = listing.labels.at(id);
    groups.insert(listing.groups.begin(), listing.groups.end());
    const fs::path cells = fs::path(dir) / "cells";
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
    const std::set<std::string> listed(listing.ids.begin(), listing.ids.end());
    size_t unlisted = 0;
    for (const auto& f : files) {
      // A cell file its own folder's sweep no longer lists is left over from an earlier sweep (--resume changed it).
      if (only_listed && listing.readable && !listed.count(f.stem().string())) {
        ++unlisted;
        continue;
      }
      CellData cd;
      if (!read_cell_file(f, &cd)) continue;
      comparable.check(f, cd.meta);
      by_id.emplace(cd.meta.at("cell_id").get<std::string>(), std::move(cd));
    }
    if (unlisted && warn)
      std::cerr << "warning: skipped " << unlisted << " cell file(s) in '" << cells.string()
                << "' that its run.json's sweep does not list (left over from an earlier sweep)\n";
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
  for (auto& [id, cd] : by_id) out.push_back(std::move(cd));  // inputs without a readable run.json
  return drop_repeats_of_other_sweeps(std::move(out), order, warn);
}

std::vector<CellData> drop_repeats_of_other_sweeps(std::vector<CellData> cells, std::vector<std::string>* order,
                                                   bool warn) {
  std::set<std::string> run_ids;
  for (const auto& c : cells) run_ids.insert(c.meta.at("run_id").get<std::string>());
  if (run_ids.size() < 2) return cells;
  std::map<std::string, std::string> run_of_key;  // effective key -> the run id of its first cell
  std::vector<CellData> out;
  size_t dropped = 0;
  for (auto& c : cells) {
    const std::string run = c.meta.at("run_id").get<std::string>();
    const std::string key = c.meta.value("effective_key", std::string());
    if (!key.empty()) {
      const auto [it, first] = run_of_key.emplace(key, run);
      if (!first && it->second != run) {
        ++dropped;
        const std::string id = c.meta.at("cell_id").get<std::string>();
        order->erase(std::remove(order->begin(), order->end(), id), order->end());  // dropped, not missing
        continue;
      }
    }
    out.push_back(std::move(c));
  }
  if (warn) {
    std::cerr << "warning: merge: the inputs hold cells of " << run_ids.size()
              << " different sweeps (run ids differ); labels follow each cell's own sweep";
    if (dropped) std::cerr << "; " << dropped << " cell(s) that repeat a computation of another sweep were left out";
    std::cerr << "\n";
  }
  return out;
}

}  // namespace rkv
