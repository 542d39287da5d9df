// The checks of a run that need the model or the examples, made before any cell file is written: a config error
// found later would leave a folder that neither the fixed config nor --resume accepts.
//
// Thread rules: the run's thread.
#pragma once
#include "runner/run/run_state.hpp"

namespace rkv {

/// Before any work: every sequence the run feeds the model fits its trained context (when the model states one);
/// every pending cell suits the model (check_cell_on_model, its route's layers, a per-head allocator with a route
/// whose scorers protect the same positions, a re-scoring decode policy with a decode-capable scorer). Sets
/// s.layers_A, s.scorers (every scorer of the pending cells) and s.needs (what their shared prefill computes).
/// rkv::InputError naming the config, the cell and the key.
void check_cells_on_model(RunState& s);

/// Once the examples are built: every pending compressed cell's global budget B is feasible (B >= |A|) on every
/// example, and every joint cell's plan fits its bytes. rkv::InputError naming the config, the cell and the key to
/// raise.
void check_budgets_on_examples(const RunState& s);

}  // namespace rkv
