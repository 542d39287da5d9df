#include "runner/tasks/needle.hpp"

#include <random>
#include <sstream>

#include "core/errors.hpp"
#include "core/sha256.hpp"
#include "runner/decode/loop.hpp"
#include "runner/tasks/prompt_split.hpp"
#include "tokenizer/chat_template.hpp"

namespace rkv {

namespace {
const char* kIntro =
    "There is an important pass key hidden inside a lot of irrelevant text. Find it and memorize it. I will quiz you "
    "about the pass key.\n\n";
const char* kQuestion = "\n\nWhat is the 5-digit pass key?";
// The assistant's answer is primed with this prefix, as in the passkey evaluations of Landmark Attention and
// LongLoRA, so that a small chat model answers with the number rather than a paraphrase.
const char* kAnswerPrefix = kNeedleAnswerPrefix;

std::string needle_sentence(const std::string& key) {
  return " The pass key is " + key + ". Remember it. " + key + " is the pass key. ";
}
}  // namespace

std::string needle_prompt_template() {
  return std::string(kIntro) + "{haystack_before}" + needle_sentence("{key}") + "{haystack_after}" + kQuestion +
         " <assistant> " + kAnswerPrefix;
}

namespace {

/// The prompt around `user_text` (intro, context, question): the model's chat template with the answer primed, or,
/// for a model without one (a base model such as Gemma 3 270M), the plain text "<bos>{user_text}\n{answer prefix}".
std::string needle_prompt_text(const Tokenizer& tok, const std::string& user_text) {
  if (tok.chat_template().empty()) {
    const std::string bos = tok.bos() >= 0 ? tok.token_text(tok.bos()) : "";
    return bos + user_text + "\n" + kAnswerPrefix;
  }
  return ChatTemplate::for_tokenizer(tok).apply({{"user", user_text}}, true) + kAnswerPrefix;
}

}  // namespace

std::vector<NeedlePrompt> build_needle_prompts(const Tokenizer& tok, const std::string& haystack_text,
                                               const NeedleConfig& cfg, bool query_aware) {
  const std::vector<int32_t> hay = tok.encode(haystack_text, false, false);
  // Tokens the template, intro, needle and question add (measured on an empty haystack).
  const std::string empty_prompt =
      needle_prompt_text(tok, std::string(kIntro) + needle_sentence("00000") + kQuestion);
  const int64_t overhead = static_cast<int64_t>(tok.encode(empty_prompt, false, true).size());
  std::vector<NeedlePrompt> out;
  std::mt19937_64 rng(cfg.seed);
  for (int64_t len : cfg.context_tokens) {
    const int64_t n_hay = len - overhead;
    if (n_hay < 16)
      throw InputError("needle: context_tokens " + std::to_string(len) + " leaves no room for text (the prompt's " +
                       "fixed part takes " + std::to_string(overhead) + " tokens)");
    if (static_cast<int64_t>(hay.size()) < n_hay)
      throw InputError("needle: the evaluation text has " + std::to_string(hay.size()) + " tokens, fewer than the " +
                       std::to_string(n_hay) + " a context of " + std::to_string(len) + " needs");
    for (double depth : cfg.depths) {
      for (int64_t trial = 0; trial < cfg.trials; ++trial) {
        NeedlePrompt p;
        p.context_tokens = len;
        p.depth = depth;
        p.trial = trial;
        p.passkey = std::to_string(10000 + rng() % 90000);
        // A different stretch of text per trial, so trials are independent examples.
        const int64_t start = static_cast<int64_t>(rng() % static_cast<uint64_t>(hay.size() - n_hay + 1));
        const int64_t cut = start + static_cast<int64_t>(depth * static_cast<double>(n_hay) + 0.5);
        const std::string before = tok.decode(std::vector<int32_t>(hay.begin() + start, hay.begin() + cut), false);
        const std::string after =
            tok.decode(std::vector<int32_t>(hay.begin() + cut, hay.begin() + start + n_hay), false);
        const std::string context = std::string(kIntro) + before + needle_sentence(p.passkey) + after;
        const std::string prompt = needle_prompt_text(tok, context + kQuestion);
        const std::vector<int32_t> ids = tok.encode(prompt, false, true);
        if (!query_aware) {
          p.compressed_part = ids;
        } else {
          PromptParts parts = split_prompt(tok, prompt, prompt.rfind(kQuestion));
          p.compressed_part = std::move(parts.context);
          p.question_part = std::move(parts.question);
        }
        out.push_back(std::move(p));
      }
    }
  }
  return out;
}

bool needle_hit(const std::string& answer, const std::string& passkey) {
  return answer.find(passkey) != std::string::npos;
}

// ---- the task's driver ----------------------------------------------------------------------------------------------

namespace {

/// A needle example: its prompt's parts and pass key.
struct NeedleExample : TaskPayload {
  NeedlePrompt prompt;
};

class NeedleTask : public Task {
 public:
  std::string name() const override { return "needle"; }

  void check_fits_context(const RunPlan& plan, int64_t context_length) const override {
    for (int64_t n : plan.needle.context_tokens) check_sequence_fits(plan, n, "tasks.needle.context_tokens", context_length);
  }

  /// Every (context length, depth, trial) of [tasks.needle], hidden in the evaluation text.
  std::vector<TaskExample> build_examples(const RunPlan& plan, const Tokenizer& tok, const ModelConfig&) const override {
    std::vector<TaskExample> out;
    const auto prompts = build_needle_prompts(tok, eval_text(plan), plan.needle, plan.query_aware);
    for (size_t i = 0; i < prompts.size(); ++i) {
      TaskExample ex;
      ex.task = name();
      ex.index = static_cast<int64_t>(i);
      const NeedlePrompt& p = prompts[i];
      std::ostringstream id;
      id << "context=" << p.context_tokens << ",depth=" << p.depth << ",trial=" << p.trial;
      ex.input = prompt_input("needle", id.str(), p.compressed_part, p.question_part);
      ex.prompt = p.compressed_part;
      auto data = std::make_shared<NeedleExample>();
      data->prompt = p;
      ex.payload = data;
      out.push_back(std::move(ex));
    }
    return out;
  }

  TaskScore score(Backend& backend, const Tokenizer& tok, const PrefilledPrompt& prompt, const TaskExample& example,
                  const TaskPayload*, ScoredCache& cache) const override {
    const NeedlePrompt& p = static_cast<const NeedleExample&>(*example.payload).prompt;
    const GreedyResult r = answer_greedily(backend, prompt.last_logits, *cache.cache, cache.start_pos, p.question_part,
                                           kNeedleAnswerTokens, tok.end_of_generation_ids(), cache.decode);
    TaskScore s;
    s.values["accuracy"] = needle_hit(tok.decode(r.tokens, false), p.passkey) ? 1.0 : 0.0;
    s.decode_tokens_per_second = r.tokens_per_second;
    return s;
  }

  nlohmann::json manifest_settings(const RunPlan& plan) const override {
    const std::string text = needle_prompt_template();
    return {{"max_new_tokens", kNeedleAnswerTokens},
            {"answer_prefix", kNeedleAnswerPrefix},
            {"prompt_template_sha256", sha256_hex(text.data(), text.size())},
            {"query_aware", plan.query_aware}};
  }
};

}  // namespace

const Task& needle_task() {
  static const NeedleTask task;
  return task;
}

}  // namespace rkv
