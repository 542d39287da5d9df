// Task longbench: LongBench v1 (Bai et al. 2024) on the user's JSONL files (eval/longbench.hpp holds LongBench's port:
// its prompts, lengths, stop rules and metrics). Each record is one example: LongBench's prompt for its dataset
// (middle-truncated to [tasks.longbench] max_context_tokens, default the model's context length; the chat template
// unless the dataset skips it) is prefilled and compressed whole, then the answer is decoded greedily and scored with
// the dataset's metric. Metric: "<dataset>" = 100 x the example's score (LongBench's scale).
#pragma once
#include "runner/tasks/task.hpp"

namespace rkv {

/// The longbench task (task_table()).
const Task& longbench_task();

}  // namespace rkv
