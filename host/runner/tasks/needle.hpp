// Task needle (passkey retrieval): a sentence with a 5-digit pass key is hidden at a depth of Austen text, the
// question is asked with the model's chat template (a base model without one, e.g. Gemma 3 270M, gets the plain text
// "<bos>" + prompt + "\nThe pass key is"), and the model answers greedily on the compressed cache.
// A hit: the pass key's digits appear in the decoded first 16 generated tokens (Mohtashami & Jaggi, "Landmark
// Attention", 2023, passkey retrieval; the depth sweep as in "needle in a haystack" tests).
//
// Prompt (user turn): "There is an important pass key hidden inside a lot of irrelevant text. Find it and memorize it.
//   I will quiz you about the pass key.\n\n"
//   + haystack[0 : depth] + " The pass key is NNNNN. Remember it. NNNNN is the pass key. " + haystack[depth :]
//   + "\n\nWhat is the 5-digit pass key?"   (then the template's assistant opening and the answer prefix "The pass key is",
//   as in the passkey tests of Landmark Attention and LongLoRA)
// With query_aware = true only the part before the question is compressed and the question is fed
// after compression (kvpress's default); otherwise the whole prompt is compressed (SnapKV/PyramidKV on LongBench).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/model.hpp"
#include "runner/plan/run_plan.hpp"
#include "runner/tasks/task.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rkv {

struct NeedlePrompt {
  std::vector<int32_t> compressed_part;  ///< prompt tokens that are prefilled and compressed (T of them)
  std::vector<int32_t> question_part;    ///< tokens fed after compression (empty unless query_aware)
  std::string passkey;                   ///< 5 digits
  int64_t context_tokens = 0;            ///< the configured length
  double depth = 0;                      ///< where the needle sits, as a fraction of the haystack
  int64_t trial = 0;
};

/// Builds the prompts for every (context length, depth, trial) of `cfg` from `haystack_text` (the evaluation text).
/// Throws rkv::InputError when the text is too short for the longest context.
std::vector<NeedlePrompt> build_needle_prompts(const Tokenizer& tokenizer, const std::string& haystack_text,
                                               const NeedleConfig& cfg, bool query_aware);

/// Tokens the model may generate for its answer (greedy); the hit test reads them all.
inline constexpr int64_t kNeedleAnswerTokens = 16;

/// The answer prefix the assistant turn is primed with.
inline constexpr const char* kNeedleAnswerPrefix = "The pass key is";

/// The prompt's text with its variable parts named {haystack_before}, {key} and {haystack_after} (the chat template's
/// turns around it, then kNeedleAnswerPrefix): what the reproducibility manifest hashes.
std::string needle_prompt_template();

/// The needle task (task_table()).
const Task& needle_task();

/// Whether `answer` contains the pass key's digits.
bool needle_hit(const std::string& answer, const std::string& passkey);

}  // namespace rkv
