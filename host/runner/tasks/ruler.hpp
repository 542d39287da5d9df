// Task ruler: RULER's synthetic subtasks (eval/ruler_text.hpp, ruler_subtasks.hpp) at context lengths given in
// tokens, answered greedily on the compressed cache and scored with RULER's string_match_all (eval/ruler_metrics.hpp).
//
// Sources ([tasks.ruler] haystack, word_pool): RULER's own, the Paul Graham essays and wonderwords' lists from the
// asset cache (eval/ruler_assets.hpp; the defaults), or the evaluation text ([data.eval] files) for either.
//
// Prompt: the model's chat template with the sample's text as the user turn, then the answer prefix opening the
// assistant's turn (as RULER appends answer_prefix after its model template, and as the needle task primes its
// answer); a model without a chat template (a base model) gets RULER's "base" template, BOS + text + " " + answer
// prefix. Its length in tokens is at most the configured context length (less the answer's max_new_tokens with
// length_includes_answer = true, RULER's max_seq_length; by default the prompt's length T, which is what compression
// sees), with the most haystack that fits: the largest haystack size whose prompt fits, by bisection over sizes in
// [ruler_min_size, min(target, ruler_max_size)] (RULER bisects the same way). Each probe tokenizes the whole prompt:
// at 32768 tokens a prompt takes about 16 probes and 0.6 s with SmolLM2's tokenizer on one core. Variable tracking's
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
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/ruler_text.hpp"
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

/// Builds every (subtask, context length, example) of `cfg` in that order from `sources` (the essay haystack and the
/// word pools; cfg's haystack and word_pool are not read here, ruler_sources_of applies them). Each prompt has at most
/// context_tokens tokens (context_tokens - max_new_tokens with cfg.length_includes_answer). Throws rkv::InputError
/// when a length is too short for a subtask's smallest haystack, or the sources too small (no essay words, no key
/// words, a word pool smaller than cwe needs to fill the length).
std::vector<RulerPrompt> build_ruler_prompts(const Tokenizer& tokenizer, const RulerSources& sources,
                                             const RulerConfig& cfg, bool query_aware);

/// The sources plan.ruler names: RULER's essays (read_ruler_essays(plan.ruler.essays_dir)) or the evaluation text
/// (eval_text(plan)) as the haystack, wonderwords' lists (read_ruler_word_lists(plan.ruler.words_dir)) or the
/// evaluation text's vocabulary as the word pools. rkv::InputError naming a missing asset file and saying to run
/// scripts/fetch-assets.
RulerSources ruler_sources_of(const RunPlan& plan);

/// The manifest's record of plan.ruler's sources: {"haystack": {"source": "paul_graham", "package", "folder",
/// "files" (count), "words" (count), "sha256" (of the concatenated essays)} or {"source": "eval_text", "files"
/// (data.eval paths)}, "word_pool": {"source": "wonderwords", "package", "folder", "nouns", "adjectives", "verbs"
/// (counts), "sha256" (of the three lists)} or {"source": "eval_text", "files"}}. Reads the asset files again;
/// rkv::InputError as ruler_sources_of.
nlohmann::json ruler_sources_manifest(const RunPlan& plan);

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
