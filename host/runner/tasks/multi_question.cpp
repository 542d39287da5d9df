#include "runner/tasks/multi_question.hpp"

#include <algorithm>

#include "core/cancel.hpp"
#include "core/errors.hpp"
#include "eval/ruler_metrics.hpp"
#include "eval/ruler_text.hpp"
#include "runner/decode/loop.hpp"
#include "runner/tasks/prompt_split.hpp"
#include "runner/tasks/ruler.hpp"
#include "tokenizer/chat_template.hpp"

namespace rkv {

namespace {
/// The text of the user turn before the questions, and each question with its answer prefix.
struct MultiQuestionText {
  std::string context;
  std::vector<std::string> questions, prefixes, answers;
};

MultiQuestionText multi_question_text(const RulerSubtask& s, int64_t size, uint64_t seed, const RulerSources& src) {
  const RulerText t = ruler_text(s, size, seed, 0, src);
  MultiQuestionText m;
  m.context = t.user.substr(0, t.question_at);
  m.answers = t.answers;
  for (const std::string& key : t.queries) {
    m.questions.push_back("\nWhat is the special magic number for " + key + " mentioned in the provided text?");
    m.prefixes.push_back("The special magic number for " + key + " mentioned in the provided text is");
  }
  return m;
}

std::string chat_prompt(const ChatTemplate& chat, const MultiQuestionText& m, size_t i) {
  return chat.apply({{"user", m.context + m.questions[i]}}, true) + m.prefixes[i];
}
}  // namespace

std::vector<MultiQuestionPrompt> build_multi_question_prompts(const Tokenizer& tok, const std::string& text,
                                                              const MultiQuestionConfig& cfg) {
  const ChatTemplate chat = ChatTemplate::for_tokenizer(tok);
  const RulerSources src = ruler_sources(text);
  RulerSubtask s = *find_ruler_subtask("niah_multikey_1");
  s.num_keys = s.num_queries = cfg.questions;  // every key is asked, one question each
  std::vector<MultiQuestionPrompt> out;
  for (int64_t len : cfg.context_tokens) {
    for (int64_t j = 0; j < cfg.examples; ++j) {
      throw_if_cancelled();
      const uint64_t seed = ruler_example_seed(cfg.seed, "multi_question", len, j);
      const auto longest = [&](int64_t size) {
        const MultiQuestionText m = multi_question_text(s, size, seed, src);
        int64_t most = 0;
        for (size_t i = 0; i < m.questions.size(); ++i)
          most = std::max<int64_t>(most, static_cast<int64_t>(tok.encode(chat_prompt(chat, m, i), false, true).size()));
        return most;
      };
      const int64_t size = ruler_largest_fitting(1, len, [&](int64_t n) { return longest(n) <= len; });
      if (size < 1)
        throw InputError("multi_question: context_tokens " + std::to_string(len) + " is shorter than a prompt with " +
                         std::to_string(cfg.questions) + " needles and no haystack (" + std::to_string(longest(1)) +
                         " tokens); raise tasks.multi_question.context_tokens or lower questions");
      const MultiQuestionText m = multi_question_text(s, size, seed, src);
      MultiQuestionPrompt p;
      for (size_t i = 0; i < m.questions.size(); ++i) {
        const std::string prompt = chat_prompt(chat, m, i);
        PromptParts parts = split_prompt(tok, prompt, prompt.rfind(m.questions[i]));
        if (i == 0) p.context = std::move(parts.context);  // the same head text for every question
        p.questions.push_back(std::move(parts.question));
      }
      p.answers = m.answers;
      p.context_tokens = len;
      p.example = j;
      p.max_new_tokens = cfg.max_new_tokens;
      out.push_back(std::move(p));
    }
  }
  return out;
}

// ---- the task's driver ----------------------------------------------------------------------------------------------

namespace {

/// A multi_question example: its context's prompt and the question it asks (-1: every question, query-agnostic).
struct MultiQuestionExample : TaskPayload {
  std::shared_ptr<const MultiQuestionPrompt> prompt;
  int64_t question = -1;
};

class MultiQuestionTask : public Task {
 public:
  std::string name() const override { return "multi_question"; }

