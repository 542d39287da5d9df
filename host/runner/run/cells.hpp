// The cell loop of a run: every pending cell on every example, through the one cell sequence
// (runner/compress/cell.hpp), then the cell's decode policy while its task scores the compressed cache; each finished
// cell written atomically (runner/records/cell_records.hpp), so an interrupted run keeps every finished cell.
//
// Thread rules: the run's thread.
#pragma once
#include "runner/run/run_state.hpp"

namespace rkv {

/// Computes every pending cell of `s` on every example -- each distinct effective key once (a cell whose effective
/// inputs equal an earlier cell's reuses its outcomes and dumps) -- and writes its cell file and dumps. Adds the cells
/// it computed to summary.cells_computed. Polls cancellation between examples.
void run_cells(RunState& s, RunSummary& summary);

}  // namespace rkv
