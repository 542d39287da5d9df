// Task multi_question: one context, several questions on it (kvpress#170, SnapKV#18: a cache compressed once is
// reused for follow-up questions the compression never saw). The context is RULER's niah_multikey_1 with `questions`
// keys, one 7-digit value each, in the essay haystack (eval/ruler_text.hpp); question i asks for key i's value with
// RULER's single-answer question and answer prefix. Both ways of compressing are scored on the same prompts:
//
//   query_agnostic   the chat prompt up to the first question is prefilled and compressed once; each question (the
//                    rest of its prompt: question, end of the user turn, assistant opening, answer prefix) is fed to
//                    its own copy of the compressed cache and answered greedily (kvpress' pipeline with several
//                    questions)
//   query_aware      context + question i is prefilled and compressed as one prompt, so the scorer's observation
//                    window holds the question (SnapKV on LongBench), once per question
//
// (`[compression] query_aware` does not apply to this task: it computes both.) Each variant's token sequence is the
// same: context ids then question i's ids. Metrics, 100 x string_match_all(answer, value): "query_agnostic" per
// context (the mean over its questions), "query_aware" per (context, question); with the same questions in both, the
// two means are over the same answers. The prompt with the longest question fits the configured length, with the
// most haystack that does (bisection as in task_ruler.hpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runner/plan/run_plan.hpp"
#include "runner/tasks/task.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rkv {

struct MultiQuestionPrompt {
  std::vector<int32_t> context;                 ///< the chat prompt up to the questions (compressed once)
  std::vector<std::vector<int32_t>> questions;  ///< per question: the rest of its prompt
  std::vector<std::string> answers;             ///< per question: the value asked for
  int64_t context_tokens = 0;                   ///< the configured length
  int64_t example = 0;                          ///< index within the length
  int64_t max_new_tokens = 0;
};

/// The multi_question task (task_table()).
const Task& multi_question_task();

/// Builds `cfg.examples` contexts per length of `cfg` from `text` (the evaluation text), sample j at length n seeded
/// by ruler_example_seed(seed, "multi_question", n, j). Throws rkv::InputError when a length is too short for the
/// questions' needles.
std::vector<MultiQuestionPrompt> build_multi_question_prompts(const Tokenizer& tokenizer, const std::string& text,
                                                              const MultiQuestionConfig& cfg);

}  // namespace rkv
