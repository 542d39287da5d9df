// The table of tasks (runner/tasks/task.hpp): one line per task, in the order of runner/plan/task_settings.hpp.
#include <algorithm>

#include "core/atomic_file.hpp"
#include "core/errors.hpp"
#include "runner/tasks/lm_fidelity.hpp"
#include "runner/tasks/longbench.hpp"
#include "runner/tasks/multi_question.hpp"
#include "runner/tasks/needle.hpp"
#include "runner/tasks/ruler.hpp"
#include "runner/tasks/task.hpp"

namespace rkv {

const std::vector<const Task*>& task_table() {
  static const std::vector<const Task*> table = {
      &lm_fidelity_task(), &needle_task(), &ruler_task(), &multi_question_task(), &longbench_task(),
  };
  return table;
}

std::string metric_or_first(const std::vector<std::string>& metrics, const std::string& wanted) {
  return std::find(metrics.begin(), metrics.end(), wanted) != metrics.end() ? wanted : metrics.front();
}

const Task* find_task(const std::string& name) {
  for (const Task* t : task_table())
    if (t->name() == name) return t;
  return nullptr;
}

std::vector<const Task*> tasks_of(const RunPlan& plan) {
  std::vector<const Task*> out;
  for (const std::string& name : plan.tasks) {
    const Task* t = find_task(name);
    if (!t) throw InputError(plan.config_path + ": task '" + name + "' has no driver (runner/tasks/task_table.cpp)");
    out.push_back(t);
  }
  return out;
}

void check_task_plans(const RunPlan& plan) {
  for (const Task* task : tasks_of(plan)) task->check_plan(plan);
}

void Task::check_plan(const RunPlan&) const {}

std::shared_ptr<const TaskPayload> Task::prepare(Backend&, const PrefilledPrompt&, const TaskExample&) const {
  return nullptr;
}

void check_sequence_fits(const RunPlan& plan, int64_t n, const std::string& what, int64_t context_length) {
  if (n > context_length)
    throw InputError(plan.config_path + ": " + what + " = " + std::to_string(n) + " tokens is longer than the model's " +
                     "context length " + std::to_string(context_length) + "; lower it");
}

ExampleInput prompt_input(const std::string& source, const std::string& id, const std::vector<int32_t>& compressed,
                          const std::vector<int32_t>& question) {
  std::vector<int32_t> ids = compressed;
  ids.insert(ids.end(), question.begin(), question.end());
  const auto n = static_cast<int64_t>(ids.size());
  return {source, -1, n, n, id, token_ids_sha256(ids)};
}

std::string eval_text(const RunPlan& plan) {
  std::string text;
  for (const auto& f : plan.eval.files) text += read_file(f) + "\n\n";
  return text;
}

}  // namespace rkv
