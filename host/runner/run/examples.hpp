// The evaluation examples of a run: each task's examples (Task::build_examples), built up front (tokens and task
// data only), and one at a time prefilled with what every pending cell's scorers need, prepared, and scored on the
// full cache (the reference every cell is reported beside). Only the example in hand holds a cache, so a run's memory
// is the weights, one example's full cache and statistics, and one cell's working copy, whatever the number of
// examples (docs/ARCHITECTURE.md "Data flow").
//
// Thread rules: the run's thread.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runner/compress/prefill.hpp"
#include "runner/compress/score_memo.hpp"
#include "runner/run/run_state.hpp"

namespace rkv {

/// Builds the examples of every task of the plan, in [tasks] run order, into s.examples. Errors of the tasks (inputs
/// they cannot use).
void build_examples(RunState& s);

/// An example while the cells run on it: its prefill (shared by every cell), its scores per scorer, what its task
/// prepared, and the full cache's outcome on it.
struct PrefilledExample {
  const Example* example = nullptr;
  PrefilledPrompt prompt;
  ScoreMemo memo;
  std::shared_ptr<const TaskPayload> prepared;  ///< Task::prepare's
  std::map<std::string, double> full_values;    ///< the full cache's value of each metric
  double full_decode_tps = 0;
  size_t full_kv_bytes = 0;        ///< the full cache's bytes after the prompt, sliding layers cut to their windows
  size_t full_kv_bytes_end = 0;    ///< the full cache's bytes after the task
  std::vector<float> full_logits;  ///< the full cache's continuation logits, kept only for `--dump logits`
};

/// Prefills `ex` with s.needs, runs its Task::prepare, and scores it on a copy of its full cache.
PrefilledExample prefill_example(RunState& s, const Example& ex);

}  // namespace rkv