  void check_fits_context(const RunPlan& plan, int64_t context_length) const override {
    for (int64_t n : plan.multi_question.context_tokens)
      check_sequence_fits(plan, n + plan.multi_question.max_new_tokens,
                          "tasks.multi_question.context_tokens + tasks.multi_question.max_new_tokens", context_length);
  }

  /// Per context, the query-agnostic example (the context alone, every question asked after) then one query-aware
  /// example per question (context and question prefilled together).
  std::vector<TaskExample> build_examples(const RunPlan& plan, const Tokenizer& tok, const ModelConfig&) const override {
    std::vector<TaskExample> out;
    for (MultiQuestionPrompt& built : build_multi_question_prompts(tok, eval_text(plan), plan.multi_question)) {
      const auto p = std::make_shared<const MultiQuestionPrompt>(std::move(built));
      for (int64_t q = -1; q < static_cast<int64_t>(p->questions.size()); ++q) {
        TaskExample ex;
        ex.task = name();
        ex.index = static_cast<int64_t>(out.size());
        ex.prompt = p->context;
        if (q >= 0) {
          const std::vector<int32_t>& question = p->questions[static_cast<size_t>(q)];
          ex.prompt.insert(ex.prompt.end(), question.begin(), question.end());
        }
        const std::string id = "context=" + std::to_string(p->context_tokens) + ",example=" +
                               std::to_string(p->example) +
                               (q >= 0 ? ",question=" + std::to_string(q) : std::string(",questions=all"));
        ex.input = prompt_input("multi_question", id, ex.prompt, {});
        auto data = std::make_shared<MultiQuestionExample>();
        data->prompt = p;
        data->question = q;
        ex.payload = data;
        out.push_back(std::move(ex));
      }
    }
    return out;
  }

  /// The query-aware example answers its one question on the cache (its prompt holds the question); the
  /// query-agnostic one asks every question on its own copy from cache.fork, bytes_end the most bytes a copy held.
  TaskScore score(Backend& backend, const Tokenizer& tok, const PrefilledPrompt& prompt, const TaskExample& example,
                  const TaskPayload*, ScoredCache& cache) const override {
    const auto& data = static_cast<const MultiQuestionExample&>(*example.payload);
    const MultiQuestionPrompt& mq = *data.prompt;
    TaskScore s;
    if (data.question >= 0) {
      const GreedyResult r = answer_greedily(backend, prompt.last_logits, *cache.cache, cache.start_pos, {},
                                             mq.max_new_tokens, tok.end_of_generation_ids(), cache.decode);
      s.decode_tokens_per_second = r.tokens_per_second;
      s.values["query_aware"] =
          100.0 * ruler_string_match_all(tok.decode(r.tokens, false), {mq.answers[static_cast<size_t>(data.question)]});
      return s;
    }
    double found = 0, tps = 0;
    for (size_t i = 0; i < mq.questions.size(); ++i) {
      CacheCopy copy = cache.fork();
      const GreedyResult r = answer_greedily(backend, prompt.last_logits, *copy.cache, cache.start_pos, mq.questions[i],
                                             mq.max_new_tokens, tok.end_of_generation_ids(), copy.decode.get());
      found += ruler_string_match_all(tok.decode(r.tokens, false), {mq.answers[i]});
      tps += r.tokens_per_second;
      s.bytes_end = std::max(s.bytes_end, copy.cache->bytes_in_use());
    }
    const double n = static_cast<double>(mq.questions.size());
    s.decode_tokens_per_second = tps / n;
    s.values["query_agnostic"] = 100.0 * found / n;
    return s;
  }

  nlohmann::json manifest_settings(const RunPlan& plan) const override {
    const MultiQuestionConfig& m = plan.multi_question;
    return {{"context_tokens", m.context_tokens}, {"questions", m.questions},           {"examples", m.examples},
            {"seed", m.seed},                     {"max_new_tokens", m.max_new_tokens}, {"scoring", "string_match_all"}};
  }
  /// The questions asked after compression, which the cache was not compressed for (kvpress's protocol).
  std::string primary_metric(const std::vector<std::string>& metrics) const override {
    return metric_or_first(metrics, "query_agnostic");
  }
};

}  // namespace

const Task& multi_question_task() {
  static const MultiQuestionTask task;
  return task;
}

}  // namespace rkv
