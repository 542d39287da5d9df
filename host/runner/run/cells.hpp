// The cell loop of a run, example-major: each example is prefilled once (runner/run/examples.hpp), every pending cell
// runs on it -- the one cell sequence (runner/compress/cell.hpp), then the cell's decode policy while its task scores
// the compressed cache -- and the example is released before the next. Each cell's finished examples go to its
// checkpoint as they finish (runner/records/checkpoint.hpp); a cell's file is written atomically once it has every
// example. An interrupted run keeps every finished example, and --resume computes only the (cell, example) pairs it
// lacks, prefilling only the examples some pending cell still needs.
//
// Thread rules: the run's thread.
#pragma once
#include "runner/run/run_state.hpp"

namespace rkv {

/// Runs every pending cell of `s` on every example -- each distinct effective key once per example (a cell whose
/// effective inputs equal an earlier cell's takes its outcome and dumps) -- and writes each cell's file and dumps.
/// Progress steps once per example. Adds the cells written to summary.cells_computed. Polls cancellation between
/// examples and between cells.
void run_cells(RunState& s, RunSummary& summary);

}  // namespace rkv
