// `ripplekv compare RUN...`: one report over several finished run folders (their cells/) -- other models, seeds, datasets or
// configs -- with each cell aligned by its label (which carries the budget: "uniform + snapkv @ f=0.2"). The first
// run is the reference: every other run's value of a cell is compared with the reference run's value of the cell with
// the same label, metric by metric,
//   - paired when both cells hold the same examples (the same task example indices, and each example's input token
//     ids hash the same: ExampleInput::ids_sha256): mean of the per-example differences, its 95% percentile-bootstrap
//     CI and the sign-flip permutation p (eval/stats.hpp paired_bootstrap; Holm across the paired rows of one table
//     that print a p);
//   - unpaired otherwise (another model tokenizes the text differently, another seed draws other windows): difference
//     of the means with the two-sample bootstrap CI (eval/stats.hpp unpaired_bootstrap_ci), and the row says so.
// Writes report.md (with a figure per task and method under plots/: the primary metric against the budget, a line per
// run), comparison.jsonl (one row per run, cell, task and metric) and compare.json (the inputs and their names; the
// record that makes the folder ripplekv's own, runner/records/output_folder.hpp).
// Thread rules: one writer per output folder (compare_runs takes its OutputFolderLock); the rest are pure functions.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/folder.hpp"
#include "runner/records/cell_files.hpp"

namespace rkv {

/// One finished run folder as compare reads it.
struct ComparedRun {
  std::string name;    ///< its column heading (--name, else the folder's last component; made unique)
  std::string folder;  ///< as the user gave it
  std::vector<CellData> cells;  ///< its finished cells (those its run.json lists; every cell file when it lists none)
  std::string missing;  ///< the cells its run.json lists that it does not hold, in words ("" when none)
  std::string differs;  ///< the config keys whose values differ from the first run's config.toml ("" for the first)
};

/// The difference of one run's cell from the reference run's cell of the same label, on one task's metric.
struct RunDifference {
  bool paired = false;      ///< the same examples with the same inputs (see the top of this file)
  double difference = 0;    ///< mean(other) - mean(reference); for paired cells the mean per-example difference
  double ci_low = 0, ci_high = 0;  ///< 95% percentile-bootstrap CI of `difference`
  double p = NAN;           ///< sign-flip p (paired, n >= kMinExamplesForPValue), else NaN
  double p_holm = NAN;      ///< Holm-adjusted p across the table's rows that print a p, else NaN
  size_t n_reference = 0, n_other = 0;  ///< examples holding the metric on each side
  bool all_zero = false;  ///< paired and equal on every example: no p (nothing to permute), not in the Holm family
};

/// The difference of `other` from `reference` on `task`'s `metric` (see the top of this file); bootstrap seeded by
/// `seed` with `resamples` resamples (compare seeds it from the two cells' ids, task and metric: never from the run
/// names, so renaming or moving a folder changes no interval). Cells with no example of the metric on either side give n = 0 and NaN bounds.
/// Pure; thread-safe.
RunDifference run_difference(const CellData& reference, const CellData& other, const std::string& task,
                             const std::string& metric, uint64_t seed, int resamples);

/// Reads each folder's finished cells as merge reads one folder (the cells its run.json lists; every cell file when
/// it lists none; corrupt files skipped with a warning on stderr) and names the runs: `names[i]` when given (then one
/// per folder), else each folder's last component, with "#2", "#3" appended to repeats. Cells a run's run.json lists
/// but it does not hold are named in `missing` (and a warning on stderr); `differs` lists the config keys that differ
/// from the first run's recorded config.toml. Throws rkv::InputError naming the folder when one holds no finished cell, when fewer than two folders are given, or when the names given do not
/// match the folders in number or one is empty or repeated.
std::vector<ComparedRun> read_compared_runs(const std::vector<std::string>& folders,
                                            const std::vector<std::string>& names);

/// report.md's text for `runs` (at least two): what each run was (model, backend, tasks with n and T, budgets,
/// cells), then per task and metric one table with a row per cell label -- each run's mean [95% CI] and n, and each
/// other run's difference from the first, paired or unpaired. Appends one JSON object per run, cell, task and metric
/// to `rows` (an array) when not null. `resamples`: bootstrap resamples of every CI. Pure.
std::string comparison_report(const std::vector<ComparedRun>& runs, int resamples, nlohmann::json* rows);

/// Writes the comparison of `runs` (read_compared_runs of `folders`) into `out`: report.md, plots/, comparison.jsonl
/// and compare.json (which records `folders` and the run names); `preface` (markdown, may be empty) goes under
/// report.md's title. The caller holds `out`'s OutputFolderLock. Prints "wrote <path>" on stderr unless `quiet`.
void write_comparison(const std::vector<ComparedRun>& runs, const std::vector<std::string>& folders,
                      const Folder& out, bool quiet, const std::string& preface);

/// `ripplekv compare`: reads the runs (read_compared_runs), writes report.md, comparison.jsonl and compare.json into
/// out_dir (created; opened once and written through its descriptor under its OutputFolderLock). Refused with
/// rkv::InputError: out_dir being one of the inputs or inside one; a folder that holds a run or merge of its own (run.json, cells/,
/// merge.json) unless `force`; a non-empty folder that is not ripplekv's own (open_ripplekv_folder) unless `force`.
/// Prints "wrote <path>" on stderr unless `quiet`.
void compare_runs(const std::vector<std::string>& folders, const std::vector<std::string>& names,
                  const std::string& out_dir, bool quiet, bool force);

}  // namespace rkv
