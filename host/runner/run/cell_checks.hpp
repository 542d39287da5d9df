// The checks of a run that need the model or the examples, made before any cell file is written: a config error
// found later would leave a folder that neither the fixed config nor --resume accepts.
//
// Thread rules: the run's thread.
#pragma once
#include "runner/run/run_state.hpp"

namespace rkv {

/// Every sequence `plan` feeds the model fits `context_length` (its trained context; <= 0: not stated, nothing to
/// check): the calibration windows when a cell reads a profile, and each task's prompts and answers
/// (Task::check_fits_context). rkv::InputError naming the config and keys.
void check_lengths_fit_context(const RunPlan& plan, int64_t context_length);

/// The checks of `plan` that need only the model's configuration (its headers: describe_model): the lengths above and
/// check_cell_on_model for every cell. What `validate` makes when the model file is there. rkv::InputError naming the
/// config, the cell and the key.
void check_plan_on_model_config(const RunPlan& plan, const ModelConfig& config);

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
