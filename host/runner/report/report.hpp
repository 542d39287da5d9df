// report.md and plots/ of a run or merge, from its finished cells: the run's identity, the headline (what was run:
// the model's name and shape from the manifest, backend, each task's n, T and settings, budgets, baseline; then per
// task and budget every cell ranked by the task's primary metric with its paired difference against the baseline), the
// warnings the cells recorded, the sensitivity profile, and per task a table of every cell (mean, 95% CI, full-cache
// value, KV kept; reference-only metrics such as ppl_full once under it, with one CI), the paired comparisons against the baseline ([output] baseline; runner/report/comparisons.hpp) and
// the figures (runner/report/plots.hpp).
// Thread rules: one report per output folder at a time (the caller holds its OutputFolderLock).
#pragma once
#include <string>
#include <vector>

#include "core/folder.hpp"
#include "runner/records/cell_files.hpp"

namespace rkv {

/// Writes report.md (atomically) and plots/ (created) in `out`, through its descriptor. `resamples`: bootstrap
/// resamples of every CI; `missing_note`: cells of the sweep that no input holds ("" when complete), shown as a
/// warning. Reads out's profile.json when present (an unreadable one is a note in the report). Throws only on I/O
/// errors (rkv::InputError naming the file).
void write_report(const std::vector<CellData>& cells, const Folder& out, int resamples,
                  const std::string& missing_note);

}  // namespace rkv
