// `ripplekv compare RUN...` (runner/report/compare_runs.hpp).
#include "runner/report/compare_runs.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "core/errors.hpp"
#include "core/fnv1a.hpp"
#include "core/format.hpp"
#include "core/atomic_file.hpp"
#include "eval/stats.hpp"
#include "runner/plan/config_overrides.hpp"
#include "runner/records/output_folder.hpp"
#include "runner/report/outputs.hpp"
#include "runner/report/plots.hpp"
#include "runner/report/run_description.hpp"
#include "runner/report/summary.hpp"

namespace fs = std::filesystem;

namespace rkv {

namespace {

/// A cell's examples of `task` that hold `metric`: example index -> (value, input ids hash).
std::map<int64_t, std::pair<double, std::string>> metric_values(const CellData& c, const std::string& task,
                                                                const std::string& metric) {
  std::map<int64_t, std::pair<double, std::string>> out;
  for (const auto& e : c.examples)
    if (e.task == task)
      if (const auto v = e.values.find(metric); v != e.values.end()) out[e.example] = {v->second, e.input.ids_sha256};
  return out;
}

/// The same examples with the same inputs on both sides (every ids hash recorded and equal).
bool same_examples(const std::map<int64_t, std::pair<double, std::string>>& a,
                   const std::map<int64_t, std::pair<double, std::string>>& b) {
  if (a.size() != b.size() || a.empty()) return false;
  for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j)
    if (i->first != j->first || i->second.second.empty() || i->second.second != j->second.second) return false;
  return true;
}

std::string last_component(const std::string& folder) {
  fs::path p(folder);
  if (p.filename().empty()) p = p.parent_path();
  const std::string name = p.filename().string();
  return name.empty() || name == "." || name == ".." ? fs::absolute(p).lexically_normal().filename().string() : name;
}

/// A value with its CI and n as a table shows it: "0.105 [0.07, 0.14] (n 2)"; "-" when the cell lacks the metric.
std::string value_text(const Summary& s) {
  if (s.n == 0) return "-";
  return fmt(s.value) + " [" + fmt(s.ci_low) + ", " + fmt(s.ci_high) + "] (n " + std::to_string(s.n) + ")";
}

std::string difference_text(const RunDifference& d) {
  if (d.n_reference == 0 || d.n_other == 0) return "-";
  std::string out = fmt(d.difference) + " [" + fmt(d.ci_low) + ", " + fmt(d.ci_high) + "] ";
  if (!d.paired) return out + "unpaired";
  out += "paired";
  if (d.all_zero) return out + ", equal on every example";
  if (!std::isnan(d.p)) out += ", p = " + fmt(d.p, 3) + " (Holm " + fmt(d.p_holm, 3) + ")";
  return out;
}

/// The "what each run was" table.
std::string runs_table(const std::vector<ComparedRun>& runs) {
  std::ostringstream md;
  md << "| run | folder | model | backend, weights | tasks | budgets | cells | config differs from the first run's |\n"
     << "|---|---|---|---|---|---|---:|---|\n";
  for (const auto& r : runs) {
    std::set<std::string> models;
    for (const auto& c : r.cells) models.insert(model_line(c.meta));
    std::string model_text, tasks;
    for (const auto& m : models) model_text += (model_text.empty() ? "" : "; ") + m;
    for (const auto& [task, names] : metrics_by_task(r.cells))
      tasks += (tasks.empty() ? "" : "; ") + task + " (" + examples_and_lengths(r.cells, task) + ")";
    md << "| " << markdown_cell(r.name) << " | `" << markdown_cell(r.folder) << "` | " << markdown_cell(model_text)
       << " | " << backend_of(r.cells[0].meta) << ", " << weights_label(r.cells) << " | " << markdown_cell(tasks) << " | "
       << budgets_text(r.cells) << " | " << r.cells.size() << (r.missing.empty() ? "" : " (" + r.missing + ")")
       << " | " << markdown_cell(r.differs) << " |\n";
  }
  return md.str() + "\n";
}

/// Every cell label of the runs, in the order the runs list them (the first run's cells first).
std::vector<std::string> aligned_labels(const std::vector<ComparedRun>& runs) {
  std::vector<std::string> labels;
  std::set<std::string> seen;
  for (const auto& r : runs)
    for (const auto& c : r.cells)
      if (seen.insert(c.meta.at("label").get<std::string>()).second) labels.push_back(c.meta.at("label").get<std::string>());
  return labels;
}

const CellData* cell_labelled(const ComparedRun& r, const std::string& label) {
  for (const auto& c : r.cells)
    if (c.meta.at("label").get<std::string>() == label) return &c;
  return nullptr;
}

/// One cell label's row of a metric's table: each run's summary and each other run's difference from the first.
struct MetricRow {
  std::string label;
  std::vector<Summary> values;       ///< per run (n = 0 where the run lacks the cell or metric)
  std::vector<RunDifference> diffs;  ///< per run after the first
};

/// The rows of `task`'s `metric`, one per label some run holds it for. A reference-only metric (the full cache's own
/// value, the same in every cell: "ppl_full") shows on the full cache's row only.
std::vector<MetricRow> metric_rows(const std::vector<ComparedRun>& runs, const std::vector<std::string>& labels,
                                   const std::string& task, const std::string& metric, int resamples) {
  const bool reference_only = is_reference_metric(metric);
  std::vector<MetricRow> table;
  for (const auto& label : labels) {
    MetricRow row{label, {}, {}};
    bool any = false;
    for (const auto& r : runs) {
      const CellData* c = cell_labelled(r, label);
      const bool shown = c && (!reference_only || c->meta.at("full_cache").get<bool>());
      row.values.push_back(shown ? summarize(*c, task, metric, resamples) : Summary{});
      any = any || row.values.back().n > 0;
    }
    if (!any) continue;
    const CellData* ref = cell_labelled(runs[0], label);
    for (size_t k = 1; k < runs.size(); ++k) {
      const CellData* other = cell_labelled(runs[k], label);
      RunDifference d;
      if (ref && other && row.values[0].n > 0 && row.values[k].n > 0)
        d = run_difference(*ref, *other, task, metric,
                           fnv1a64(ref->meta.at("cell_id").get<std::string>() + "\n" +
                                   other->meta.at("cell_id").get<std::string>() + "\n" + task + "\n" + metric),
                           resamples);
      row.diffs.push_back(d);
    }
    table.push_back(std::move(row));
  }
  return table;
}

/// Holm's adjustment across the differences of one table that print a p (sets their p_holm); returns their count.
size_t adjust_holm(std::vector<MetricRow>& table) {
  std::vector<PairedComparison> stats;
  std::vector<RunDifference*> diffs;
  for (auto& row : table)
    for (auto& d : row.diffs) {
      PairedComparison p;
      p.n = std::isnan(d.p) ? 0 : std::min(d.n_reference, d.n_other);  // n = 0: not in the family
      p.p_value = std::isnan(d.p) ? 1.0 : d.p;
      stats.push_back(p);
      diffs.push_back(&d);
    }
  std::vector<const PairedComparison*> family;
  for (const auto& p : stats) family.push_back(&p);
  const std::vector<double> adjusted = holm_adjust_reportable(family);
  size_t printed = 0;
  for (size_t i = 0; i < diffs.size(); ++i) {
    diffs[i]->p_holm = std::isnan(diffs[i]->p) ? NAN : adjusted[i];
    printed += !std::isnan(diffs[i]->p);
  }
  return printed;
}

/// comparison.jsonl's rows of one table: per run holding the cell, its value, and (other runs) its difference.
void append_json_rows(const std::vector<ComparedRun>& runs, const std::vector<MetricRow>& table,
                      const std::string& task, const std::string& metric, nlohmann::json* rows) {
  for (const auto& row : table)
    for (size_t k = 0; k < runs.size(); ++k) {
      const Summary& v = row.values[k];
      if (v.n == 0) continue;
      nlohmann::json j = {{"run", runs[k].name}, {"folder", runs[k].folder}, {"cell", row.label}, {"task", task},
                          {"metric", metric}, {"value", v.value}, {"ci_low", v.ci_low}, {"ci_high", v.ci_high},
                          {"n", v.n}};
      if (k > 0 && row.diffs[k - 1].n_reference > 0 && row.diffs[k - 1].n_other > 0) {
        const RunDifference& d = row.diffs[k - 1];
        j["reference_run"] = runs[0].name;
        j["difference"] = {{"value", d.difference}, {"ci_low", d.ci_low}, {"ci_high", d.ci_high}, {"paired", d.paired}};
        if (!std::isnan(d.p)) j["difference"]["p"] = d.p, j["difference"]["p_holm"] = d.p_holm;
      }
      rows->push_back(std::move(j));
    }
}

/// One task's metric: a row per label, a column per run and per other run's difference from the first.
std::string metric_table(const std::vector<ComparedRun>& runs, const std::vector<std::string>& labels,
                         const std::string& task, const std::string& metric, int resamples, nlohmann::json* rows) {
  std::vector<MetricRow> table = metric_rows(runs, labels, task, metric, resamples);
  if (table.empty()) return "";
  const size_t printed = adjust_holm(table);
  if (rows) append_json_rows(runs, table, task, metric, rows);
  const std::string better = better_of(task, metric);
  std::ostringstream md;
  md << "### " << task << ": " << metric << (better.empty() ? "" : " (" + better + ")") << "\n\n";
  if (printed)
    md << "Holm's adjustment runs across the " << printed << (printed == 1 ? " difference" : " differences")
       << " of this table that print a p.\n\n";
  md << "| cell |";
  for (const auto& r : runs) md << " " << markdown_cell(r.name) << " |";
  for (size_t k = 1; k < runs.size(); ++k)
    md << " " << markdown_cell(runs[k].name) << " - " << markdown_cell(runs[0].name) << " |";
  md << "\n|---|";
  for (size_t k = 0; k < 2 * runs.size() - 1; ++k) md << "---|";
  md << "\n";
  for (const auto& row : table) {
    md << "| " << markdown_cell(row.label) << " |";
    for (const auto& v : row.values) md << " " << value_text(v) << " |";
    for (const auto& d : row.diffs) md << " " << difference_text(d) << " |";
    md << "\n";
  }
  return md.str() + "\n";
}

/// "2 of 7 cells missing: <label>, <label>" for the cells a run's run.json lists that it does not hold (unfinished,
/// deleted or unreadable); "" when none.
std::string missing_cells(const std::vector<CellData>& cells, const std::vector<std::string>& order,
                          std::map<std::string, std::string>& labels) {
  std::set<std::string> have;
  for (const auto& c : cells) have.insert(c.meta.at("cell_id").get<std::string>());
  std::vector<std::string> missing;
  for (const auto& id : order)
    if (!have.count(id)) missing.push_back(labels[id].empty() ? id : labels[id]);
  if (missing.empty()) return "";
  std::string out = std::to_string(missing.size()) + " of " + std::to_string(order.size()) +
                    " cells of its sweep missing (unfinished, deleted or unreadable):";
  for (size_t i = 0; i < missing.size() && i < 5; ++i) out += (i ? ", " : " ") + missing[i];
  if (missing.size() > 5) out += ", and " + std::to_string(missing.size() - 5) + " more";
  return out;
}

/// The keys whose values differ between the config.toml the two run folders recorded ("model.path: 'a' -> 'b'"),
/// "" when equal, "(not recorded)" when either folder has none.
std::string config_differences(const std::string& reference, const std::string& other) {
  const fs::path a = fs::path(reference) / "config.toml", b = fs::path(other) / "config.toml";
  std::error_code ec;
  if (!fs::is_regular_file(a, ec) || !fs::is_regular_file(b, ec)) return "(not recorded)";
  std::string out;
  for (std::string change : changed_config_keys(read_file(a.string()), read_file(b.string()), 6)) {
    // "key: A then, B now" -> "key: A -> B"
    if (const size_t then = change.find(" then, "); then != std::string::npos) change.replace(then, 7, " -> ");
    if (change.size() > 4 && change.compare(change.size() - 4, 4, " now") == 0) change.resize(change.size() - 4);
    out += (out.empty() ? "" : "; ") + change;
  }
  return out.empty() ? "none (other [sweep] at most)" : out;
}

/// "## Figures": per task and method (a cell's plot group), its primary metric against the budget with one line per
/// run, each run in the same colour in every figure; drawn into out's plots/ (runner/report/plots.hpp), gnuplot's
/// failures as notes. "" when no run has a compressed cell.
std::string comparison_figures(const std::vector<ComparedRun>& runs, int resamples, const Folder& out) {
  std::vector<CellData> all;
  for (const auto& r : runs) all.insert(all.end(), r.cells.begin(), r.cells.end());
  std::map<std::pair<std::string, std::string>, PlotSeries> figures;  // (task, group) -> run -> points
  std::map<std::string, std::string> primary;
  for (const auto& [task, names] : metrics_by_task(all)) {
    primary[task] = primary_of(task, names);
    for (const auto& r : runs)
      for (const auto& c : r.cells) {
        if (c.meta.at("full_cache").get<bool>()) continue;
        const Summary s = summarize(c, task, primary[task], resamples);
        if (s.n > 0)
          figures[{task, group_of(c.meta)}][r.name].push_back({budget_x(c.meta), s.value, s.ci_low, s.ci_high});
      }
  }
  if (figures.empty()) return "";
  ReportPlots plots(out.sub("plots"));
  std::vector<std::string> names, notes;
  for (const auto& r : runs) names.push_back(r.name);
  plots.use_labels(names);
  std::ostringstream md;
  md << "## Figures\n\nPer task and method, the task's primary metric in each run against the budget.\n\n";
  for (const auto& [key, lines] : figures) {
    const auto& [task, group] = key;
    md << "![" << task << " " << primary[task] << ", " << markdown_cell(group) << "](plots/"
       << plots.metric_vs_budget(task, primary[task], lines, NAN, better_of(task, primary[task]), group) << ")\n\n";
  }
  plots.draw(notes);
  for (const auto& n : notes) md << "> note: " << n << "\n";
  return md.str();
}

bool same_folder(const std::string& path, const Folder& out) {
  struct stat a {}, b {};
  return ::stat(path.c_str(), &a) == 0 && ::fstat(out.fd(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

}  // namespace

RunDifference run_difference(const CellData& reference, const CellData& other, const std::string& task,
                             const std::string& metric, uint64_t seed, int resamples) {
  const auto a = metric_values(reference, task, metric), b = metric_values(other, task, metric);
  RunDifference d;
  d.n_reference = a.size(), d.n_other = b.size();
  if (a.empty() || b.empty()) {
    d.difference = d.ci_low = d.ci_high = NAN;
    return d;
  }
  std::vector<double> ra, rb;
  for (const auto& [example, v] : a) ra.push_back(v.first);
  for (const auto& [example, v] : b) rb.push_back(v.first);
  d.paired = same_examples(a, b);
  if (d.paired) {
    const PairedComparison p = paired_bootstrap(rb, ra, seed, resamples);  // other - reference, example by example
    d.difference = p.mean_difference, d.ci_low = p.ci.low, d.ci_high = p.ci.high;
    d.all_zero = ra == rb;  // no difference on any example: the sign-flip test has nothing to permute
    if (p.n >= kMinExamplesForPValue && !d.all_zero) d.p = p.p_value;
  } else {
    d.difference = mean_of(rb) - mean_of(ra);
    const Interval ci = unpaired_bootstrap_ci(rb, ra, seed, resamples);
    d.ci_low = ci.low, d.ci_high = ci.high;
  }
  return d;
}

std::vector<ComparedRun> read_compared_runs(const std::vector<std::string>& folders,
                                            const std::vector<std::string>& names) {
  if (folders.size() < 2) throw InputError("compare: give at least two run folders (got " +
                                           std::to_string(folders.size()) + ")");
  if (!names.empty() && names.size() != folders.size())
    throw InputError("compare: " + std::to_string(names.size()) + " --name values for " +
                     std::to_string(folders.size()) + " run folders; give one per folder, in the same order");
  std::vector<ComparedRun> runs;
  std::map<std::string, int> seen;
  for (size_t i = 0; i < folders.size(); ++i) {
    ComparedRun r;
    r.folder = folders[i];
    if (!names.empty()) {
      if (names[i].empty()) throw InputError("compare: --name " + std::to_string(i + 1) + " is empty");
      if (seen.count(names[i])) throw InputError("compare: --name '" + names[i] + "' is given twice");
      r.name = names[i];
    } else {
      const std::string base = last_component(folders[i]);
      r.name = base;
      for (int k = 2; seen.count(r.name); ++k) r.name = base + "#" + std::to_string(k);
    }
    seen[r.name] = 1;
    std::vector<std::string> order;
    std::map<std::string, std::string> labels;
    try {
      r.cells = collect_cells({folders[i]}, &order, &labels, true, false);
      if (r.cells.empty() && fs::is_directory(fs::path(folders[i]) / "cells"))  // cells its run.json does not list
        r.cells = collect_cells({folders[i]}, &order, &labels, false, false);
    } catch (const InputError& e) {  // the reader names itself "merge"
      std::string what = e.what();
      if (what.rfind("merge: ", 0) == 0) what = what.substr(7);
      throw InputError("compare: " + what);
    }
    if (r.cells.empty() && fs::exists(fs::path(folders[i]) / "runs.json"))
      throw InputError("compare: '" + folders[i] + "' holds a sweep of runs (runs.json), already compared in its "
                       "report.md; compare its runs, '" + folders[i] + "/runs/<name>'");
    if (r.cells.empty()) throw InputError("compare: '" + folders[i] + "' holds no finished cells (cells/*.json)");
    r.missing = missing_cells(r.cells, order, labels);
    if (!r.missing.empty()) std::cerr << "warning: compare: '" << folders[i] << "': " << r.missing << "\n";
    runs.push_back(std::move(r));
  }
  for (size_t k = 1; k < runs.size(); ++k) runs[k].differs = config_differences(runs[0].folder, runs[k].folder);
  return runs;
}

std::string comparison_report(const std::vector<ComparedRun>& runs, int resamples, nlohmann::json* rows) {
  std::ostringstream md;
  md << "# ripplekv comparison of " << runs.size() << " runs\n\n" << runs_table(runs)
     << "Cells are aligned by label (a label carries the budget). The first run, " << markdown_cell(runs[0].name)
     << ", is the reference: each \"X - " << markdown_cell(runs[0].name) << "\" column is run X's value minus the reference run's "
     << "on the cell with the same label, **paired** when both hold the same examples with the same inputs (every "
     << "example's token ids hash equal): the mean per-example difference with its 95% percentile-bootstrap CI and, "
     << "from n = " << kMinExamplesForPValue << ", the sign-flip permutation p; **unpaired** otherwise (other "
     << "examples, or the same text tokenized by another model): the difference of the means with a two-sample "
     << "bootstrap CI and no p. Each value: mean [95% CI] (n examples); \"-\": the run has no such cell or metric. "
     << resamples << " bootstrap resamples.\n\n";
  std::vector<CellData> all;
  for (const auto& r : runs) all.insert(all.end(), r.cells.begin(), r.cells.end());
  const std::vector<std::string> labels = aligned_labels(runs);
  for (const auto& [task, names] : metrics_by_task(all)) {
    md << "## Task " << task << "\n\n";
    std::vector<std::string> ordered = names;  // the task's primary metric first
    const std::string primary = primary_of(task, names);
    std::stable_partition(ordered.begin(), ordered.end(), [&](const std::string& m) { return m == primary; });
    for (const auto& metric : ordered) md << metric_table(runs, labels, task, metric, resamples, rows);
  }
  return md.str();
}

void compare_runs(const std::vector<std::string>& folders, const std::vector<std::string>& names,
                  const std::string& out_dir, bool quiet, bool force) {
  const std::vector<ComparedRun> runs = read_compared_runs(folders, names);
  for (const auto& f : folders) {  // before the folder is opened (opening creates it)
    std::error_code ec;
    const fs::path in = fs::weakly_canonical(f, ec), o = fs::weakly_canonical(out_dir, ec);
    if (!ec && o.string().rfind(in.string() + "/", 0) == 0)
      throw InputError("compare: the output folder '" + out_dir + "' lies inside the input '" + f +
                       "'; write the comparison outside every run folder");
  }
  const Folder out = open_ripplekv_folder(out_dir, force, "compare");
  for (const auto& f : folders)
    if (same_folder(f, out))
      throw InputError("compare: the output folder '" + out_dir + "' is the input '" + f +
                       "'; its report would be overwritten. Write the comparison into a new folder");
  const bool holds_run = out.kind("run.json") != Folder::Kind::missing ||
                         out.kind("cells") != Folder::Kind::missing || out.kind("merge.json") != Folder::Kind::missing ||
                         out.kind("runs.json") != Folder::Kind::missing;
  if (holds_run && !force)
    throw InputError("compare: output folder '" + out_dir + "' holds a run, merge or sweep of runs of its own (run.json, "
                     "cells/, merge.json or runs.json) whose report.md would be overwritten. Write into a new folder, or "
                     "pass --force");
  const OutputFolderLock lock(out);
  write_comparison(runs, folders, out, quiet, "");
}

void write_comparison(const std::vector<ComparedRun>& runs, const std::vector<std::string>& folders,
                      const Folder& out, bool quiet, const std::string& preface) {
  const int resamples = report_resamples(runs[0].cells);
  nlohmann::json rows = nlohmann::json::array();
  std::string report = comparison_report(runs, resamples, &rows) + comparison_figures(runs, resamples, out);
  if (!preface.empty()) report.insert(report.find("\n\n") + 2, preface);  // under the title
  nlohmann::json record = {{"schema", kCompareSchema}, {"inputs", folders}, {"names", nlohmann::json::array()}};
  for (const auto& r : runs) record["names"].push_back(r.name);
  out.write_atomically("compare.json", record.dump(2) + "\n");
  std::string jsonl;
  for (const auto& r : rows) jsonl += r.dump() + "\n";
  out.write_atomically("comparison.jsonl", jsonl);
  out.write_atomically("report.md", report);
  if (!quiet) std::cerr << "wrote " << out.path_of("report.md") << " (" << runs.size() << " runs)\n";
}

}  // namespace rkv
