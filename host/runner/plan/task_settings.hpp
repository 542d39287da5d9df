// The settings of each task ([tasks] and [tasks.<name>] of a run config) and the table that reads them. The table
// here names every task the plan accepts; runner/tasks/task_table.cpp holds the driver of each, under the same name
// (a unit test checks that the two tables list the same tasks). docs/ARCHITECTURE.md "The runner's folders and
// include order" says how to add a task.
//
// Thread rules: plain data; the readers are pure functions of the TOML.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <toml++/toml.h>
#include <vector>

#include "eval/ruler_subtasks.hpp"
#include "runner/plan/toml_reader.hpp"

namespace rkv {

struct RunPlan;

/// [tasks.needle]: passkey retrieval at each (context length, depth), `trials` passkeys each (runner/tasks/needle.hpp).
struct NeedleConfig {
  std::vector<int64_t> context_tokens = {1024};
  std::vector<double> depths = {0.1, 0.3, 0.5, 0.7, 0.9};
  int64_t trials = 2;  ///< passkeys per (length, depth)
  uint64_t seed = 7;
};

/// Where RULER's essay haystack comes from: RULER's Paul Graham essays (the default) or the evaluation text.
enum class RulerHaystackSource { PaulGraham, EvalText };
/// Where RULER's word pools (niah word keys, cwe's words) come from: wonderwords' lists (the default) or the
/// evaluation text's vocabulary.
enum class RulerWordSource { Wonderwords, EvalText };

/// The config names of the sources: "paul_graham" / "eval_text", "wonderwords" / "eval_text".
std::string ruler_haystack_name(RulerHaystackSource source);
std::string ruler_word_pool_name(RulerWordSource source);

/// [tasks.ruler]: RULER's synthetic subtasks (eval/ruler_subtasks.hpp) at each context length.
struct RulerConfig {
  std::vector<std::string> subtasks = ruler_subtask_names();  ///< names; default: every subtask, in table order
  std::vector<int64_t> context_tokens = {1024};  ///< lengths in tokens (chat template and answer prefix included)
  int64_t examples = 4;                          ///< samples per (subtask, context length)
  uint64_t seed = 42;                            ///< RULER's default random_seed
  int64_t max_new_tokens = 0;                    ///< 0: RULER's tokens_to_generate per subtask; else this for all
  /// false: the prompt fills context_tokens; true: the prompt and its max_new_tokens answer do (RULER's
  /// max_seq_length), so a length equal to the model's context can run
  bool length_includes_answer = false;
  RulerHaystackSource haystack = RulerHaystackSource::PaulGraham;  ///< `haystack`
  RulerWordSource word_pool = RulerWordSource::Wonderwords;        ///< `word_pool`
  std::string essays_dir;  ///< the Paul Graham essays' folder (eval/ruler_assets.hpp ruler_essays_dir of the cache)
  std::string words_dir;   ///< wonderwords' lists' folder (ruler_wonderwords_dir of the cache)
};

/// [tasks.multi_question]: one context, several questions on it (runner/tasks/multi_question.hpp).
struct MultiQuestionConfig {
  std::vector<int64_t> context_tokens = {1024};  ///< prompt lengths in tokens with the longest question
  int64_t questions = 4;                         ///< keys hidden in each context, each asked once
  int64_t examples = 4;                          ///< contexts per length
  uint64_t seed = 42;
  int64_t max_new_tokens = 32;                   ///< the answer is one 7-digit number
};

struct LongBenchDatasetConfig {
  std::string prompt;        ///< template with {context} and {input}
  int64_t max_new_tokens = 0;
};

/// [tasks.longbench]: LongBench v1 JSONL files the user supplies (eval/longbench.hpp).
struct LongBenchConfig {
  std::vector<std::string> files;
  int64_t max_context_tokens = 0;  ///< 0: the model's context length
  std::map<std::string, LongBenchDatasetConfig> datasets;  ///< overrides of LongBench's defaults
};

/// One task as the plan knows it: its name (in [tasks] run), the reader of its [tasks.<name>] table, which checks
/// every key and value and stores them in the plan (errors name the file, line and key), and, when the task cannot
/// run on its defaults alone, the check made when it is in `run` (null: none).
struct TaskSection {
  std::string name;
  void (*read)(const TomlContext& c, const toml::table& section, RunPlan& plan);
  void (*check_runnable)(const TomlContext& c, const RunPlan& plan);
};

/// Every task, in the order `validate` and error messages list them: lm_fidelity, needle, ruler, multi_question,
/// longbench.
const std::vector<TaskSection>& task_sections();

/// The names of task_sections(), in order.
std::vector<std::string> task_names();

/// [tasks] of a run config: `run` (known names, at least one) and each task's table, read by its TaskSection. A task
/// that cannot run without a table's settings (longbench without files) is refused when it is in `run`.
void read_tasks_section(const TomlContext& c, const toml::table& tasks, RunPlan& plan);

}  // namespace rkv
