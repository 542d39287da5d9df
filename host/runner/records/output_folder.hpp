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
// A sweep over the run-level keys ([sweep] "model.path", "data.eval.seed"; runner/plan/run_axes.hpp) writes instead:
//   runs.json                its runs: name, folder (runs/<name>) and run-level values
//   config.toml              the sweep's config
//   runs/<name>/             each run's own folder, laid out as above
//   report.md, comparison.jsonl, compare.json, plots/   the runs side by side (runner/report/compare_runs.hpp)
//
// Every file is created, renamed and removed through the folder's descriptor (core/folder.hpp), so nothing planted
// in it (links, FIFOs, foreign folders) can redirect a write outside it.
//
// Thread rules: one writer per folder (the lock); the functions are called from that writer's thread.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/folder.hpp"
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

/// An exclusive lock on an output folder: flock(2) on `<out>/.ripplekv.lock` (opened through the folder's descriptor,
/// never through a link: a link, FIFO or other kind of file planted there is refused), which records the holder's
/// pid; a lock file with more than one name (a hard link to a file elsewhere, which would be truncated) is refused
/// too. Held until destroyed (or the process ends, however it ends: a killed run leaves no stale lock). Locks of one
/// folder exclude each other across processes and within one (each is its own open file description).
class OutputFolderLock {
 public:
  /// Takes the lock without waiting. Throws rkv::InputError naming the folder and the holder's pid when another
  /// writer holds it, or when the lock file cannot be opened or written.
  explicit OutputFolderLock(const Folder& out);
  ~OutputFolderLock();
  OutputFolderLock(const OutputFolderLock&) = delete;
  OutputFolderLock& operator=(const OutputFolderLock&) = delete;

  /// Throws rkv::InputError naming the folder when `.ripplekv.lock` is no longer the file this lock holds (someone
  /// removed or replaced it, so a second writer could have taken a new one), or when the folder's path no longer
  /// names the folder that was opened (moved away, maybe replaced by another run's): writers call it before each
  /// result they write and before assembling the report from the cells at the path. flock(2) cannot stop an unlink or
  /// a rename; this turns one into a clear stop instead of two writers, or two runs, in one report.
  void check_held() const;

 private:
  int fd_ = -1;
  std::optional<Folder> out_;
  uint64_t dev_ = 0, ino_ = 0;  ///< the lock file held
};

/// The schema ids ripplekv writes into its records ("schema" key), so that a folder counts as ripplekv's by what its
/// records say, never by file names alone.
inline constexpr const char* kRunSchema = "ripplekv.run/1";
inline constexpr const char* kMergeSchema = "ripplekv.merge/1";
inline constexpr const char* kAnalysisSchema = "ripplekv.analysis/1";
inline constexpr const char* kCompareSchema = "ripplekv.compare/1";
inline constexpr const char* kRunsSchema = "ripplekv.runs/1";

/// True when `record` is the JSON text of ripplekv's own run.json (`schema` kRunSchema: a run_id of 16 hex digits,
/// config and base sha256 of 64, a cells array), merge.json (kMergeSchema: an inputs array of strings) or
/// analysis.json (kAnalysisSchema: a model sha256 of 64 hex digits, fractions and D arrays), compare.json
/// (kCompareSchema: the schema key, and inputs and names arrays of strings) or runs.json (kRunsSchema, a sweep over
/// run-level keys, runner/run/run_axes.hpp: the schema key and a runs array of objects with string name and folder).
/// `schema` selects which.
/// Records written before the schema key existed are recognised by the same fields. Never throws.
bool is_ripplekv_record(const std::string& record, const std::string& schema);

/// True when `out` holds a run.json, merge.json, analysis.json, compare.json or runs.json that is ripplekv's own record (is_ripplekv_record):
/// only then is a non-empty folder ripplekv's to write in.
bool is_ripplekv_output_folder(const Folder& out);

/// Opens (creating it when missing) the output folder `out` of command `what` ("run", "merge", "analyze") and checks
/// it may be written: a non-empty folder (the lock file aside) that holds no ripplekv record (is_ripplekv_output_folder)
/// is rkv::InputError naming it and one of its files (its report.md, results.jsonl or profile.json would be
/// overwritten) unless `force`. The folder itself must not be a link (core/folder.hpp).
Folder open_ripplekv_folder(const std::string& out, bool force, const std::string& what);

/// Checks the output folder may take this run, writing nothing: with `resume`, an existing
/// run.json must carry the same base_sha256 (the non-swept config), else rkv::InputError says what changed. Without
/// `resume`, a folder that already holds finished cells or checkpoints is refused (use --resume or another folder)
/// unless `force`. Returns the run's identity (run id, config and base hashes; the rest is filled in by the caller).
/// run.json and config.toml are written later by write_run_identity(), once every check that needs the model has
/// passed, so a run refused by such a check leaves the folder (and a resumed run's cell list) as it found it.
RunIdentity prepare_output_folder(const RunPlan& plan, const Folder& out, bool resume, bool force = false);

/// Creates cells/ and writes run.json (the cell list of this plan and shard) and config.toml into `out`, after prepare_output_folder()
/// accepted it. With `force` and not `resume` (start over) in a folder whose run.json is ripplekv's run record, the
/// finished cell files (cells/*.json) and checkpoints (partial/*.jsonl) are deleted first (in any other folder
/// nothing is deleted) (through the folder's descriptor: a cells/ or partial/ that is a link is
/// refused, never followed).
/// Called once the run is known to start: before the first cell file, or when every cell is already complete.
void write_run_identity(const RunPlan& plan, const Folder& out, bool resume, int shard_index, int shard_count,
                        bool force = false);

}  // namespace rkv
