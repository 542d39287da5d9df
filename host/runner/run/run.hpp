// `ripplekv run`: an ablation sweep on a real model (docs/ARCHITECTURE.md "Data flow"). The output folder's layout is
// runner/records/output_folder.hpp's; its results, report and plots are assembled by runner/report/outputs.hpp.
//
// The run is a sequence of named phases (run.cpp): open the output folder (the lock, --resume and --shard: which
// cells are pending), load the model and backend, check every pending cell on the model, compute the profiles and
// joint damage tables the cells read, build the examples (tokens only) and check the budgets on them, write the run's
// identity, run the cells example by example (each example prefilled once, every pending cell run on it, then
// released: runner/run/cells.hpp), assemble the outputs.
//
// Thread rules: one run per process at a time (plugin instances are not shared across runs).
#pragma once
#include <atomic>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "runner/plan/config.hpp"

namespace rkv {

struct RunOptions {
  std::string out_dir;        ///< required
  bool resume = false;        ///< skip finished cells; refuse when the non-swept config changed
  /// write into a non-empty folder that holds no ripplekv run; without `resume`, start over in a folder that holds
  /// one (its finished cell files are deleted)
  bool force = false;
  int shard_index = 1;        ///< this shard, 1-based
  int shard_count = 1;        ///< N: the run computes cells k with k mod N == index - 1 (cells sorted by id)
  bool quiet = false;         ///< no progress output
  int64_t threads = 0;        ///< overrides model.threads when > 0
  /// Polled between examples and cells, and by plugin calls through the host's is_cancelled() (slow plugins that poll
  /// stop mid-call); a cancelled run keeps every example its cells finished (partial/, --resume continues) and writes
  /// no half file. A plugin call that does not poll runs to its end first.
  const std::atomic<bool>* cancel = nullptr;
  /// `--dump`: "kept" and/or "logits" (runner/records/dumps.hpp) for the cells this invocation computes; empty: none.
  std::set<std::string> dumps;
  /// Progress sink (done, total, what), called after each example once every pending cell has run on it (done and
  /// total count examples); default: a bar with ETA on a terminal, plain lines elsewhere.
  std::function<void(int64_t, int64_t, const std::string&)> progress;
};

/// What a run did.
struct RunSummary {
  int64_t cells_total = 0;     ///< cells of the whole sweep (full cache included)
  int64_t cells_computed = 0;  ///< computed by this invocation
  int64_t cells_skipped = 0;   ///< already complete (--resume) or in another shard
  double seconds = 0;
};

/// Runs `plan` into options.out_dir; a plan with runs ([sweep] over model.path / data.eval.seed) runs each of them
/// (runner/run/sweep_of_runs.hpp). Throws rkv::InputError for bad input (e.g. --resume over a different config),
/// rkv::Cancelled when cancelled (finished cells stay on disk).
RunSummary run_ablation(const RunPlan& plan, const RunOptions& options);

/// The checks of `plan` that need no model, no backend and no file: each task's settings (Task::check_plan). Throws
/// the first rkv::InputError, naming the config and key. run_ablation() makes them first; `validate` calls this.
void check_run_plan(const RunPlan& plan);

/// check_run_plan(), then, when the model file or folder at plan.model_path exists, the checks that need only its
/// headers (describe_model, a few MB and milliseconds): every sequence fits its context length and every cell suits
/// it (the checks a run makes right after loading the model). Returns false when the model is not there (nothing of
/// it checked), true otherwise. rkv::InputError as those checks, or naming the model file when its headers are bad.
bool check_run_plan_with_model_headers(const RunPlan& plan);

}  // namespace rkv
