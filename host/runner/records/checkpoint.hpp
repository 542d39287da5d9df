// A cell's progress in an example-major run (runner/run/cells.hpp): partial/<cell id>.jsonl under the output folder
// holds the outcome of every example the cell has finished, one line appended and flushed (fsync) as each finishes,
// so an interrupted run loses at most the example in progress and `--resume` continues from the next. The cell file
// (cells/<id>.json, runner/records/cell_records.hpp) is written atomically once the cell has every example, and the
// checkpoint removed.
//
// Format (JSON Lines): line 1 {"checkpoint": 1, "cell_id", "base_sha256", "model_sha256", "backend",
// "compute_dtype"}; then one line per finished example {"outcome": <ExampleOutcomeRecord>, "kept": "<its --dump kept
// lines>"}. A last line an interruption cut short is ignored.
//
// Thread rules: one CellCheckpoint per cell, used from the run's thread; the folder's lock excludes other writers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runner/records/cell_records.hpp"

namespace rkv {

/// What a checkpoint must share with the run resuming it: the same non-swept config, model file, backend and dtype.
struct CheckpointIdentity {
  std::string base_sha256, model_sha256, backend, compute_dtype;
};

class CellCheckpoint {
 public:
  /// Opens partial/<cell_id>.jsonl of `out` (through its descriptor: a link or FIFO there is refused). With `resume`, the examples a matching checkpoint holds are kept:
  /// one of another base config, model file, backend or dtype is rkv::InputError naming the file and what differs (as
  /// a cell file is); an unreadable or corrupt one is reported on stderr and started over. Without `resume` (or when
  /// there is none) the checkpoint starts empty. Either way the file is rewritten with what is kept, then appended to.
  /// rkv::InputError when it cannot be written.
  CellCheckpoint(const Folder& out, const std::string& cell_id, CheckpointIdentity identity, bool resume);
  ~CellCheckpoint();
  CellCheckpoint(const CellCheckpoint&) = delete;
  CellCheckpoint& operator=(const CellCheckpoint&) = delete;

  /// The finished outcome of example `index` of `task` whose input hashes to `ids_sha256`, or null.
  const ExampleOutcomeRecord* find(const std::string& task, int64_t index, const std::string& ids_sha256) const;

  /// Records example `outcome` and its kept-dump lines, flushed to disk before returning. rkv::InputError when the
  /// write fails (the disk is full).
  void append(const ExampleOutcomeRecord& outcome, const std::string& kept_lines);

  /// Every recorded example's kept-dump lines, in the order they were recorded.
  std::string kept_lines() const;

  /// Every recorded example's outcome, in the order they were recorded.
  std::vector<ExampleOutcomeRecord> outcomes() const;

  /// Removes the file (the cell file now holds every example).
  void remove();

 private:
  void write_line(const std::string& line);

  /// One finished example: its outcome and its kept-dump lines.
  struct Entry {
    ExampleOutcomeRecord outcome;
    std::string kept;
    std::string line() const;  ///< its line in the file (with the newline)
  };

  Folder out_;
  std::string file_;  ///< partial/<cell id>.jsonl, below out_
  std::string path_;  ///< for messages
  int fd_ = -1;
  std::vector<Entry> entries_;
};

/// The checkpoint file of `cell_id` below its output folder: partial/<cell_id>.jsonl.
std::string checkpoint_file(const std::string& cell_id);

}  // namespace rkv
