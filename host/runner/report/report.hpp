// report.md and plots/ of a run or merge, from its finished cells: the run's identity, the warnings the cells
// recorded, the sensitivity profile, and per task a table of every cell (mean, 95% CI, full-cache value, KV kept),
// the paired comparisons against uniform (runner/report/comparisons.hpp) and the figures (runner/report/plots.hpp).
// Thread rules: one report per output folder at a time (the caller holds its OutputFolderLock).
#pragma once
#include <string>
#include <vector>

#include "runner/records/cell_files.hpp"

namespace rkv {

/// Writes `out_dir`/report.md (atomically) and `out_dir`/plots/ (must exist). `resamples`: bootstrap resamples of
/// every CI; `missing_note`: cells of the sweep that no input holds ("" when complete), shown as a warning.
/// Reads `out_dir`/profile.json when present (an unreadable one is a note in the report). Throws only on I/O errors.
void write_report(const std::vector<CellData>& cells, const std::string& out_dir, int resamples,
                  const std::string& missing_note);

}  // namespace rkv
