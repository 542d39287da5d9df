// The reproducibility manifest of a run's cells (runner/run_manifest.hpp).
#include "runner/run_manifest.hpp"

#include <string>

#include "core/errors.hpp"
#include "core/sha256.hpp"
#include "runner/task_needle.hpp"
#include "tokenizer/chat_template.hpp"

namespace rkv {

namespace {

std::string sha256_of(const std::string& text) { return sha256_hex(text.data(), text.size()); }

std::string vocab_sha256(const Tokenizer& tok) {
  std::string all;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    all += tok.token_text(id);
    all += '\0';
    all += std::to_string(tok.token_attr(id));
    all += '\n';
  }
  return sha256_of(all);
}

nlohmann::json task_settings(const RunPlan& plan) {
  nlohmann::json tasks = nlohmann::json::object();
  for (const std::string& task : plan.tasks) {
    if (task == "lm_fidelity")
      tasks[task] = {{"prefix_tokens", plan.eval.prefix_tokens},
                     {"continuation_tokens", plan.continuation_tokens},
                     {"continuation", "teacher-forced"}};
    else if (task == "needle")
      tasks[task] = {{"max_new_tokens", kNeedleAnswerTokens},
                     {"answer_prefix", kNeedleAnswerPrefix},
                     {"prompt_template_sha256", sha256_of(needle_prompt_template())},
                     {"query_aware", plan.query_aware}};
    else if (task == "ruler")
      tasks[task] = {{"subtasks", plan.ruler.subtasks},
                     {"context_tokens", plan.ruler.context_tokens},
                     {"examples", plan.ruler.examples},
                     {"seed", plan.ruler.seed},
                     {"max_new_tokens", plan.ruler.max_new_tokens == 0 ? nlohmann::json("per subtask (RULER)")
                                                                        : nlohmann::json(plan.ruler.max_new_tokens)},
                     {"scoring", "string_match_all"},
                     {"query_aware", plan.query_aware}};
    else if (task == "multi_question")
      tasks[task] = {{"context_tokens", plan.multi_question.context_tokens},
                     {"questions", plan.multi_question.questions},
                     {"examples", plan.multi_question.examples},
                     {"seed", plan.multi_question.seed},
                     {"max_new_tokens", plan.multi_question.max_new_tokens},
                     {"scoring", "string_match_all"}};
    else if (task == "longbench")
      tasks[task] = {{"max_context_tokens", plan.longbench.max_context_tokens},
                     {"max_new_tokens", "per dataset (LongBench dataset2maxlen unless overridden)"}};
  }
  return tasks;
}

}  // namespace

nlohmann::json reproducibility_manifest(const RunPlan& plan, const Tokenizer& tok) {
  nlohmann::json m;
  m["tokenizer"] = {{"description", tok.description()}, {"n_vocab", tok.n_vocab()},
                    {"vocab_sha256", vocab_sha256(tok)}, {"bos", tok.bos()}, {"eos", tok.eos()},
                    {"eot", tok.eot()}, {"add_bos", tok.add_bos_by_default()}};
  std::string name = "none";  // a model without a template (a base model) or with one no known name matches
  try {
    if (!tok.chat_template().empty()) name = ChatTemplate::for_tokenizer(tok).name();
  } catch (const InputError&) {
    name = "unrecognised";
  }
  m["chat_template"] = {{"name", name},
                        {"jinja_sha256", tok.chat_template().empty() ? "" : sha256_of(tok.chat_template())}};
  m["generation"] = {{"decoding", "greedy"}, {"stop_ids", tok.end_of_generation_ids()}, {"tasks", task_settings(plan)}};
  return m;
}

}  // namespace rkv
