#include "runner/task_multi_question.hpp"

#include <algorithm>

#include "core/cancel.hpp"
#include "core/errors.hpp"
#include "runner/prompt_split.hpp"
#include "runner/ruler_text.hpp"
#include "runner/task_ruler.hpp"
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

}  // namespace rkv
