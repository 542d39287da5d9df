// The output folder of a run or merge: one writer at a time (a lock), never someone else's folder, and run.json, the
// identity a resumed run and merged shards must share (docs/ARCHITECTURE.md "Reproducibility").
//
// Layout of a run's folder:
//   .ripplekv.lock           flock(2)ed by the one process writing the folder (run or merge); holds its pid
//   run.json                 the run's identity: run_id, config and base hashes, shard, cell ids, labels and groups
//   config.toml              a copy of the config
//   cells/<cell id>.json     one finished cell (runner/records/cell_records.hpp), written atomically when it completes
//   partial/<cell id>.jsonl  the examples an unfinished cell has finished (runner/records/checkpoint.hpp)
//   profile.json             the sensitivity profile (profiles/<signal>-<key>.json when several signals are swept)
//   results.jsonl, examples.jsonl, budgets.json, report.md, plots/   assembled from the cells (runner/report/)
//   dumps/                   with --dump (runner/records/dumps.hpp)
//
// Thread rules: one writer per folder (the lock); the functions are called from that writer's thread.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "runner/plan/run_plan.hpp"

namespace rkv {

/// What run.json records: the identity a resumed run and merged shards must share.
struct RunIdentity {
  std::string run_id, config_sha256, base_sha256;
  std::string model_sha256;  ///< set once the model is loaded
  std::string backend = "cpu";        ///< the backend the cells ran on (Backend::kind())
  std::string compute_dtype = "f32";  ///< its compute dtype (Backend::compute_dtype())
  /// The weights the model held ("quantized" or "f32": Model::weights after load, i.e. model.weights, or f32 where
  /// the backend needs it); set once the model is loaded.
  std::string weights = "f32";
  nlohmann::json manifest;            ///< set once the tokenizer is loaded (runner/records/manifest.hpp)
};

/// An exclusive lock on an output folder: flock(2) on `<out>/.ripplekv.lock`, which records the holder's pid. Held
/// until destroyed (or the process ends, however it ends: a killed run leaves no stale lock). Locks of one folder
/// exclude each other across processes and within one (each is its own open file description).
class OutputFolderLock {
 public:
  /// Creates `out` if needed and takes the lock without waiting. Throws rkv::InputError naming the folder and the
  /// holder's pid when another writer holds it, or when the folder cannot be created or the lock file written.
  explicit OutputFolderLock(const std::string& out);
  ~OutputFolderLock();
  OutputFolderLock(const OutputFolderLock&) = delete;
  OutputFolderLock& operator=(const OutputFolderLock&) = delete;

 private:
  int fd_ = -1;
};

/// True when `out` holds a ripplekv run (run.json, cells/ or partial/) or a merge (merge.json).
bool is_ripplekv_output_folder(const std::string& out);

/// Refuses (rkv::InputError naming the folder) an output folder that exists, is not empty (the lock file aside) and
/// holds no ripplekv run or merge: writing there would replace someone's report.md, results.jsonl or profile.json.
/// `force` accepts it. `what` names the command ("run", "merge") in the message.
void check_output_folder_is_ours(const std::string& out, bool force, const std::string& what);

/// Creates `out` (checking it is writable) and checks it may take this run, writing nothing else: with `resume`, an
/// existing run.json must carry the same base_sha256 (the non-swept config), else rkv::InputError says what changed.
/// Without `resume`, a folder that already holds finished cells or checkpoints is refused (use --resume or another
/// folder) unless `force`. Returns the run's identity (run id, config and base hashes; the rest is filled in by the caller).
/// run.json and config.toml are written later by write_run_identity(), once every check that needs the model has
/// passed, so a run refused by such a check leaves the folder (and a resumed run's cell list) as it found it.
RunIdentity prepare_output_folder(const RunPlan& plan, const std::string& out, bool resume, bool force = false);

/// Writes run.json (the cell list of this plan and shard) and config.toml into `out`, after prepare_output_folder()
/// accepted it. With `force` and not `resume` (start over) the finished cell files (cells/*.json) and checkpoints
/// (partial/*.jsonl) are deleted first.
/// Called once the run is known to start: before the first cell file, or when every cell is already complete.
void write_run_identity(const RunPlan& plan, const std::string& out, bool resume, int shard_index, int shard_count,
                        bool force = false);

}  // namespace rkv
