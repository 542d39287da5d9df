// Task ruler: RULER's synthetic subtasks (eval/ruler_text.hpp, ruler_subtasks.hpp) at context lengths given in
// tokens, answered greedily on the compressed cache and scored with RULER's string_match_all (eval/ruler_metrics.hpp).
//
// Prompt: the model's chat template with the sample's text as the user turn, then the answer prefix opening the
// assistant's turn (as RULER appends answer_prefix after its model template, and as the needle task primes its
// answer). Its length in tokens is at most the configured context length, with the most haystack that fits: the
// largest haystack size whose prompt fits, by bisection over sizes (RULER bisects the same way; its max_seq_length also
// counts tokens_to_generate, ours is the prompt's length T, which is what compression sees). Variable tracking's
// in-context example is fitted first to min(500, context_tokens / 2) tokens (RULER: 500).
//
// Sample j of subtask s at length n is seeded by splitmix64 mixing of (seed, s, n, j), so adding a subtask or a
// length leaves the other samples unchanged.
//
// Metrics: per example, "<subtask>@<n>" = 100 x string_match_all(prediction, answers) (RULER's scale), and "average"
// = the same value, so a cell's "average" is the mean over all its ruler examples (RULER's average over tasks when
// every subtask has the same number of examples).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runner/plan/run_plan.hpp"
#include "runner/tasks/task.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rkv {

struct RulerPrompt {
  std::vector<int32_t> compressed_part;  ///< prompt tokens that are prefilled and compressed (T of them)
  std::vector<int32_t> question_part;    ///< tokens fed after compression (empty unless query_aware)
  std::vector<std::string> answers;      ///< the references
  std::string subtask;
  int64_t context_tokens = 0;  ///< the configured length
  int64_t prompt_tokens = 0;   ///< the prompt's length in tokens (at most context_tokens)
  int64_t example = 0;         ///< index within (subtask, length)
  int64_t max_new_tokens = 0;  ///< the subtask's (or the configured) generation limit
};

/// Builds every (subtask, context length, example) of `cfg` in that order, from `text` (the evaluation text: the essay
/// haystack and the word pool). Throws rkv::InputError when a context length is too short for a subtask's smallest
/// haystack, or the text too small (no words, a vocabulary smaller than cwe needs).
std::vector<RulerPrompt> build_ruler_prompts(const Tokenizer& tokenizer, const std::string& text, const RulerConfig& cfg,
                                             bool query_aware);

/// The ruler task (task_table()).
const Task& ruler_task();

/// The metric of a prompt: "<subtask>@<context_tokens>", e.g. "niah_single_1@1024".
std::string ruler_metric(const RulerPrompt& prompt);

/// The seed of sample `example` of `subtask` at `context_tokens`: splitmix64 applied to seed, then xor-ed with the
/// FNV-1a hash of the name, the length and the index in turn, each followed by splitmix64.
uint64_t ruler_example_seed(uint64_t seed, const std::string& subtask, int64_t context_tokens, int64_t example);

/// The largest size in [lo, hi] for which `fits` holds, by bisection (assumes fits(lo) and that `fits` is monotone;
/// where it is not, the result still fits). Returns lo - 1 when fits(lo) is false.
int64_t ruler_largest_fitting(int64_t lo, int64_t hi, const std::function<bool(int64_t)>& fits);

}  // namespace rkv
