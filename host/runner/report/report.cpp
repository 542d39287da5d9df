// report.md and plots/ of a run or merge (runner/report/report.hpp).
#include "runner/report/report.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "core/format.hpp"
#include "runner/plan/damage_signal_spec.hpp"
#include "runner/report/comparisons.hpp"
#include "runner/report/plots.hpp"
#include "runner/report/run_description.hpp"
#include "runner/report/summary.hpp"
#include "runner/tasks/task.hpp"

namespace fs = std::filesystem;

namespace rkv {

namespace {

bool has_task(const CellData& c, const std::string& task) {
  for (const auto& e : c.examples)
    if (e.task == task) return true;
  return false;
}

std::string header(const std::vector<CellData>& cells, int resamples, const std::string& missing_note) {
  std::set<std::string> model_hashes;  // every model hash the cells record (one, as mixing is refused)
  for (const auto& c : cells) model_hashes.insert(c.meta.value("model_sha256", std::string("unknown")));
  std::string models;
  for (const auto& h : model_hashes) models += (models.empty() ? "`" : ", `") + h.substr(0, 16) + "`";
  std::ostringstream md;
  md << "# ripplekv report\n\n- run id: `" << cells[0].meta.at("run_id").get<std::string>() << "`, config sha256 `"
     << cells[0].meta.at("config_sha256").get<std::string>().substr(0, 16) << "`, model sha256 " << models
     << ", backend " << backend_of(cells[0].meta) << ", weights " << weights_label(cells)
     << "\n- cells: " << cells.size()
     << "; values are means over examples with 95% percentile-bootstrap CIs (" << resamples
     << " resamples, seeded by cell)\n\n";
  if (!missing_note.empty()) md << "> warning: " << missing_note << "\n\n";
  return md.str();
}

/// Every distinct warning the cells' examples recorded, with the cells that recorded it.
std::string warnings_section(const std::vector<CellData>& cells) {
  std::map<std::string, std::vector<std::string>, NaturalLess> where;  // "layer 2" before "layer 10"
  for (const auto& c : cells) {
    std::set<std::string> own;
    for (const auto& e : c.examples) own.insert(e.warnings.begin(), e.warnings.end());
    for (const auto& w : own) where[w].push_back(c.meta.at("label").get<std::string>());
  }
  if (where.empty()) return "";
  std::ostringstream md;
  md << "## Warnings\n\n";
  for (const auto& [warning, labels] : where) {
    md << "- " << warning << " (" << labels.size() << (labels.size() == 1 ? " cell: " : " cells: ");
    for (size_t i = 0; i < labels.size() && i < 5; ++i) md << (i ? "; " : "") << labels[i];
    if (labels.size() > 5) md << "; and " << labels.size() - 5 << " more";
    md << ")\n";
  }
  return md.str() + "\n";
}

std::string profile_section(const Folder& out, ReportPlots& plots) {
  const auto p = nlohmann::json::parse(out.read("profile.json", "profile"));
  std::ostringstream md;
  const bool oracle = p.at("signal").get<std::string>() == kDamageSignalId;
  md << "## Sensitivity profile (" << p.at("signal").get<std::string>() << (oracle ? ": the oracle" : "") << ")\n\n";
  if (oracle && p.at("params").value("of", std::string("compression")) == "sharing")
    md << "This profile is the sharing damage: s_l is the mean KL with only layer l's cache dropped and its attention "
       << "reading layer l - 1's, measured on the calibration split (layer 0, which cannot share, takes the largest "
       << "value). A [compression.share] count = k chooser shares the k layers of lowest s_l.\n\n";
  else if (oracle)
    md << "This profile is the oracle: s_l is the compression damage D_l (mean KL with only layer l compressed by the "
       << "cell's scorer to f = " << p.at("params").value("fraction", 0.0)
       << ") measured on the calibration split. Cells that allocate by it (labelled \"damage: oracle\") are the "
       << "ceiling of what a sensitivity signal can gain.\n\n";
  md << "split-half Spearman rho: "
     << (p.at("split_half_spearman").is_null() ? std::string("n/a") : fmt(p.at("split_half_spearman").get<double>(), 3))
     << "; " << p.at("per_example").size() << " calibration examples; computed in " << fmt(p.value("seconds", 0.0), 3)
     << " s\n\n| layer | s | 95% CI |\n|---:|---:|---|\n";
  std::vector<PlotPoint> points;
  for (size_t l = 0; l < p.at("s").size(); ++l) {
    const double s = p.at("s")[l].get<double>();
    const double lo = p.at("ci_low")[l].is_null() ? s : p.at("ci_low")[l].get<double>();
    const double hi = p.at("ci_high")[l].is_null() ? s : p.at("ci_high")[l].get<double>();
    md << "| " << l << " | " << fmt(s) << " | [" << fmt(lo) << ", " << fmt(hi) << "] |\n";
    points.push_back({static_cast<double>(l), s, lo, hi});
  }
  md << "\n![profile](plots/" << plots.profile(p.at("signal").get<std::string>(), points) << ")\n\n";
  // A run whose cells used several profiles (swept signals or scorer params) shows the first; say where the others are.
  std::vector<std::string> others;
  if (const std::optional<Folder> profiles = out.find_sub("profiles")) others = profiles->list_files(".json");
  if (others.size() > 1) {
    md << "> This run used " << others.size() << " profiles (one per signal and scorer setting); the table shows the "
       << "first. All are in profiles/: ";
    for (size_t i = 0; i < others.size(); ++i) md << (i ? ", " : "") << "`" << others[i] << "`";
    md << "\n\n";
  }
  return md.str();
}

/// The line under a task's heading that says which way each metric is better: "Better: lower kl; higher top1.".
std::string direction_line(const std::string& task, const std::vector<std::string>& names) {
  std::string lower, higher;
  for (const auto& metric : names) {
    const std::string b = better_of(task, metric);
    if (b.empty()) return "";
    std::string& list = b[0] == 'l' ? lower : higher;
    list += (list.empty() ? "" : ", ") + metric;
  }
  std::string out = "Better: ";
  if (!lower.empty()) out += "lower " + lower + (higher.empty() ? "" : "; ");
  if (!higher.empty()) out += "higher " + higher;
  return out + ".\n\n";
}

/// The reference-only metrics of `task` shown once: mean [95% CI] over the full cache cell's examples (or, without
/// one, the cell holding the most examples of the task), so one CI stands for what every cell shares.
std::string reference_line(const std::vector<CellData>& cells, const std::string& task,
                           const std::vector<std::string>& reference, int resamples) {
  if (reference.empty()) return "";
  const CellData* from = nullptr;
  size_t most = 0;
  for (const auto& c : cells) {
    size_t n = 0;
    for (const auto& e : c.examples) n += e.task == task;
    if (n == 0) continue;
    if (c.meta.at("full_cache").get<bool>()) {
      from = &c;
      break;
    }
    if (n > most) most = n, from = &c;
  }
  if (!from) return "";
  std::ostringstream md;
  md << "Reference (the full cache's own value, the same for every cell):";
  for (const auto& metric : reference) {
    const Summary s = summarize(*from, task, metric, resamples);
    const std::string better = better_of(task, metric);
    md << " " << metric << " = " << fmt(s.value) << " [" << fmt(s.ci_low) << ", " << fmt(s.ci_high) << "], n = " << s.n
       << (better.empty() ? "" : " (" + better + ")") << ";";
  }
  std::string line = md.str();
  line.back() = '.';
  return line + "\n\n";
}

/// One row per cell of `task`: each metric's mean [CI], the full cache's value of the first metric (unless the task's
/// metrics compare with the full cache by construction: Task::report_full_cache_column), and the bytes kept after compression and at the
/// end of decoding as % of the full prompt cache. Fills `series` (metric -> group -> points) and `full` (metric ->
/// the full-cache cell's value) for the plots.
std::string task_table(const std::vector<CellData>& cells, const std::string& task,
                       const std::vector<std::string>& all_names, int resamples,
                       std::map<std::string, PlotSeries>* series, std::map<std::string, double>* full) {
  std::vector<std::string> names, reference;  // per-cell columns; the full cache's own values (shown once)
  for (const auto& metric : all_names) (is_reference_metric(metric) ? reference : names).push_back(metric);
  if (names.empty()) names.swap(reference);
  std::ostringstream md;
  const Task* driver = find_task(task);  // a task no table entry names (an older cell file) shows the column
  const bool full_column = !driver || driver->report_full_cache_column();
  md << "## Task " << task << "\n\n" << direction_line(task, names) << "| cell |";
  for (const auto& metric : names) md << " " << metric << " |";
  if (full_column) md << " full cache (" << names.front() << ") |";
  md << " n | KV kept | KV at end |\n|---|";
  for (size_t i = 0; i < names.size(); ++i) md << "---|";
  md << (full_column ? "---|" : "") << "---:|---:|---:|\n";
  for (const auto& c : cells) {
    if (!has_task(c, task)) continue;
    md << "| " << markdown_cell(c.meta.at("label").get<std::string>()) << " |";
    double full_first = NAN;
    size_t n = 0;
    for (const auto& metric : names) {
      const Summary s = summarize(c, task, metric, resamples);
      md << " " << fmt(s.value) << " [" << fmt(s.ci_low) << ", " << fmt(s.ci_high) << "] |";
      if (std::isnan(full_first)) full_first = s.full;
      n = std::max(n, s.n);
      if (s.n == 0) continue;
      if (c.meta.at("full_cache").get<bool>()) (*full)[metric] = s.value;
      else (*series)[metric][group_of(c.meta)].push_back({budget_x(c.meta), s.value, s.ci_low, s.ci_high});
    }
    double kv = 0, kvf = 0, kve = 0;
    for (const auto& e : c.examples)
      if (e.task == task)
        kv += static_cast<double>(e.kv_bytes), kvf += static_cast<double>(e.kv_bytes_full),
            kve += static_cast<double>(e.kv_bytes_end);
    if (full_column) md << " " << fmt(full_first) << " |";
    md << " " << n << " | " << fmt(kvf > 0 ? 100.0 * kv / kvf : NAN, 3) << "% | "
       << fmt(kvf > 0 ? 100.0 * kve / kvf : NAN, 3) << "% |\n";
  }
  md << "\n" << reference_line(cells, task, reference, resamples);
  return md.str();
}

/// The layers' spans on each example of `task` (by example index): the full cache's budgets there (min(T, window);
/// T without sliding windows).
std::map<int64_t, std::vector<int64_t>> spans_by_example(const std::vector<CellData>& cells, const std::string& task) {
  std::map<int64_t, std::vector<int64_t>> spans;
  for (const auto& c : cells)
    if (c.meta.at("full_cache").get<bool>())
      for (const auto& e : c.examples)
        if (e.task == task) spans[e.example] = e.budgets;
  return spans;
}

/// Per compressed cell of `task`, b_l relative to what uniform gives the layer out of the same total, b_l / (B span_l /
/// sum span) with B = sum_l b_l over the L model layers and span_l the full cache's b_l on that example (B / L when
/// every span is T), means over its examples, for the budget heatmap.
std::vector<std::pair<std::string, std::vector<double>>> budget_rows(const std::vector<CellData>& cells,
                                                                     const std::string& task) {
  // The uniform split keeps the same fraction of each span, B span_l / sum span.
  const std::map<int64_t, std::vector<int64_t>> spans = spans_by_example(cells, task);
  std::vector<std::pair<std::string, std::vector<double>>> rows;
  for (const auto& c : cells) {
    if (c.meta.at("full_cache").get<bool>()) continue;
    std::vector<double> share;
    size_t n = 0;
    for (const auto& e : c.examples) {
      if (e.task != task || e.budgets.empty()) continue;
      std::vector<double> span(e.budgets.size(), 1.0);  // an even split when the full cache's row is missing
      if (auto it = spans.find(e.example); it != spans.end() && it->second.size() == e.budgets.size())
        span.assign(it->second.begin(), it->second.end());
      double total = 0, span_sum = 0;
      for (size_t l = 0; l < e.budgets.size(); ++l) total += static_cast<double>(e.budgets[l]), span_sum += span[l];
      if (total <= 0 || span_sum <= 0) continue;
      if (share.empty()) share.assign(e.budgets.size(), 0.0);
      for (size_t l = 0; l < e.budgets.size() && l < share.size(); ++l)
        share[l] += static_cast<double>(e.budgets[l]) / (total * span[l] / span_sum);
      ++n;
    }
    if (!n) continue;
    for (double& s : share) s /= static_cast<double>(n);
    rows.emplace_back(c.meta.at("label").get<std::string>(), share);
  }
  return rows;
}

/// Per joint cell of `task` (its examples record joint_plan), each layer's share of its span kept (b_l over the full
/// cache's b_l on the same example; means over the examples), bits and sharing as its first example's plan says.
std::vector<std::pair<std::string, std::vector<ReportPlots::JointBar>>> joint_rows(const std::vector<CellData>& cells,
                                                                                 const std::string& task) {
  const std::map<int64_t, std::vector<int64_t>> spans = spans_by_example(cells, task);
  std::vector<std::pair<std::string, std::vector<ReportPlots::JointBar>>> rows;
  for (const auto& c : cells) {
    std::vector<ReportPlots::JointBar> bars;
    size_t n = 0;
    for (const auto& e : c.examples) {
      const auto span = spans.find(e.example);
      if (e.task != task || e.joint_plan.empty() || span == spans.end() || span->second.size() != e.budgets.size() ||
          e.layer_bits.size() != e.budgets.size())
        continue;
      if (bars.empty()) {
        bars.resize(e.budgets.size());
        for (size_t l = 0; l < bars.size(); ++l) {
          bars[l].bits = static_cast<int>(e.layer_bits[l]);
          bars[l].shared = !e.share_sources.empty() && e.share_sources[l] != static_cast<int64_t>(l);
        }
      }
      for (size_t l = 0; l < bars.size() && l < e.budgets.size(); ++l)
        bars[l].kept += span->second[l] > 0 ? static_cast<double>(e.budgets[l]) / static_cast<double>(span->second[l]) : 0;
      ++n;
    }
    if (!n) continue;
    for (auto& b : bars) b.kept /= static_cast<double>(n);
    rows.emplace_back(c.meta.at("label").get<std::string>(), bars);
  }
  return rows;
}

/// The report's first screen: what was run (model name and shape, backend, weights, tasks with n, T and settings, budgets, cells, baseline), then
/// per task and budget every cell ranked by the task's primary metric -- mean [95% CI], its paired difference against the
/// baseline [95% CI] when it has one -- with the full cache as the reference row. A full cache that scores 0 on a
/// higher-is-better primary metric is called out under its table (no compressed cell can be judged against it).
std::string headline_section(const std::vector<CellData>& cells,
                             const std::map<std::string, std::vector<std::string>>& metrics,
                             const std::vector<UniformComparison>& comparisons, const std::string& against,
                             int resamples) {
  std::ostringstream md;
  md << "## Headline\n\n" << what_was_run(cells, metrics) << "- **Baseline** " << against
     << ": the difference column is cell minus its baseline cell on the same examples.\n\n";
  std::set<std::string> baseline_cells;  // the cells some comparison is against
  std::map<std::string, const UniformComparison*> by_row;  // task / metric / label -> its comparison (one lookup per row)
  for (const auto& u : comparisons) {
    baseline_cells.insert(u.baseline_label);
    by_row[u.task + "\n" + u.metric + "\n" + u.label] = &u;
  }
  const bool compressed = std::any_of(cells.begin(), cells.end(),
                                      [](const CellData& c) { return !c.meta.at("full_cache").get<bool>(); });
  if (comparisons.empty() && compressed)
    md << "> note: no cell has a baseline cell to be compared with (" << against
       << "), so there are no paired differences; choose one with [output] baseline (docs/REFERENCE.md \"Reading a report\").\n\n";
  for (const auto& [task, names] : metrics) {
    const std::string metric = primary_of(task, names);
    const std::string better = better_of(task, metric);
    const bool lower = better.rfind("lower", 0) == 0;
    struct Row {
      const CellData* cell;
      Summary s;
    };
    std::vector<Row> rows;
    const CellData* full = nullptr;
    Summary full_s;
    for (const auto& c : cells) {
      if (!has_task(c, task)) continue;
      Summary s = summarize(c, task, metric, resamples);
      if (s.n == 0) continue;
      if (c.meta.at("full_cache").get<bool>()) {
        full = &c, full_s = std::move(s);
      } else {
        rows.push_back({&c, std::move(s)});
      }
    }
    // Ranked within each budget (the kvpress leaderboard's question: which method wins at the same ratio), best first.
    std::map<double, std::vector<Row>> by_budget;
    for (Row& r : rows) by_budget[budget_x(r.cell->meta)].push_back(std::move(r));
    if (by_budget.empty() && full) by_budget[1.0];  // only the reference: its table alone
    for (auto& [budget, ranked] : by_budget) {
      std::stable_sort(ranked.begin(), ranked.end(), [&](const Row& a, const Row& b) {
        return lower ? a.s.value < b.s.value : a.s.value > b.s.value;
      });
      md << "### " << task << ": ranked by " << metric << (better.empty() ? "" : " (" + better + ")")
         << (by_budget.size() > 1 ? ", at budget " + fmt(budget) : "") << "\n\n"
         << "| rank | cell | " << metric << " [95% CI] | difference vs " << against << " [95% CI] | n |\n"
         << "|---:|---|---|---|---:|\n";
      if (full)
        md << "| ref | " << full->meta.at("label").get<std::string>() << " | " << fmt(full_s.value) << " ["
           << fmt(full_s.ci_low) << ", " << fmt(full_s.ci_high) << "] | | " << full_s.n << " |\n";
      size_t rank = 0;  // competition ranking: tied values share the better rank ("1, 1, 3")
      for (size_t i = 0; i < ranked.size(); ++i) {
        if (i == 0 || ranked[i].s.value != ranked[i - 1].s.value) rank = i + 1;
        const std::string label = ranked[i].cell->meta.at("label").get<std::string>();
        std::string diff;
        if (const auto it = by_row.find(task + "\n" + metric + "\n" + label); it != by_row.end()) {
          const PairedComparison& p = it->second->stats;
          diff = fmt(p.mean_difference) + " [" + fmt(p.ci.low) + ", " + fmt(p.ci.high) + "]";
        }
        const Summary& s = ranked[i].s;
        md << "| " << rank << " | " << markdown_cell(label) << " | " << fmt(s.value) << " [" << fmt(s.ci_low) << ", "
           << fmt(s.ci_high) << "] | "
           << (!diff.empty() ? diff : baseline_cells.count(label) ? "(a baseline)" : "(no baseline cell)") << " | "
           << s.n << " |\n";
      }
      md << "\n";
    }
    if (full && !lower && !better.empty() && full_s.value == 0.0)
      md << "> warning: the full cache scores 0 on " << task << " " << metric
         << ": the task is beyond this model at this setting, so no compressed cell can be judged on it.\n\n";
  }
  return md.str();
}

std::map<std::string, PlotSeries> difference_series(const std::vector<UniformComparison>& comparisons,
                                                    const std::string& task) {
  std::map<std::string, PlotSeries> out;
  for (const auto& u : comparisons)
    if (u.task == task)
      out[u.metric][u.group].push_back({u.budget, u.stats.mean_difference, u.stats.ci.low, u.stats.ci.high});
  return out;
}

}  // namespace

void write_report(const std::vector<CellData>& cells, const Folder& out, int resamples,
                  const std::string& missing_note) {
  std::vector<std::string> notes;
  ReportPlots plots(out.sub("plots"));
  {  // one style per line for the whole report: every figure draws a method in the same colour
    std::vector<std::string> groups;
    for (const auto& c : cells)
      if (!c.meta.at("full_cache").get<bool>()) groups.push_back(group_of(c.meta));
    plots.use_labels(groups);
  }
  std::ostringstream md;  // after the header and the headline (written last: it needs the comparisons)
  md << warnings_section(cells);
  if (out.kind("profile.json") != Folder::Kind::missing) {
    try {
      md << profile_section(out, plots);
    } catch (const std::exception& e) {
      notes.push_back("profile.json could not be read: " + std::string(e.what()));
    }
  }
  const auto metrics = metrics_by_task(cells);
  std::string baseline_note;
  const ReportBaseline baseline = recorded_baseline(cells, &baseline_note);
  if (!baseline_note.empty()) notes.push_back(baseline_note);
  const std::vector<UniformComparison> comparisons = compare_with_baseline(cells, metrics, resamples, baseline);
  const std::string against = baseline.describe();
  const std::string heading =
      baseline.kind == ReportBaseline::Kind::uniform
          ? "Paired comparison against uniform (same scorer, budget and examples)"
      : baseline.kind == ReportBaseline::Kind::full
          ? "Paired comparison against the full cache (same examples; [output] baseline = \"full\")"
          : "Paired comparison against the baseline " + against +
                " (the cell with these values and every other swept value the same; same examples; [output] baseline)";
  const std::vector<UniformComparison> equal_bytes = compare_at_equal_bytes(cells, metrics, resamples);
  for (const std::string& label : cells_without_equal_bytes_baseline(cells))
    notes.push_back("'" + label + "' has a budget.bytes_fraction but no eviction-alone cell (float32 cache, uniform "
                    "allocator, no route or sharing, the same scorer, decode policy and bytes_fraction) to be compared "
                    "with at equal KV bytes; add one to the sweep");
  for (const auto& [task, names] : metrics) {
    std::map<std::string, PlotSeries> series;
    std::map<std::string, double> full;
    md << task_table(cells, task, names, resamples, &series, &full)
       << comparison_section(comparisons, task, heading, against);
    for (const auto& [metric, groups] : difference_series(comparisons, task))
      md << "![" << task << " " << metric << " vs " << against << "](plots/"
         << plots.paired_differences(task, metric, groups, against, better_of(task, metric)) << ")\n\n";
    md << comparison_section(equal_bytes, task,
                             "Paired comparison at equal KV bytes (against eviction alone: float32 cache, uniform "
                             "allocator, same scorer and budget.bytes_fraction)",
                             "eviction alone");
    for (const auto& [metric, groups] : difference_series(equal_bytes, task))
      md << "![" << task << " " << metric << " vs eviction alone](plots/"
         << plots.paired_differences(task, metric, groups, "eviction alone", better_of(task, metric)) << ")\n\n";
    for (const auto& [metric, groups] : series) {
      if (is_reference_metric(metric)) continue;  // the reference line
      const double reference = full.count(metric) ? full.at(metric) : NAN;
      md << "![" << task << " " << metric << "](plots/"
         << plots.metric_vs_budget(task, metric, groups, reference, better_of(task, metric)) << ")\n\n";
    }
    const auto rows = budget_rows(cells, task);
    if (!rows.empty()) md << "![budgets](plots/" << plots.budget_heatmap(task, rows) << ")\n\n";
    if (const auto plans = joint_rows(cells, task); !plans.empty())
      md << "Joint plans (`[compression.joint]`): where each cell's bytes went, per layer (`budgets.json` has "
            "`joint_plan`, `budgets`, `layer_bits`).\n\n![joint plans](plots/"
         << plots.joint_plans(task, plans) << ")\n\n";
  }
  const std::string headline = headline_section(cells, metrics, comparisons, against, resamples);
  plots.draw(notes);
  for (const auto& n : notes) md << "> note: " << n << "\n";
  out.write_atomically("report.md", header(cells, resamples, missing_note) + headline + md.str());
}

}  // namespace rkv
