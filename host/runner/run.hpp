// `ripplekv run`: an ablation sweep on a real model (issue "ablation runner"; DESIGN.md "Data flow").
//
// Output folder layout:
//   .ripplekv.lock           flock(2)ed by the one process writing the folder (run or merge); holds its pid
//   run.json                 the run's identity: run_id, config and base hashes, model hash, shard, cell ids
//   config.toml              a copy of the config
//   cells/<cell id>.json     one finished cell: its result records, per-example values, budgets, warnings; written
//                            atomically when the cell completes (an interrupted run loses no finished cell)
//   profile.json             the sensitivity profile (profiles/<signal>.json when several signals are swept)
//   results.jsonl            one line per cell x task x metric (keys documented in README "Results")
//   examples.jsonl           one line per cell x task x example
//   budgets.json             per cell and example, the budgets actually used
//   report.md, plots/        tables with CIs, paired comparisons against uniform, plots (PNG and SVG)
//   dumps/                   with --dump: kept positions and continuation logits per cell (runner/run_dumps.hpp)
//
// Thread rules: one run per process at a time (plugin instances are not shared across runs).
#pragma once
#include <atomic>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "runner/config.hpp"

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
  /// Polled between examples, and by plugin calls through the host's is_cancelled() (slow plugins that poll stop
  /// mid-call); a cancelled run writes nothing partial. A plugin call that does not poll runs to its end first.
  const std::atomic<bool>* cancel = nullptr;
  /// `--dump`: "kept" and/or "logits" (runner/run_dumps.hpp) for the cells this invocation computes; empty: none.
  std::set<std::string> dumps;
  /// Progress sink (done, total, what); default: a bar with ETA on a terminal, plain lines elsewhere.
  std::function<void(int64_t, int64_t, const std::string&)> progress;
};

/// What a run did.
struct RunSummary {
  int64_t cells_total = 0;     ///< cells of the whole sweep (full cache included)
  int64_t cells_computed = 0;  ///< computed by this invocation
  int64_t cells_skipped = 0;   ///< already complete (--resume) or in another shard
  double seconds = 0;
};

/// Runs `plan` into options.out_dir. Throws rkv::InputError for bad input (e.g. --resume over a different config),
/// rkv::Cancelled when cancelled (finished cells stay on disk).
RunSummary run_ablation(const RunPlan& plan, const RunOptions& options);

/// Assembles results.jsonl, examples.jsonl, budgets.json, report.md and plots in `out_dir` from the cell files of
/// `inputs` (output folders of shards of one sweep; may include out_dir itself). Corrupt or truncated cell files are
/// reported on stderr and skipped. Throws rkv::InputError when the inputs belong to different runs.
/// Takes out_dir's OutputFolderLock (runner/run_records.hpp) for the duration: a merge into a folder that a run or
/// another merge is writing is rkv::InputError naming the holder's pid. A non-empty out_dir that holds no ripplekv
/// run or merge is refused unless `force`. Writes merge.json (the inputs) beside the outputs.
void merge_outputs(const std::vector<std::string>& inputs, const std::string& out_dir, bool quiet, bool force = false);

/// merge_outputs without taking the lock: for a caller that already holds out_dir's OutputFolderLock.
void assemble_outputs(const std::vector<std::string>& inputs, const std::string& out_dir, bool quiet);

}  // namespace rkv
