// `run --dump kept|logits`: what a cell decided and what the model then predicted, per example, in files a peer tool
// or an inference engine reads without ripplekv (the file format is the interface; python/ripplekv has readers).
//
//   dumps/kept/<cell id>.jsonl      one line per (task, example, layer, KV head) of a compressed cell:
//                                   {"task", "example", "layer", "head", "T", "positions": [p0, p1, ...]}
//                                   positions: the original prompt positions (0 .. T-1) that head keeps after
//                                   compression, ascending (with [compression] rerotate, the positions before
//                                   re-rotation); layers left whole list every position, a shared layer
//                                   ([compression.share]) none. The full-cache cell has none.
//   dumps/logits/<cell id>/<task>-<example>.npy
//                                   lm_fidelity: the continuation logits the cell's cache gave, float32 [n, V] (row t:
//                                   the logits after continuation token t, teacher-forced), NumPy .npy format 1.0
//                                   (little-endian '<f4', C order); the full-cache cell's are the reference.
// Files of a cell are written atomically when the cell completes (with its cell file), so an interrupted run keeps
// the dumps of its finished cells; cells a --resume skips keep whatever dumps they had. Sizes: kept ~ examples x L x H_kv x b_l integers; logits 4 n V bytes per example
// (SmolLM2, n = 64: 12.6 MB).
// Thread rules: one CellDump per cell, used by one thread.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.hpp"

namespace rkv {

/// The dumps `run --dump` accepts: "kept", "logits".
const std::set<std::string>& dump_kinds();

/// Parses "kept", "logits" or "kept,logits". Throws rkv::InputError naming an unknown kind.
std::set<std::string> parse_dump_kinds(const std::string& list);

/// A cell's dumps, collected example by example and written by write().
class CellDump {
 public:
  /// `kinds` from parse_dump_kinds (empty: dump nothing, every call is a no-op).
  CellDump(std::string out_dir, std::string cell_id, std::set<std::string> kinds);

  bool wants(const std::string& kind) const { return kinds_.count(kind) > 0; }

  /// Records the positions every (layer, KV head) of `cache` holds for `example` of `task` (prompt of T tokens).
  /// `prompt_positions`: CompressedPrompt::prompt_positions (rows non-empty after re-rotation: the original positions
  /// in cache order); may be null.
  void add_kept(Backend& backend, const BackendCache& cache, const std::string& task, int64_t example, int64_t T,
                const std::vector<std::vector<int32_t>>* prompt_positions);

  /// Records continuation logits float32 [n, V] (row-major) of `example` of `task`.
  void add_logits(const std::string& task, int64_t example, const std::vector<float>& logits, int64_t V);

  /// The same dumps under another cell id (a cell whose effective inputs equal an earlier cell's reuses its outcomes).
  CellDump for_cell(const std::string& cell_id) const {
    CellDump copy = *this;
    copy.cell_ = cell_id;
    return copy;
  }

  /// Writes the collected dumps (atomically, each file whole). Throws rkv::InputError when a file cannot be written.
  void write() const;

 private:
  std::string out_, cell_;
  std::set<std::string> kinds_;
  std::string kept_lines_;
  struct Logits {
    std::string task;
    int64_t example = 0, rows = 0, V = 0;
    std::vector<float> values;
  };
  std::vector<Logits> logits_;
};

/// The bytes of a NumPy .npy file (format 1.0) holding float32 `values` of shape [rows, cols], C order.
std::string npy_float32(const std::vector<float>& values, int64_t rows, int64_t cols);

}  // namespace rkv
