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
//   dumps/index.json                {"cells": {"<cell id>": "<label>", ...}}: which cell each dump belongs to, for
//                                   every cell with a dump (updated as dumps are written).
// Each file is written atomically: a logits file when its example finishes, a cell's kept file when the cell
// completes (with its cell file; the lines of its finished examples wait in its checkpoint, runner/records/
// checkpoint.hpp), so an interrupted run keeps the dumps of what it finished and --resume completes them. Sizes: kept ~ examples x L x H_kv x b_l integers; logits 4 n V bytes per example
// (SmolLM2, n = 64: 12.6 MB).
// Thread rules: pure functions (the writers write only their own files).
#pragma once
#include <cstdint>
#include <set>
#include <string>

#include "core/folder.hpp"
#include <vector>

#include "backend/backend.hpp"

namespace rkv {

/// The dumps `run --dump` accepts: "kept", "logits".
const std::set<std::string>& dump_kinds();

/// Parses "kept", "logits" or "kept,logits". Throws rkv::InputError naming an unknown kind.
std::set<std::string> parse_dump_kinds(const std::string& list);

/// The kept-positions lines of one example's cache in the dumps/kept format (one line per layer and KV head; the
/// positions each head holds, ascending; `prompt_positions`: CompressedPrompt::prompt_positions, whose non-empty rows
/// give the original positions after re-rotation; may be null). Every line ends in '\n'.
std::string kept_dump_lines(Backend& backend, const BackendCache& cache, const std::string& task, int64_t example,
                            int64_t T, const std::vector<std::vector<int32_t>>* prompt_positions);

/// Writes dumps/logits/<cell id>/<task>-<example>.npy (float32 [n, V], row-major `logits`) atomically under `out` (through its descriptor, core/folder.hpp).
/// rkv::InputError when it cannot be written.
void write_logits_dump(const Folder& out, const std::string& cell_id, const std::string& task,
                       int64_t example, const std::vector<float>& logits, int64_t V);

/// Records `cell_id` -> `label` in dumps/index.json under `out` (read, updated, written atomically; an unreadable
/// index is replaced). Nothing when the index already has the cell. rkv::InputError when it cannot be written.
void index_dump(const Folder& out, const std::string& cell_id, const std::string& label);

/// Writes dumps/kept/<cell id>.jsonl atomically under `out` from `lines` (every example's kept_dump_lines, in
/// example order); nothing when `lines` is empty. rkv::InputError when it cannot be written.
void write_kept_dump(const Folder& out, const std::string& cell_id, const std::string& lines);

/// The bytes of a NumPy .npy file (format 1.0) holding float32 `values` of shape [rows, cols], C order.
std::string npy_float32(const std::vector<float>& values, int64_t rows, int64_t cols);

}  // namespace rkv
