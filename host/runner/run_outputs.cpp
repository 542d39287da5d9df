// Assembling a run's outputs from its cell files: results.jsonl, examples.jsonl, budgets.json, report.md and plots.
// Used at the end of `ripplekv run` and by `ripplekv merge` (shards of one sweep).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "core/atomic_file.hpp"
#include "core/errors.hpp"
#include "core/subprocess.hpp"
#include "eval/stats.hpp"
#include "runner/run.hpp"
#include "runner/run_records.hpp"

namespace fs = std::filesystem;

namespace rkv {

namespace {

/// "cpu (f32)": the backend and compute dtype a cell file records (cells written before the dtype existed are f32).
std::string backend_of(const nlohmann::json& meta) {
  return meta.at("backend").get<std::string>() + " (" + meta.value("compute_dtype", std::string("f32")) + ")";
}


struct CellData {
  nlohmann::json meta;  // the cell file without "examples"
  std::vector<ExampleOutcomeRecord> examples;
};

std::string fmt(double v, int prec = 4) {
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
    if (it != by_id.end()) out.push_back(std::move(it->second)), by_id.erase(it);
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

struct Summary {
  double value = NAN, ci_low = NAN, ci_high = NAN, full = NAN;
  size_t n = 0;
  std::vector<double> per_example;
};

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

/// Writes `script` to dir/plots.gp and runs gnuplot on it in `dir` (fork + exec with an argument vector: no shell
/// ever sees the folder's name). A failure is a note in the report, never an error.
void run_gnuplot(const fs::path& dir, const std::string& script, std::vector<std::string>& notes) {
  write_file_atomically((dir / "plots.gp").string(), script);
  if (run_program({"gnuplot", "plots.gp"}, dir.string(), "gnuplot.log") != 0)
    notes.push_back("plots were not drawn: gnuplot failed or is missing (see " + (dir / "gnuplot.log").string() + ")");
}

/// A label inside a gnuplot single-quoted string.
std::string gq(const std::string& s) { return gnuplot_single_quoted(s); }

}  // namespace

void merge_outputs(const std::vector<std::string>& inputs, const std::string& out_dir, bool quiet, bool force) {
  check_output_folder_is_ours(out_dir, force, "merge");
  // A folder that holds a run of its own (run.json or cells/) keeps its report unless it is one of the inputs: merging
  // other runs into it would leave its run.json and cells/ beside a report of something else.
  std::error_code ec;
  const fs::path out(out_dir);
  const bool holds_run = fs::exists(out / "run.json", ec) || fs::is_directory(out / "cells", ec);
  const bool is_input = std::any_of(inputs.begin(), inputs.end(), [&](const std::string& in) {
    std::error_code e;
    return fs::exists(in, e) && fs::exists(out, e) && fs::equivalent(fs::path(in), out, e);
  });
  if (holds_run && !is_input && !force)
    throw InputError("merge: output folder '" + out_dir + "' holds a run of its own (run.json or cells/) that is not "
                     "among the inputs; merging into it would overwrite its report. Merge into a new folder, list it "
                     "among the inputs, or pass --force");
  const OutputFolderLock lock(out_dir);
  nlohmann::json j;
  j["inputs"] = inputs;
  write_file_atomically((fs::path(out_dir) / "merge.json").string(), j.dump(2) + "\n");
  assemble_outputs(inputs, out_dir, quiet);
}

void assemble_outputs(const std::vector<std::string>& inputs, const std::string& out_dir, bool quiet) {
  std::vector<std::string> order;
  // Assembling a run's own folder keeps only the cells of its current sweep (a resumed run may have changed it).
  const bool own_folder = inputs.size() == 1 && fs::exists(fs::path(out_dir)) && fs::exists(fs::path(inputs[0])) &&
                          fs::equivalent(fs::path(inputs[0]), fs::path(out_dir));
  std::map<std::string, std::string> labels;
  // (`order` is read from run.json inside collect_cells; without one nothing is listed and the fallback keeps all.)
  std::vector<CellData> cells = collect_cells(inputs, &order, &labels, own_folder);
  if (own_folder && cells.empty()) cells = collect_cells(inputs, &order, &labels, false);
  if (cells.empty()) throw InputError("merge: no finished cells found in the given folders");
  // Cells the sweep lists (run.json) that no input holds: an incomplete shard set or an unfinished run. Said on
  // stderr (merge) and in the report, never silently.
  std::string missing_note;
  {
    std::set<std::string> have;
    for (const auto& c : cells) have.insert(c.meta.at("cell_id").get<std::string>());
    std::vector<std::string> missing;
    for (const auto& id : order)
      if (!have.count(id)) missing.push_back(id);
    if (!missing.empty()) {
      std::string list;
      for (size_t i = 0; i < missing.size() && i < 20; ++i)
        list += (i ? ", " : "") + missing[i] + (labels[missing[i]].empty() ? "" : " (" + labels[missing[i]] + ")");
      if (missing.size() > 20) list += ", and " + std::to_string(missing.size() - 20) + " more";
      missing_note = "incomplete: " + std::to_string(missing.size()) + " of " + std::to_string(order.size()) +
                     " cells of the sweep are missing (other shards or unfinished cells): " + list;
      if (!own_folder) std::cerr << "warning: merge: " << missing_note << "\n";
    }
  }
  {
    std::error_code ec;
    fs::create_directories(fs::path(out_dir) / "plots", ec);
    if (ec) throw InputError("merge: output folder '" + out_dir + "' cannot be created: " + ec.message());
  }
  int resamples = 2000;
  if (cells[0].meta.contains("bootstrap_resamples")) {  // a hand-edited cell file may hold anything here
    const nlohmann::json& r = cells[0].meta.at("bootstrap_resamples");
    if (r.is_number_integer() && r.get<int64_t>() >= 100 && r.get<int64_t>() <= 1000000)
      resamples = static_cast<int>(r.get<int64_t>());
    else
      std::cerr << "warning: cell '" << cells[0].meta.at("cell_id").get<std::string>()
                << "': bootstrap_resamples is not an integer in [100, 1000000]; using 2000\n";
  }

  // Profiles: copy from the inputs when merging elsewhere.
  for (const auto& dir : inputs) {
    if (fs::equivalent(fs::path(dir), fs::path(out_dir))) continue;
    std::error_code ec;
    if (fs::exists(fs::path(dir) / "profile.json") && !fs::exists(fs::path(out_dir) / "profile.json"))
      write_file_atomically((fs::path(out_dir) / "profile.json").string(),
                            read_file((fs::path(dir) / "profile.json").string()));
    if (fs::is_directory(fs::path(dir) / "profiles", ec))
      for (const auto& e : fs::directory_iterator(fs::path(dir) / "profiles", ec))
        write_file_atomically((fs::path(out_dir) / "profiles" / e.path().filename()).string(), read_file(e.path().string()));
  }

  const auto metrics = metrics_by_task(cells);
  std::ostringstream results, examples;
  nlohmann::json budgets = nlohmann::json::object();
  for (const auto& c : cells) {
    const auto& m = c.meta;
    const std::string cid = m.at("cell_id").get<std::string>();
    // Per-task aggregates over the cell's examples of that task (a row of task t averages only t's examples).
    struct TaskTotals {
      std::set<std::string> warnings;
      double kv = 0, kv_full = 0, kv_end = 0, comp = 0, tps = 0, B = 0;
      size_t n = 0, n_tps = 0;
    };
    std::map<std::string, TaskTotals> totals;
    for (const auto& e : c.examples) {
      TaskTotals& t = totals[e.task];
      for (const auto& w : e.warnings) t.warnings.insert(w);
      t.kv += static_cast<double>(e.kv_bytes);
      t.kv_full += static_cast<double>(e.kv_bytes_full);
      t.kv_end += static_cast<double>(e.kv_bytes_end);
      t.comp += e.compress_seconds;
      t.B += static_cast<double>(e.budget_total);
      ++t.n;
      if (e.decode_tokens_per_second > 0) t.tps += e.decode_tokens_per_second, ++t.n_tps;
      nlohmann::json ej;
      ej["run_id"] = m.at("run_id");
      ej["cell_id"] = cid;
      ej["label"] = m.at("label");
      ej["cell"] = m.at("cell");
      ej["task"] = e.task;
      ej["example"] = e.example;
      ej["values"] = e.values;
      ej["full_values"] = e.full_values;
      ej["T"] = e.prefix_tokens;
      ej["budget_total"] = e.budget_total;
      ej["kv_bytes"] = e.kv_bytes;
      ej["kv_bytes_end"] = e.kv_bytes_end;
      examples << ej.dump() << "\n";
      budgets[cid]["label"] = m.at("label");
      nlohmann::json bj = {{"task", e.task}, {"example", e.example}, {"T", e.prefix_tokens}, {"B", e.budget_total},
                           {"budgets", e.budgets}};
      if (!e.head_budgets.empty()) bj["head_budgets"] = e.head_budgets;  // b[l, h] with a per-head allocator
      budgets[cid]["examples"].push_back(bj);
    }
    for (const auto& [task, names] : metrics) {
      const auto tt = totals.find(task);
      if (tt == totals.end()) continue;
      const TaskTotals& t = tt->second;
      const double ne = std::max<double>(1.0, static_cast<double>(t.n));
      for (const auto& metric : names) {
        const Summary s = summarize(c, task, metric, resamples);
        if (s.n == 0) continue;
        nlohmann::json r;
        r["run_id"] = m.at("run_id");
        r["cell"] = m.at("cell");
        r["cell_id"] = cid;
        r["label"] = m.at("label");
        r["signal"] = m.at("signal");
        r["scorer"] = m.at("scorer");
        r["allocator"] = m.at("allocator");
        r["heads"] = m.contains("heads") ? m.at("heads") : nlohmann::json(nullptr);
        r["decode"] = decode_of(m);
        r["rerotate"] = m.contains("rerotate") ? m.at("rerotate") : nlohmann::json(false);
        r["budget_fraction"] = m.at("budget_fraction");
        r["budget_tokens"] = m.at("budget_tokens");
        r["budget_total"] = t.B / ne;
        r["task"] = task;
        r["metric"] = metric;
        r["value"] = num(s.value);
        r["ci_low"] = num(s.ci_low);
        r["ci_high"] = num(s.ci_high);
        r["full_cache_value"] = num(s.full);
        r["n"] = s.n;
        r["warnings"] = std::vector<std::string>(t.warnings.begin(), t.warnings.end());
        r["kv_bytes"] = t.kv / ne;
        r["kv_bytes_full"] = t.kv_full / ne;
        r["kv_bytes_end"] = t.kv_end / ne;
        r["compress_seconds"] = t.comp / ne;
        r["decode_tokens_per_second"] =
            t.n_tps ? nlohmann::json(t.tps / static_cast<double>(t.n_tps)) : nlohmann::json(nullptr);
        r["seconds"] = m.at("seconds");
        r["config_sha256"] = m.at("config_sha256");
        r["model_sha256"] = m.value("model_sha256", "");
        r["backend"] = m.at("backend");
        r["compute_dtype"] = m.value("compute_dtype", "f32");
        results << r.dump() << "\n";
      }
    }
  }
  const fs::path out(out_dir);
  write_file_atomically((out / "results.jsonl").string(), results.str());
  write_file_atomically((out / "examples.jsonl").string(), examples.str());
  write_file_atomically((out / "budgets.json").string(), budgets.dump(1) + "\n");

  // ---- report.md and plots --------------------------------------------------------------------------------------
  std::vector<std::string> notes;
  std::ostringstream md;
  md << "# ripplekv report\n\n";
  std::set<std::string> model_hashes;  // every model hash the cells record (one, as mixing is refused)
  for (const auto& c : cells) model_hashes.insert(c.meta.value("model_sha256", std::string("unknown")));
  std::string models;
  for (const auto& h : model_hashes) models += (models.empty() ? "`" : ", `") + h.substr(0, 16) + "`";
  md << "- run id: `" << cells[0].meta.at("run_id").get<std::string>() << "`, config sha256 `"
     << cells[0].meta.at("config_sha256").get<std::string>().substr(0, 16) << "`, model sha256 " << models
     << ", backend " << backend_of(cells[0].meta)
     << "\n- cells: " << cells.size() << "; values are means over examples with 95% percentile-bootstrap CIs ("
     << resamples << " resamples, seeded by cell)\n\n";
  if (!missing_note.empty()) md << "> warning: " << missing_note << "\n\n";

  std::ostringstream gp;
  gp << "set terminal pngcairo size 900,560 noenhanced\nset key outside right\nset grid\n";
  const fs::path plots = out / "plots";

  // Sensitivity profile.
  const fs::path profile_path = out / "profile.json";
  if (fs::exists(profile_path)) {
    try {
      const auto p = nlohmann::json::parse(read_file(profile_path.string()));
      md << "## Sensitivity profile (" << p.at("signal").get<std::string>() << ")\n\n";
      md << "split-half Spearman rho: "
         << (p.at("split_half_spearman").is_null() ? std::string("n/a") : fmt(p.at("split_half_spearman").get<double>(), 3))
         << "; " << p.at("per_example").size() << " calibration examples; computed in "
         << fmt(p.value("seconds", 0.0), 3) << " s\n\n| layer | s | 95% CI |\n|---:|---:|---|\n";
      std::ostringstream dat;
      for (size_t l = 0; l < p.at("s").size(); ++l) {
        const double s = p.at("s")[l].get<double>();
        const double lo = p.at("ci_low")[l].is_null() ? s : p.at("ci_low")[l].get<double>();
        const double hi = p.at("ci_high")[l].is_null() ? s : p.at("ci_high")[l].get<double>();
        md << "| " << l << " | " << fmt(s) << " | [" << fmt(lo) << ", " << fmt(hi) << "] |\n";
        dat << l << " " << s << " " << lo << " " << hi << "\n";
      }
      md << "\n![profile](plots/profile.png)\n\n";
      write_file_atomically((plots / "profile.dat").string(), dat.str());
      for (const char* term : {"png", "svg"}) {
        gp << (std::string(term) == "png" ? "set terminal pngcairo size 900,560 noenhanced\n"
                                          : "set terminal svg size 900,560 noenhanced\n")
           << "set output 'profile." << term << "'\nset title 'sensitivity profile (" << gq(p.at("signal").get<std::string>())
           << ") with 95% CI'\nset xlabel 'layer'\nset ylabel 's'\n"
           << "plot 'profile.dat' using 1:2:3:4 with yerrorlines title 's'\n";
      }
    } catch (const std::exception& e) {
      notes.push_back("profile.json could not be read: " + std::string(e.what()));
    }
  }

  for (const auto& [task, names] : metrics) {
    md << "## Task " << task << "\n\n| cell |";
    for (const auto& metric : names) md << " " << metric << " |";
    // Beside every cell, the full cache's value of the task's first metric on the same examples (needle, longbench);
    // lm_fidelity compares against the full cache by construction (kl, top1_agreement, ppl_full).
    const bool full_column = task != "lm_fidelity";
    if (full_column) md << " full cache (" << names.front() << ") |";
    md << " KV kept | KV at end |\n|---|";
    for (size_t i = 0; i < names.size(); ++i) md << "---|";
    md << (full_column ? "---|" : "") << "---:|---:|\n";
    // Plot data: per group, x = budget, y = value with CI.
    std::map<std::string, std::map<std::string, std::vector<std::array<double, 4>>>> series;  // metric -> group -> pts
    std::map<std::string, double> full_line;
    for (const auto& c : cells) {
      bool has = false;
      for (const auto& e : c.examples) has |= e.task == task;
      if (!has) continue;
      md << "| " << c.meta.at("label").get<std::string>() << " |";
      double full_first = NAN;
      for (const auto& metric : names) {
        const Summary s = summarize(c, task, metric, resamples);
        md << " " << fmt(s.value) << " [" << fmt(s.ci_low) << ", " << fmt(s.ci_high) << "] |";
        if (std::isnan(full_first)) full_first = s.full;
        if (c.meta.at("full_cache").get<bool>()) full_line[metric] = s.value;
        else series[metric][group_of(c.meta)].push_back({budget_x(c.meta), s.value, s.ci_low, s.ci_high});
      }
      // Bytes held after compression and after the task's decoding, as % of the full prompt cache (the decode
      // policy decides the second: "none" grows by one entry per token, rolling and h2o stay at the first).
      double kv = 0, kvf = 0, kve = 0;
      for (const auto& e : c.examples)
        if (e.task == task)
          kv += static_cast<double>(e.kv_bytes), kvf += static_cast<double>(e.kv_bytes_full),
              kve += static_cast<double>(e.kv_bytes_end);
      if (full_column) md << " " << fmt(full_first) << " |";
      md << " " << fmt(kvf > 0 ? 100.0 * kv / kvf : NAN, 3) << "% | " << fmt(kvf > 0 ? 100.0 * kve / kvf : NAN, 3)
         << "% |\n";
    }
    md << "\n";

    // Paired comparisons against uniform (same count in every layer and head) at the same budget and scorer.
    std::ostringstream pc;
    const auto is_uniform = [](const nlohmann::json& m) {
      return short_id(m.at("allocator")) == "uniform" && (!m.contains("heads") || m.at("heads").is_null());
    };
    for (const auto& c : cells) {
      const auto& m = c.meta;
      if (m.at("full_cache").get<bool>() || is_uniform(m)) continue;
      const CellData* base = nullptr;
      for (const auto& u : cells)
        if (!u.meta.at("full_cache").get<bool>() && is_uniform(u.meta) &&
            u.meta.at("scorer") == m.at("scorer") && u.meta.at("budget_fraction") == m.at("budget_fraction") &&
            u.meta.at("budget_tokens") == m.at("budget_tokens") && decode_of(u.meta) == decode_of(m))
          base = &u;
      if (!base) continue;
      for (const auto& metric : names) {
        if (metric.size() > 5 && metric.compare(metric.size() - 5, 5, "_full") == 0) continue;  // the reference itself
        std::vector<double> a, b;
        for (const auto& e : c.examples) {
          if (e.task != task || !e.values.count(metric)) continue;
          for (const auto& f : base->examples)
            if (f.task == task && f.example == e.example && f.values.count(metric)) {
              a.push_back(e.values.at(metric));
              b.push_back(f.values.at(metric));
            }
        }
        if (a.empty()) continue;
        const PairedComparison p =
            paired_bootstrap(a, b, fnv1a64(m.at("cell_id").get<std::string>() + "/vs-uniform/" + metric), resamples);
        pc << "| " << m.at("label").get<std::string>() << " | " << metric << " | " << fmt(p.mean_difference) << " | ["
           << fmt(p.ci.low) << ", " << fmt(p.ci.high) << "] | " << fmt(p.p_value, 3) << " | " << fmt(p.effect_size, 3)
           << " | " << p.n << " |\n";
      }
    }
    if (!pc.str().empty()) {
      md << "### Paired comparison against uniform (same scorer and budget)\n\n"
         << "Difference = cell - uniform per example; 95% bootstrap CI; two-sided bootstrap p-value; effect size d_z "
            "= mean / sd of the differences. With fewer than 10 examples the bootstrap p-value is a rough guide only."
            "\n\n| cell | metric | mean difference | 95% CI | p | d_z | n |\n"
            "|---|---|---:|---|---:|---:|---:|\n"
         << pc.str() << "\n";
    }

    // Metric-vs-budget plots with CI bands.
    for (const auto& [metric, groups] : series) {
      const std::string base = task + "_" + metric;
      std::ostringstream plot_cmd;
      int k = 0;
      for (const auto& [group, pts_in] : groups) {
        auto pts = pts_in;
        std::sort(pts.begin(), pts.end());
        std::ostringstream dat;
        for (const auto& p : pts) dat << p[0] << " " << p[1] << " " << p[2] << " " << p[3] << "\n";
        const std::string file = base + "_" + std::to_string(k) + ".dat";
        write_file_atomically((plots / file).string(), dat.str());
        plot_cmd << (k ? ", " : "") << "'" << gq(file) << "' using 1:3:4 with filledcurves fs transparent solid 0.15 lc "
                 << (k + 1) << " notitle, '" << gq(file) << "' using 1:2 with linespoints lc " << (k + 1) << " title '"
                 << gq(group) << "'";
        ++k;
      }
      if (full_line.count(metric)) plot_cmd << ", " << full_line[metric] << " with lines dt 2 lc rgb 'black' title 'full cache'";
      for (const char* term : {"png", "svg"}) {
        gp << (std::string(term) == "png" ? "set terminal pngcairo size 900,560 noenhanced\n"
                                          : "set terminal svg size 900,560 noenhanced\n")
           << "set output '" << gq(base) << "." << term << "'\nset title '" << gq(task) << ": " << gq(metric)
           << " vs budget (95% CI bands)'\nset xlabel 'budget'\nset ylabel '" << gq(metric) << "'\nplot " << plot_cmd.str()
           << "\n";
      }
      md << "![" << base << "](plots/" << base << ".png)\n\n";
    }

    // Budgets per layer (mean over this task's examples) for every compressed cell.
    std::ostringstream bplot;
    int k = 0;
    for (const auto& c : cells) {
      if (c.meta.at("full_cache").get<bool>()) continue;
      std::vector<double> mean_b;
      size_t n = 0;
      for (const auto& e : c.examples) {
        if (e.task != task) continue;
        if (mean_b.empty()) mean_b.assign(e.budgets.size(), 0.0);
        for (size_t l = 0; l < e.budgets.size() && l < mean_b.size(); ++l) mean_b[l] += static_cast<double>(e.budgets[l]);
        ++n;
      }
      if (!n) continue;
      std::ostringstream dat;
      for (size_t l = 0; l < mean_b.size(); ++l) dat << l << " " << mean_b[l] / static_cast<double>(n) << "\n";
      const std::string file = "budgets_" + task + "_" + std::to_string(k) + ".dat";
      write_file_atomically((plots / file).string(), dat.str());
      bplot << (k ? ", " : "") << "'" << gq(file) << "' using 1:2 with lines title '" << c.meta.at("label").get<std::string>()
            << "'";
      ++k;
    }
    if (k) {
      for (const char* term : {"png", "svg"}) {
        gp << (std::string(term) == "png" ? "set terminal pngcairo size 1100,620 noenhanced\n"
                                          : "set terminal svg size 1100,620 noenhanced\n")
           << "set output 'budgets_" << gq(task) << "." << term << "'\nset title '" << gq(task)
           << ": budget per layer (mean over examples)'\nset xlabel 'layer'\nset ylabel 'positions kept b_l'\nplot "
           << bplot.str() << "\n";
      }
      md << "![budgets](plots/budgets_" << task << ".png)\n\n";
    }
  }
  run_gnuplot(plots, gp.str(), notes);
  for (const auto& n : notes) md << "> note: " << n << "\n";
  write_file_atomically((out / "report.md").string(), md.str());
  if (!quiet) std::cerr << "wrote " << (out / "report.md").string() << " (" << cells.size() << " cells)\n";
}

}  // namespace rkv
