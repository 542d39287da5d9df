// A sweep over run-level keys: one run per value, then the runs side by side (runner/run/sweep_of_runs.hpp).
#include "runner/run/sweep_of_runs.hpp"

#include <filesystem>
#include <iostream>
#include <sstream>

#include "core/cancel.hpp"
#include "core/errors.hpp"
#include "core/format.hpp"
#include "core/progress.hpp"
#include "core/timing.hpp"
#include "runner/records/output_folder.hpp"
#include "runner/report/compare_runs.hpp"

namespace rkv {

namespace {

std::string joined(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : " and ") + k;
  return out;
}

/// The folder may take this sweep (see run_sweep_of_runs).
void check_sweep_folder(const RunPlan& plan, const RunOptions& opt, const Folder& top) {
  if (top.kind("run.json") != Folder::Kind::missing && !opt.force)
    throw InputError("run: output folder '" + opt.out_dir + "' holds a single run of its own (run.json); a sweep over " +
                     joined(plan.run_axis_keys) + " writes its runs under runs/ beside their comparison. Choose a new "
                     "folder, or pass --force");
  if (top.kind("runs.json") != Folder::Kind::missing && !opt.resume && !opt.force)
    throw InputError("run: output folder '" + opt.out_dir + "' already holds a sweep of runs (runs.json); continue it "
                     "with --resume, start over with --force, or choose another folder");
}

/// runs.json: the sweep's runs, each with its folder and run-level values.
std::string runs_record(const RunPlan& plan) {
  nlohmann::json rec = {{"schema", kRunsSchema},
                        {"config", plan.config_path},
                        {"config_sha256", plan.config_sha256},
                        {"axes", plan.run_axis_keys},
                        {"runs", nlohmann::json::array()}};
  for (const SweepRun& r : plan.runs)
    rec["runs"].push_back({{"name", r.name}, {"folder", "runs/" + r.name}, {"values", r.values}});
  return rec.dump(2) + "\n";
}

/// The comparison's preface: what was swept, and a row per run with its value of each run-level key.
std::string runs_table(const RunPlan& plan) {
  std::ostringstream md;
  md << "Runs of the sweep over " << joined(plan.run_axis_keys) << " in " << markdown_cell(plan.config_path)
     << " (runs.json); each run's own report is runs/<run>/report.md.\n\n| run |";
  for (const auto& k : plan.run_axis_keys) md << " " << k << " |";
  md << "\n|---|";
  for (size_t i = 0; i < plan.run_axis_keys.size(); ++i) md << "---|";
  md << "\n";
  for (const SweepRun& r : plan.runs) {
    md << "| " << markdown_cell(r.name) << " |";
    for (const auto& k : plan.run_axis_keys) {
      const nlohmann::json& v = r.values.at(k);
      md << " " << markdown_cell(v.is_string() ? v.get<std::string>() : v.dump()) << " |";
    }
    md << "\n";
  }
  return md.str() + "\n";
}

}  // namespace

RunSummary run_sweep_of_runs(const RunPlan& plan, const RunOptions& opt) {
  const CancelScope cancel_scope(opt.cancel);
  const auto t0 = SteadyClock::now();
  const size_t n = plan.runs.size();
  if (opt.out_dir.empty()) throw InputError("run: an output folder is required (--out DIR or [output] dir)");
  if (opt.shard_count > 1)
    throw InputError("run: --shard splits one run's cells, and " + plan.config_path + " sweeps " +
                     joined(plan.run_axis_keys) + " into " + std::to_string(n) + " runs; run the sweep whole, or one "
                     "run at a time by giving the key one value (e.g. --set 'sweep.\"" + plan.run_axis_keys[0] +
                     "\"=[...]') in a folder of its own");
  // Every run's plan, and its model suits its cells and lengths before any run starts (headers only: a few MB each).
  std::vector<RunPlan> plans;
  for (size_t k = 0; k < n; ++k) {
    throw_if_cancelled();
    try {
      plans.push_back(load_sweep_run(plan, k));
      check_run_plan_with_model_headers(plans.back());
    } catch (const InputError& e) {
      throw InputError(std::string(e.what()) + " (in run " + plan.runs[k].name + " of the sweep: " +
                       plan.runs[k].values.dump() + ")");
    }
  }
  const Folder top = open_ripplekv_folder(opt.out_dir, opt.force, "run");
  const OutputFolderLock lock(top);
  check_sweep_folder(plan, opt, top);
  // Every run folder already there must take its run (--resume: the same base config; else empty or --force), checked
  // before runs.json is written, so a refused resume leaves the sweep's record as it was.
  for (size_t k = 0; k < n; ++k)
    if (const std::optional<Folder> folder = top.find_sub("runs/" + plan.runs[k].name)) {
      try {
        prepare_output_folder(plans[k], *folder, opt.resume, opt.force);
      } catch (const InputError& e) {
        throw InputError(std::string(e.what()) + " (run " + plan.runs[k].name + " of the sweep)");
      }
    }
  top.write_atomically("runs.json", runs_record(plan));
  top.write_atomically("config.toml", plan.config_text);
  top.sub("runs");

  const Progress progress(opt.quiet, opt.progress);
  RunSummary total;
  std::vector<std::string> folders, names;
  for (size_t k = 0; k < n; ++k) {
    const SweepRun& r = plan.runs[k];
    RunOptions o = opt;
    o.out_dir = (std::filesystem::path(opt.out_dir) / "runs" / r.name).string();
    if (opt.progress)  // the caller's sink counts the sweep's examples (every run has as many) and names the run
      o.progress = [&opt, name = r.name, k, n](int64_t done, int64_t all, const std::string& what) {
        opt.progress(static_cast<int64_t>(k) * all + done, static_cast<int64_t>(n) * all, name + ": " + what);
      };
    progress.note("run: [" + std::to_string(k + 1) + "/" + std::to_string(n) + "] " + r.name + " (" + r.values.dump() +
                  ") into " + o.out_dir);
    lock.check_held();
    const RunSummary s = run_ablation(plans[k], o);
    total.cells_total += s.cells_total;
    total.cells_computed += s.cells_computed;
    total.cells_skipped += s.cells_skipped;
    folders.push_back(o.out_dir);
    names.push_back(r.name);
  }
  lock.check_held();
  if (n >= 2) {
    const CancelShield shield;  // every run is finished: the comparison is written even if a cancel arrives now
    write_comparison(read_compared_runs(folders, names), folders, top, opt.quiet, runs_table(plan));
  } else {
    progress.note("run: one run in the sweep; its report is " + folders[0] + "/report.md");
  }
  total.seconds = seconds_since(t0);
  return total;
}

}  // namespace rkv
