// The outputs assembled from a run's finished cell files: results.jsonl (one line per cell x task x metric, keys in
// README "Results"), examples.jsonl (one line per cell x task x example), budgets.json (per cell and example the
// budgets actually used), then report.md and plots/ (runner/report/report.hpp). Called at the end of `ripplekv run`
// and by `ripplekv merge` (the shards of one sweep into one folder).
//
// Thread rules: one writer per output folder (the caller holds, or merge_outputs takes, its OutputFolderLock).
#pragma once
#include <string>
#include <vector>

#include "core/folder.hpp"
#include "runner/records/cell_files.hpp"

namespace rkv {

/// Assembles the outputs in `out_dir` from the cell files of `inputs` (output folders of shards of one sweep; may
/// include out_dir itself). out_dir is opened once (runner/records/output_folder.hpp open_ripplekv_folder: a link
/// there is refused) and written only through its descriptor. Corrupt or truncated cell files are reported on stderr and skipped. Throws
/// rkv::InputError when the inputs belong to different runs. Takes out_dir's OutputFolderLock
/// (runner/records/output_folder.hpp) for the duration: a merge into a folder that a run or another merge is writing is
/// rkv::InputError naming the holder's pid. A non-empty out_dir that holds no ripplekv run or merge is refused unless
/// `force`, and so is one that holds a run of its own that is not among the inputs. Writes merge.json (the inputs)
/// beside the outputs.
void merge_outputs(const std::vector<std::string>& inputs, const std::string& out_dir, bool quiet, bool force = false);

/// merge_outputs into the opened folder `out` (core/folder.hpp: every file written through its descriptor) without
/// taking the lock or writing merge.json: for a caller that already holds out's
/// OutputFolderLock (the end of a run). A run's own folder keeps only the cells its run.json lists (a resumed run may
/// have changed its sweep); cells the sweep lists that no input holds are named on stderr (merge) and in the report.
void assemble_outputs(const std::vector<std::string>& inputs, const Folder& out, bool quiet);

/// The bootstrap resamples of every CI of a report over `cells` (not empty): the first cell's bootstrap_resamples
/// when it is an integer in [100, 1000000], 2000 when absent, else 2000 with a warning on stderr naming the cell (a
/// hand-edited cell file may hold anything).
int report_resamples(const std::vector<CellData>& cells);

}  // namespace rkv
