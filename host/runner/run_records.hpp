// The records a run writes, and the output folder's bookkeeping (run.json, cells/<id>.json, profile.json), used by
// `ripplekv run`, `--resume`, `--shard` and `ripplekv merge`.
//
// Every file is written atomically (core/atomic_file.hpp). A cell file is written once its cell is complete, so an
// interrupted run keeps every finished cell; a corrupt or truncated cell file is reported and recomputed (--resume) or
// skipped (merge), never fatal.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runner/config.hpp"

namespace rkv {

struct SensitivityProfile;

/// Where an evaluation example's tokens came from, so a peer tool can replay exactly the same inputs (examples.jsonl
/// "input"). `ids_sha256` is the sha256 of the token ids as 32-bit little-endian integers, in the order the model sees
/// them: for lm_fidelity the window (prefix then continuation), for needle and longbench the whole prompt after the
/// chat template (compressed part then question).
struct ExampleInput {
  std::string source;          ///< lm_fidelity: the text file; needle: "needle"; longbench: the dataset name
  int64_t token_offset = -1;   ///< lm_fidelity: the window's first token index in `source` (its own tokenization)
  int64_t tokens = 0;          ///< token ids hashed
  int64_t prompt_tokens = 0;   ///< prompt length fed before generation or teacher forcing (T plus any question)
  std::string id;              ///< needle: "context=1024,depth=0.5,trial=2"; longbench: the record's _id; else ""
  std::string ids_sha256;
  nlohmann::json to_json() const;
  /// Throws rkv::InputError naming a key of another type (cell files may be hand-edited).
  static ExampleInput from_json(const nlohmann::json& j);
};

/// sha256 (hex) of `ids` as 32-bit little-endian integers.
std::string token_ids_sha256(const std::vector<int32_t>& ids);

/// The outcome of one cell on one evaluation example.
struct ExampleOutcomeRecord {
  std::string task;
  int64_t example = 0;
  std::map<std::string, double> values;       ///< metric -> value
  std::map<std::string, double> full_values;  ///< the full cache's values on the same example
  int64_t prefix_tokens = 0;                  ///< T
  int64_t budget_total = 0;                   ///< B
  std::vector<int64_t> budgets;               ///< per model layer (T for a layer kept whole)
  std::vector<std::vector<int64_t>> head_budgets;  ///< per model layer b[l, h] with a per-head allocator; else empty
  /// per model layer: the codec's bits with layer_bits = "profile", or a joint cell's bits (32 = float32); else empty
  std::vector<int64_t> layer_bits;
  /// per model layer with per-token bits (compression.codec.token_bits): entries of each token class over the KV
  /// heads, top class first, then those at the base bits or in the float tail (a shared layer: []); else empty
  std::vector<std::vector<int64_t>> token_class_entries;
  /// per model layer: the layer whose cache it reads ([compression.share]; itself when it keeps its own); empty when
  /// the cell shares no layer
  std::vector<int64_t> share_sources;
  /// per model layer: the option a joint cell's plan gave it ("f=0.5 int4", "shared", "whole" outside A); else empty
  std::vector<std::string> joint_plan;
  size_t kv_bytes = 0, kv_bytes_full = 0;   ///< cache bytes held after compression (keys, values, positions)
  size_t kv_bytes_end = 0;  ///< bytes of the entries held at the end of the task (BackendCache::bytes_in_use)
  double compress_seconds = 0;
  double decode_tokens_per_second = 0;        ///< 0 when the task does not decode
  std::vector<std::string> warnings;
  ExampleInput input;  ///< empty (source "") in cell files written before inputs were recorded
  nlohmann::json to_json() const;
  static ExampleOutcomeRecord from_json(const nlohmann::json& j);
};

/// What run.json records: the identity a resumed run and merged shards must share.
struct RunIdentity {
  std::string run_id, config_sha256, base_sha256;
  std::string model_sha256;  ///< set once the model is loaded
  std::string backend = "cpu";        ///< the backend the cells ran on (Backend::kind())
  std::string compute_dtype = "f32";  ///< its compute dtype (Backend::compute_dtype())
  /// The weights the model held ("quantized" or "f32": Model::weights after load, i.e. model.weights, or f32 where
  /// the backend needs it); set once the model is loaded.
  std::string weights = "f32";
  nlohmann::json manifest;            ///< set once the tokenizer is loaded (runner/run_manifest.hpp)
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

/// True when `out` holds a ripplekv run (run.json or cells/) or a merge (merge.json).
bool is_ripplekv_output_folder(const std::string& out);

/// Refuses (rkv::InputError naming the folder) an output folder that exists, is not empty (the lock file aside) and
/// holds no ripplekv run or merge: writing there would replace someone's report.md, results.jsonl or profile.json.
/// `force` accepts it. `what` names the command ("run", "merge") in the message.
void check_output_folder_is_ours(const std::string& out, bool force, const std::string& what);

/// Creates `out` (checking it is writable) and checks it may take this run, writing nothing else: with `resume`, an
/// existing run.json must carry the same base_sha256 (the non-swept config), else rkv::InputError says what changed.
/// Without `resume`, a folder that already holds finished cells is refused (use --resume or another folder) unless
/// `force`. Returns the run's identity (run id, config and base hashes; the rest is filled in by the caller).
/// run.json and config.toml are written later by write_run_identity(), once every check that needs the model has
/// passed, so a run refused by such a check leaves the folder (and a resumed run's cell list) as it found it.
RunIdentity prepare_output_folder(const RunPlan& plan, const std::string& out, bool resume, bool force = false);

/// Writes run.json (the cell list of this plan and shard) and config.toml into `out`, after prepare_output_folder()
/// accepted it. With `force` and not `resume` (start over) the finished cell files (cells/*.json) are deleted first.
/// Called once the run is known to start: before the first cell file, or when every cell is already complete.
void write_run_identity(const RunPlan& plan, const std::string& out, bool resume, int shard_index, int shard_count,
                        bool force = false);

/// True when cells/<id>.json exists and parses as a complete cell record. A corrupt file is reported on stderr (and
/// the cell is recomputed). A complete record of another base config (its base_sha256 differs from `base_sha256`:
/// the non-swept part of the config changed, even when run.json is missing or corrupt) is rkv::InputError: reusing
/// it would mix incomparable results.
/// A complete record computed on another backend or compute dtype than `backend` / `compute_dtype` is rkv::InputError
/// too (one run folder holds one backend's results).
bool cell_file_complete(const std::string& out, const std::string& cell_id, const std::string& base_sha256,
                        const std::string& backend, const std::string& compute_dtype);

/// Throws rkv::InputError when the complete cell file cells/<cell_id>.json records a model_sha256 other than
/// `model_sha256` (naming the file and both hashes): --resume must not mix cells of two model files in one report.
/// A cell file without the field (or an unreadable one) passes.
void check_cell_model(const std::string& out, const std::string& cell_id, const std::string& model_sha256);

/// Writes cells/<cell.id>.json atomically: the cell's identity, plugins (id, version, params, library sha256),
/// budget settings and per-example outcomes.
void write_cell_file(const std::string& out, const RunPlan& plan, const RunIdentity& id, const Cell& cell,
                     const std::vector<ExampleOutcomeRecord>& outcomes, double seconds);

/// Writes profiles/<signal short id>-<cache key prefix>.json, and profile.json when `primary`.
void write_profile_file(const std::string& out, const SensitivityProfile& profile, bool primary);

}  // namespace rkv
