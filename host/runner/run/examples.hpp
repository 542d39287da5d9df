// The evaluation examples of a run: each task's examples (Task::build_examples), each prefilled once with what every
// pending cell's scorers need, and the full cache's outcome on each (the reference every cell is reported beside).
//
// Thread rules: the run's thread.
#pragma once
#include "runner/run/run_state.hpp"

namespace rkv {

/// Builds the examples of every task of the plan (in [tasks] run order), prefills each once with s.needs and runs
/// Task::prepare on it. Polls cancellation between examples. Errors of the tasks (inputs they cannot use).
void prefill_examples(RunState& s);

/// Scores every example on a copy of its full cache: full_values, its decode speed and bytes (and, for `--dump
/// logits`, its continuation logits).
void score_full_cache(RunState& s);

}  // namespace rkv
