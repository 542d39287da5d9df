// A task: what a run measures on each cell's compressed cache. A task is an entry of one table (task_table(), in
// task_table.cpp) with a driver file of its own; the runner calls the interface below and never tests a task's name
// (the line lm-evaluation-harness draws). Its settings are read by the plan (runner/plan/task_settings.hpp, the same
// names), and the generators of published benchmarks stay in host/eval/ (RULER, LongBench).
//
// An example's life: build_examples() gives its prompt tokens and the task's data (no model work; the run holds every
// example's TaskExample); the run prefills one example at a time; prepare() derives what every cell shares from that
// prefill (e.g. lm_fidelity's full-cache continuation), released with it; score() runs on the full cache and on each
// cell's compressed copy.
//
// Thread rules: a Task is stateless and immutable (the table's entries are shared); a TaskExample belongs to one run;
// score() uses the backend's rules.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "model/model.hpp"
#include "runner/compress/prefill.hpp"
#include "runner/decode/policy.hpp"
#include "runner/plan/run_plan.hpp"
#include "runner/tasks/example_input.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rkv {

/// A task's own data for one example (a passkey, a RULER sample's answers, a continuation, ...), or what prepare()
/// derived from its prefill (a reference's logits): each task derives its own and reads it back in score().
struct TaskPayload {
  virtual ~TaskPayload() = default;
};

/// One evaluation example a task built.
struct TaskExample {
  std::string task;                      ///< the task's name
  int64_t index = 0;                     ///< its index among the task's examples
  std::vector<int32_t> prompt;           ///< the T tokens prefilled once and compressed by every cell
  ExampleInput input;                    ///< where its tokens came from (examples.jsonl "input")
  std::shared_ptr<const TaskPayload> payload;  ///< the task's data (immutable once built)
};

/// A fresh copy of the cache an example's questions start from, with its own decode-policy session (null: none).
struct CacheCopy {
  std::unique_ptr<BackendCache> cache;
  std::unique_ptr<DecodeSession> decode;
};

/// The cache a task scores an example on.
struct ScoredCache {
  BackendCache* cache = nullptr;   ///< the full or compressed cache after the prompt; consumed (tokens are appended)
  int64_t start_pos = 0;           ///< the first position fed after the prompt: T, or the cache length after rerotate
  DecodeSession* decode = nullptr; ///< the cell's decode-policy session on `cache`; null: every appended entry is kept
  std::function<CacheCopy()> fork; ///< a fresh copy of the cache as it was before scoring (several questions on it)
};

/// What scoring one example gave.
struct TaskScore {
  std::map<std::string, double> values;  ///< metric -> value
  double decode_tokens_per_second = 0;   ///< 0 when the task does not decode
  size_t bytes_end = 0;                  ///< the most bytes a forked copy held; 0 when none was (read the cache's)
  std::vector<float> logits;             ///< teacher-forced continuation logits float32 [n, V] (`run --dump logits`)
};

class Task {
 public:
  virtual ~Task() = default;
  /// The name in [tasks] run and in records.
  virtual std::string name() const = 0;
  /// Throws rkv::InputError naming the config keys when a sequence this task feeds the model (prompt and answer or
  /// continuation) is longer than `context_length` (the model's trained context, > 0).
  virtual void check_fits_context(const RunPlan& plan, int64_t context_length) const = 0;
  /// Throws rkv::InputError naming the config keys for settings that cannot work on any model (checked by `validate`
  /// and by a run before anything is loaded); returns otherwise. Nothing by default.
  virtual void check_plan(const RunPlan& plan) const;
  /// The task's examples for `plan` in order, each with its prompt tokens and data. Reads the plan's files; polls
  /// cancellation (core/cancel.hpp). rkv::InputError for inputs the task cannot use (naming them).
  virtual std::vector<TaskExample> build_examples(const RunPlan& plan, const Tokenizer& tok,
                                                  const ModelConfig& model) const = 0;
  /// What every cell of `example` shares, derived once from its prefill `prompt` and passed to each score() of the
  /// example (the run releases it with the prefill); null by default.
  virtual std::shared_ptr<const TaskPayload> prepare(Backend& backend, const PrefilledPrompt& prompt,
                                                     const TaskExample& example) const;
  /// Scores `example` on `cache` (see ScoredCache) after its prefill `prompt`; `prepared` is what prepare() returned.
  virtual TaskScore score(Backend& backend, const Tokenizer& tok, const PrefilledPrompt& prompt,
                          const TaskExample& example, const TaskPayload* prepared, ScoredCache& cache) const = 0;
  /// The task's settings in the reproducibility manifest ("generation"."tasks"."<name>").
  virtual nlohmann::json manifest_settings(const RunPlan& plan) const = 0;
  /// True when the report's table shows the full cache's value beside each cell; false for a task whose metrics
  /// compare with the full cache by construction (lm_fidelity's KL).
  virtual bool report_full_cache_column() const { return true; }
  /// True when a lower value of `metric` is better (a divergence, a perplexity); false (the default) when higher is
  /// (accuracy, scores). Reports mark every metric's direction with it.
  virtual bool lower_is_better(const std::string& /*metric*/) const { return false; }
  /// The metric the report's headline ranks cells by, out of `metrics` (the ones the cells recorded, sorted; not
  /// empty): the task's own choice when recorded, else the first.
  virtual std::string primary_metric(const std::vector<std::string>& metrics) const { return metrics.front(); }
};

/// `wanted` when `metrics` holds it, else metrics.front() (Task::primary_metric's helper).
std::string metric_or_first(const std::vector<std::string>& metrics, const std::string& wanted);

/// Every task, in the order of runner/plan/task_settings.hpp's table (a unit test checks they match).
const std::vector<const Task*>& task_table();

/// The task called `name`, or null.
const Task* find_task(const std::string& name);

/// The tasks of plan.tasks, in its order. rkv::InputError for a name without a task (the plan checked them).
std::vector<const Task*> tasks_of(const RunPlan& plan);

/// Task::check_plan of every task `plan` runs: the first rkv::InputError stops it.
void check_task_plans(const RunPlan& plan);

/// The input record of a generated prompt: `source` and `id` name it, the hash covers the compressed part then the
/// question fed after compression (the whole prompt the model sees).
ExampleInput prompt_input(const std::string& source, const std::string& id, const std::vector<int32_t>& compressed,
                          const std::vector<int32_t>& question);

/// Throws rkv::InputError "<config>: <what> = <n> tokens is longer than the model's context length <ctx>; lower it"
/// when n > context_length.
void check_sequence_fits(const RunPlan& plan, int64_t n, const std::string& what, int64_t context_length);

/// The evaluation text of a generated task: every data.eval file's text followed by a blank line, concatenated.
std::string eval_text(const RunPlan& plan);

}  // namespace rkv
