// Assembling a run's outputs from its cell files (runner/report/outputs.hpp).
#include "runner/report/outputs.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "core/atomic_file.hpp"
#include "core/errors.hpp"
#include "core/format.hpp"
#include "runner/records/cell_files.hpp"
#include "runner/records/cell_records.hpp"
#include "runner/records/output_folder.hpp"
#include "runner/report/report.hpp"
#include "runner/report/summary.hpp"

namespace fs = std::filesystem;

namespace rkv {

namespace {

/// The finished cells of `inputs` and the cell ids (`order`) and labels their sweeps list. Assembling a run's own
/// folder keeps only the cells of its current sweep; when that leaves none (no run.json), every cell file.
std::vector<CellData> collect_inputs(const std::vector<std::string>& inputs, bool own_folder,
                                     std::vector<std::string>* order, std::map<std::string, std::string>* labels) {
  std::vector<CellData> cells = collect_cells(inputs, order, labels, true, !own_folder);
  if (own_folder && cells.empty()) {
    order->clear(), labels->clear();
    cells = collect_cells(inputs, order, labels, false, false);
  }
  if (cells.empty()) throw InputError("merge: no finished cells found in the given folders");
  return cells;
}

/// Cells the sweep lists (run.json) that no input holds: an incomplete shard set or an unfinished run. "" when none;
/// said on stderr too unless `own_folder` (the report says it either way).
std::string missing_cells_note(const std::vector<CellData>& cells, const std::vector<std::string>& order,
                               std::map<std::string, std::string>& labels, bool own_folder) {
  std::set<std::string> have;
  for (const auto& c : cells) have.insert(c.meta.at("cell_id").get<std::string>());
  std::vector<std::string> missing;
  for (const auto& id : order)
    if (!have.count(id)) missing.push_back(id);
  if (missing.empty()) return "";
  std::string list;
  for (size_t i = 0; i < missing.size() && i < 20; ++i)
    list += (i ? ", " : "") + missing[i] + (labels[missing[i]].empty() ? "" : " (" + labels[missing[i]] + ")");
  if (missing.size() > 20) list += ", and " + std::to_string(missing.size() - 20) + " more";
  const std::string note = "incomplete: " + std::to_string(missing.size()) + " of " + std::to_string(order.size()) +
                           " cells of the sweep are missing (other shards or unfinished cells): " + list;
  if (!own_folder) std::cerr << "warning: merge: " << note << "\n";
  return note;
}


/// True when `path` names the folder `out` (the same device and inode; following links, as the user named it).
bool is_folder(const std::string& path, const Folder& out) {
  struct stat a {}, b {};
  return ::stat(path.c_str(), &a) == 0 && ::fstat(out.fd(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/// profile.json and profiles/*.json of every input that is not `out` itself, when out has none. The inputs are read
/// as the regular files they must be (a FIFO or device there is rkv::InputError naming it).
void copy_profiles(const std::vector<std::string>& inputs, const Folder& out) {
  for (const auto& dir : inputs) {
    if (is_folder(dir, out)) continue;
    std::error_code ec;
    if (fs::exists(fs::path(dir) / "profile.json") && out.kind("profile.json") == Folder::Kind::missing)
      out.write_atomically("profile.json", read_file((fs::path(dir) / "profile.json").string()));
    if (fs::is_directory(fs::path(dir) / "profiles", ec))
      for (const auto& e : fs::directory_iterator(fs::path(dir) / "profiles", ec))
        if (e.path().extension() == ".json")
          out.write_atomically("profiles/" + e.path().filename().string(), read_file(e.path().string()));
  }
}

/// A cell's aggregates over its examples of one task (a results.jsonl row of task t averages only t's examples).
struct TaskTotals {
  std::set<std::string> warnings;
  double kv = 0, kv_full = 0, kv_end = 0, comp = 0, tps = 0, B = 0;
  size_t n = 0, n_tps = 0;
  void add(const ExampleOutcomeRecord& e) {
    for (const auto& w : e.warnings) warnings.insert(w);
    kv += static_cast<double>(e.kv_bytes);
    kv_full += static_cast<double>(e.kv_bytes_full);
    kv_end += static_cast<double>(e.kv_bytes_end);
    comp += e.compress_seconds;
    B += static_cast<double>(e.budget_total);
    ++n;
    if (e.decode_tokens_per_second > 0) tps += e.decode_tokens_per_second, ++n_tps;
  }
};

/// One examples.jsonl line.
nlohmann::json example_line(const nlohmann::json& m, const ExampleOutcomeRecord& e) {
  nlohmann::json ej;
  ej["run_id"] = m.at("run_id");
  ej["cell_id"] = m.at("cell_id");
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
  if (!e.input.source.empty()) ej["input"] = e.input.to_json();
  return ej;
}

/// One example's entry of budgets.json.
nlohmann::json budgets_entry(const ExampleOutcomeRecord& e) {
  nlohmann::json bj = {{"task", e.task}, {"example", e.example}, {"T", e.prefix_tokens}, {"B", e.budget_total},
                       {"budgets", e.budgets}};
  if (!e.head_budgets.empty()) bj["head_budgets"] = e.head_budgets;  // b[l, h] with a per-head allocator
  if (!e.layer_bits.empty()) bj["layer_bits"] = e.layer_bits;  // the codec's bits per layer (layer_bits = profile)
  if (!e.prompt_profile.empty()) bj["prompt_profile"] = e.prompt_profile;  // a per-prompt signal's s_l
  if (!e.token_class_entries.empty()) bj["token_class_entries"] = e.token_class_entries;  // per-token bits
  if (!e.share_sources.empty()) bj["share_sources"] = e.share_sources;  // [compression.share]: layer each reads
  if (!e.joint_plan.empty()) bj["joint_plan"] = e.joint_plan;  // [compression.joint]: each layer's option
  return bj;
}

/// One results.jsonl line: cell `m`'s `metric` of `task` summarised in `s`, with the task's totals `t`.
nlohmann::json result_line(const nlohmann::json& m, const std::string& task, const std::string& metric,
                           const Summary& s, const TaskTotals& t) {
  const double ne = std::max<double>(1.0, static_cast<double>(t.n));
  nlohmann::json r;
  r["run_id"] = m.at("run_id");
  r["cell"] = m.at("cell");
  r["cell_id"] = m.at("cell_id");
  r["label"] = m.at("label");
  r["signal"] = m.at("signal");
  r["scorer"] = m.at("scorer");
  r["route"] = m.contains("route") ? m.at("route") : nlohmann::json(nullptr);  // [[scorer.route]]; null: none
  r["allocator"] = m.at("allocator");
  r["heads"] = m.contains("heads") ? m.at("heads") : nlohmann::json(nullptr);
  r["decode"] = decode_of(m);
  r["rerotate"] = m.contains("rerotate") ? m.at("rerotate") : nlohmann::json(false);
  r["prefill"] = m.value("prefill", nlohmann::json());  // {chunk_tokens, compress_between_chunks}; null: older cells
  r["budget_fraction"] = m.at("budget_fraction");
  r["budget_tokens"] = m.at("budget_tokens");
  r["budget_bytes_fraction"] = m.value("budget_bytes_fraction", nlohmann::json());  // null: not a byte budget
  r["codec"] = m.value("codec", nlohmann::json());  // null in cells without a codec record
  r["share"] = m.value("share", nlohmann::json());  // [compression.share] label; null: no sharing
  r["joint"] = m.value("joint", nlohmann::json());  // [compression.joint] plan and grid; null: not a joint cell
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
  r["decode_tokens_per_second"] = t.n_tps ? nlohmann::json(t.tps / static_cast<double>(t.n_tps)) : nlohmann::json(nullptr);
  r["seconds"] = m.at("seconds");
  r["config_sha256"] = m.at("config_sha256");
  r["model_sha256"] = m.value("model_sha256", "");
  r["backend"] = m.at("backend");
  r["compute_dtype"] = m.value("compute_dtype", "f32");
  r["weights"] = weights_of(m);
  return r;
}

/// results.jsonl, examples.jsonl and budgets.json of `cells` in `out`.
void write_records(const std::vector<CellData>& cells, int resamples, const Folder& out) {
  const auto metrics = metrics_by_task(cells);
  std::ostringstream results, examples;
  nlohmann::json budgets = nlohmann::json::object();
  for (const auto& c : cells) {
    const auto& m = c.meta;
    const std::string cid = m.at("cell_id").get<std::string>();
    std::map<std::string, TaskTotals> totals;
    for (const auto& e : c.examples) {
      totals[e.task].add(e);
      examples << example_line(m, e).dump() << "\n";
      budgets[cid]["label"] = m.at("label");
      budgets[cid]["examples"].push_back(budgets_entry(e));
    }
    for (const auto& [task, names] : metrics) {
      const auto tt = totals.find(task);
      if (tt == totals.end()) continue;
      for (const auto& metric : names) {
        const Summary s = summarize(c, task, metric, resamples);
        if (s.n > 0) results << result_line(m, task, metric, s, tt->second).dump() << "\n";
      }
    }
  }
  out.write_atomically("results.jsonl", results.str());
  out.write_atomically("examples.jsonl", examples.str());
  out.write_atomically("budgets.json", budgets.dump(1) + "\n");
}

}  // namespace

int report_resamples(const std::vector<CellData>& cells) {
  if (!cells[0].meta.contains("bootstrap_resamples")) return 2000;
  const nlohmann::json& r = cells[0].meta.at("bootstrap_resamples");
  if (r.is_number_integer() && r.get<int64_t>() >= 100 && r.get<int64_t>() <= 1000000)
    return static_cast<int>(r.get<int64_t>());
  std::cerr << "warning: cell '" << cells[0].meta.at("cell_id").get<std::string>()
            << "': bootstrap_resamples is not an integer in [100, 1000000]; using 2000\n";
  return 2000;
}

void merge_outputs(const std::vector<std::string>& inputs, const std::string& out_dir, bool quiet, bool force) {
  const Folder out = open_ripplekv_folder(out_dir, force, "merge");
  // A folder that holds a run of its own (run.json or cells/) keeps its report unless it is one of the inputs: merging
  // other runs into it would leave its run.json and cells/ beside a report of something else.
  const bool holds_run = out.kind("run.json") != Folder::Kind::missing || out.kind("cells") != Folder::Kind::missing;
  const bool is_input = std::any_of(inputs.begin(), inputs.end(), [&](const std::string& in) { return is_folder(in, out); });
  if (holds_run && !is_input && !force)
    throw InputError("merge: output folder '" + out_dir + "' holds a run of its own (run.json or cells/) that is not "
                     "among the inputs; merging into it would overwrite its report. Merge into a new folder, list it "
                     "among the inputs, or pass --force");
  const OutputFolderLock lock(out);
  nlohmann::json j;
  j["schema"] = kMergeSchema;
  j["inputs"] = inputs;
  out.write_atomically("merge.json", j.dump(2) + "\n");
  assemble_outputs(inputs, out, quiet);
}

void assemble_outputs(const std::vector<std::string>& inputs, const Folder& out, bool quiet) {
  const bool own_folder = inputs.size() == 1 && is_folder(inputs[0], out);
  std::vector<std::string> order;
  std::map<std::string, std::string> labels;
  const std::vector<CellData> cells = collect_inputs(inputs, own_folder, &order, &labels);
  const std::string missing_note = missing_cells_note(cells, order, labels, own_folder);
  const int resamples = report_resamples(cells);
  copy_profiles(inputs, out);
  write_records(cells, resamples, out);
  write_report(cells, out, resamples, missing_note);
  if (!quiet) std::cerr << "wrote " << out.path_of("report.md") << " (" << cells.size() << " cells)\n";
}

}  // namespace rkv
