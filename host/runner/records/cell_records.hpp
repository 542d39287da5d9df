// The records of a run's cells: the outcome of a cell on one example, the cell files (cells/<id>.json) that hold them,
// and the profile files beside them; used by `ripplekv run`, `--resume`, `--shard` and `ripplekv merge`.
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

#include "runner/plan/run_plan.hpp"
#include "runner/records/output_folder.hpp"
#include "runner/tasks/example_input.hpp"

namespace rkv {

struct SensitivityProfile;

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
  /// per model layer: the per-prompt signal's s_l on this example (CellConfig::per_prompt_signal); else empty
  std::vector<double> prompt_profile;
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

/// True when cells/<id>.json exists and parses as a complete cell record. A corrupt file is reported on stderr (and
/// the cell is recomputed). A complete record of another base config (its base_sha256 differs from `base_sha256`:
/// the non-swept part of the config changed, even when run.json is missing or corrupt) is rkv::InputError: reusing
/// it would mix incomparable results.
/// A complete record computed on another backend or compute dtype than `backend` / `compute_dtype` is rkv::InputError
/// too (one run folder holds one backend's results).
bool cell_file_complete(const Folder& out, const std::string& cell_id, const std::string& base_sha256,
                        const std::string& backend, const std::string& compute_dtype);

/// Throws rkv::InputError when the complete cell file cells/<cell_id>.json records a model_sha256 other than
/// `model_sha256` (naming the file and both hashes): --resume must not mix cells of two model files in one report.
/// A cell file without the field (or an unreadable one) passes.
void check_cell_model(const Folder& out, const std::string& cell_id, const std::string& model_sha256);

/// The JSON of a cell file: the cell's identity, plugins (id, version, params, library sha256), budget settings and
/// per-example outcomes ("examples"). Pure.
nlohmann::json cell_record(const RunPlan& plan, const RunIdentity& id, const Cell& cell,
                           const std::vector<ExampleOutcomeRecord>& outcomes, double seconds);

/// Writes cells/<cell.id>.json atomically: cell_record().
void write_cell_file(const Folder& out, const RunPlan& plan, const RunIdentity& id, const Cell& cell,
                     const std::vector<ExampleOutcomeRecord>& outcomes, double seconds);

/// Writes profiles/<signal short id>-<cache key prefix>.json, and profile.json when `primary`.
void write_profile_file(const Folder& out, const SensitivityProfile& profile, bool primary);

}  // namespace rkv
