// `ripplekv run` of a config whose [sweep] sweeps the run-level keys "model.path" and/or "data.eval.seed"
// (runner/plan/run_axes.hpp): one ordinary run per value (per combination), one after the other, each in its own
// folder <out>/runs/<name>/ with its own full-cache reference, profile and report, then the runs side by side in <out>
// as `ripplekv compare` reports them (runner/report/compare_runs.hpp): a column per run (model / seed), each cell
// aligned by label, paired where two runs hold the same examples with the same token ids, unpaired otherwise.
// Memory: one run's (one model and one example's cache) at a time.
//
// Thread rules: as run_ablation's (one run per process at a time).
#pragma once
#include "runner/plan/config.hpp"
#include "runner/run/run.hpp"

namespace rkv {

/// Runs every run of `plan.runs` (non-empty) into options.out_dir (see the top of this file). Before anything is
/// written, every run's model headers are checked (check_run_plan_with_model_headers). Writes <out>/runs.json (the
/// runs: name, folder, values) and <out>/config.toml (the sweep's config), then each run as run_ablation does into
/// runs/<name>/ (with options.resume or force passed on: --resume continues every run, computing only what is
/// missing), then report.md, comparison.jsonl, compare.json and plots/ over the runs (two or more). The summary adds
/// up the runs'. Refused with rkv::InputError: --shard (it splits one run's cells), a folder holding a single run of
/// its own (run.json) unless force, a folder holding a sweep of runs already (runs.json) without resume or force.
/// rkv::Cancelled as run_ablation (finished runs and cells stay).
RunSummary run_sweep_of_runs(const RunPlan& plan, const RunOptions& options);

}  // namespace rkv
