#include "runner/tasks/ruler.hpp"

#include <algorithm>
#include <memory>

#include "core/cancel.hpp"
#include "core/errors.hpp"
#include "eval/ruler_assets.hpp"
#include "eval/ruler_metrics.hpp"
#include "eval/ruler_text.hpp"
#include "runner/decode/loop.hpp"
#include "runner/tasks/prompt_split.hpp"
#include "tokenizer/chat_template.hpp"

namespace rkv {

namespace {
uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001B3ull;
  return h;
}

/// The prompt text around a sample: the model's chat template around the user text, then the answer prefix; for a
/// model without a template (a base model such as Gemma 3 270M), RULER's "base" template: the BOS text, the user
/// text, a space and the answer prefix (RULER's answer prefixes start with that space).
class PromptFormat {
 public:
  explicit PromptFormat(const Tokenizer& tok) {
    if (tok.chat_template().empty()) {
      bos_ = tok.bos() >= 0 ? tok.token_text(tok.bos()) : "";
    } else {
      chat_ = std::make_unique<ChatTemplate>(ChatTemplate::for_tokenizer(tok));
    }
  }
  std::string operator()(const RulerText& t) const {
    if (!chat_) return bos_ + t.user + " " + t.answer_prefix;
    return chat_->apply({{"user", t.user}}, true) + t.answer_prefix;
  }

 private:
  std::unique_ptr<ChatTemplate> chat_;
  std::string bos_;
};

/// One sample for length `context_tokens`, its prompt fitted to `target` tokens (context_tokens, less the answer's
/// max_new_tokens when the length includes it).
RulerPrompt fit_prompt(const Tokenizer& tok, const PromptFormat& format, const RulerSubtask& s,
                       const RulerSources& src, int64_t context_tokens, int64_t target, uint64_t seed,
                       bool query_aware) {
  std::string preamble;
  if (s.family == RulerFamily::VariableTracking) {
    const int64_t budget = std::min<int64_t>(500, context_tokens / 2);
    const uint64_t icl_seed = splitmix64(seed ^ 0x1C1);
    const auto icl_fits = [&](int64_t n) {
      return static_cast<int64_t>(tok.encode(ruler_vt_example(s, n, icl_seed), false, false).size()) <= budget;
    };
    const int64_t n = ruler_largest_fitting(ruler_min_size(s), budget, icl_fits);
    if (n < ruler_min_size(s))
      throw InputError("ruler " + s.name + ": context_tokens " + std::to_string(context_tokens) +
                       " leaves no room for the in-context example");
    preamble = ruler_vt_example(s, n, icl_seed);
  }
  const auto length = [&](int64_t size) {
    return static_cast<int64_t>(
        tok.encode(format(ruler_text(s, size, seed, context_tokens, src, preamble)), false, true).size());
  };
  const int64_t lo = ruler_min_size(s);
  const int64_t most = ruler_max_size(s, src);
  const int64_t hi = std::min(std::max(lo, target), most);
  const int64_t size = ruler_largest_fitting(lo, hi, [&](int64_t n) { return length(n) <= target; });
  if (size < lo)
    throw InputError("ruler " + s.name + ": context_tokens " + std::to_string(context_tokens) + " leaves " +
                     std::to_string(target) + " tokens for the prompt, shorter than its prompt with the least haystack (" +
                     std::to_string(lo <= most ? length(lo) : 0) + " tokens); raise tasks.ruler.context_tokens");
  if (size == most && most < target)  // RULER switches to a larger word list here; we refuse a short prompt
    throw InputError("ruler " + s.name + ": the word pool's " + std::to_string(most) + " words fill only " +
                     std::to_string(length(size)) + " of the " + std::to_string(target) +
                     " prompt tokens; lower tasks.ruler.context_tokens");
  const RulerText t = ruler_text(s, size, seed, context_tokens, src, preamble);
  const std::string prompt = format(t);
  RulerPrompt p;
  p.answers = t.answers;
  if (!query_aware) {
    p.compressed_part = tok.encode(prompt, false, true);
  } else {
    PromptParts parts = split_prompt(tok, prompt, prompt.rfind(t.user.substr(t.question_at)));
    p.compressed_part = std::move(parts.context);
    p.question_part = std::move(parts.question);
  }
  p.prompt_tokens = static_cast<int64_t>(p.compressed_part.size() + p.question_part.size());
  return p;
}
}  // namespace

uint64_t ruler_example_seed(uint64_t seed, const std::string& subtask, int64_t context_tokens, int64_t example) {
  uint64_t h = splitmix64(seed);
  h = splitmix64(h ^ fnv1a(subtask));
  h = splitmix64(h ^ static_cast<uint64_t>(context_tokens));
  return splitmix64(h ^ static_cast<uint64_t>(example));
}

int64_t ruler_largest_fitting(int64_t lo, int64_t hi, const std::function<bool(int64_t)>& fits) {
  if (!fits(lo)) return lo - 1;
  while (lo < hi) {  // invariant: fits(lo)
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

std::vector<RulerPrompt> build_ruler_prompts(const Tokenizer& tok, const RulerSources& src, const RulerConfig& cfg,
                                             bool query_aware) {
  const PromptFormat format(tok);
  std::vector<RulerPrompt> out;
  for (const std::string& name : cfg.subtasks) {
    const RulerSubtask* s = find_ruler_subtask(name);
    if (!s) throw InputError("ruler: unknown subtask '" + name + "'");
    const int64_t max_new = cfg.max_new_tokens > 0 ? cfg.max_new_tokens : s->max_new_tokens;
    for (int64_t len : cfg.context_tokens) {
      const int64_t target = cfg.length_includes_answer ? len - max_new : len;
      for (int64_t j = 0; j < cfg.examples; ++j) {
        throw_if_cancelled();
        RulerPrompt p =
            fit_prompt(tok, format, *s, src, len, target, ruler_example_seed(cfg.seed, name, len, j), query_aware);
        p.subtask = name;
        p.context_tokens = len;
        p.example = j;
        p.max_new_tokens = max_new;
        out.push_back(std::move(p));
      }
    }
  }
  return out;
}

RulerSources ruler_sources_of(const RunPlan& plan) {
  const RulerConfig& r = plan.ruler;
  const bool needs_eval = r.haystack == RulerHaystackSource::EvalText || r.word_pool == RulerWordSource::EvalText;
  RulerSources src = needs_eval ? ruler_sources(eval_text(plan)) : RulerSources{};
  if (r.haystack == RulerHaystackSource::PaulGraham) use_ruler_reference_essay(src, read_ruler_essays(r.essays_dir).text);
  if (r.word_pool == RulerWordSource::Wonderwords) {
    const RulerWordLists w = read_ruler_word_lists(r.words_dir);
    use_ruler_wonderwords(src, w.nouns, w.adjectives, w.verbs);
  }
  return src;
}

nlohmann::json ruler_sources_manifest(const RunPlan& plan) {
  const RulerConfig& r = plan.ruler;
  nlohmann::json haystack, words;
  if (r.haystack == RulerHaystackSource::PaulGraham) {
    const RulerEssayTexts e = read_ruler_essays(r.essays_dir);
    RulerSources words_of;
    use_ruler_reference_essay(words_of, e.text);
    haystack = {{"source", "paul_graham"}, {"package", kRulerEssaysPackage}, {"folder", r.essays_dir},
                {"files", e.files.size()}, {"words", words_of.essay_words.size()}, {"sha256", e.sha256}};
  } else {
    haystack = {{"source", "eval_text"}, {"files", plan.eval.files}};
  }
  if (r.word_pool == RulerWordSource::Wonderwords) {
    const RulerWordLists w = read_ruler_word_lists(r.words_dir);
    words = {{"source", "wonderwords"}, {"package", kRulerWordsPackage}, {"folder", r.words_dir},
             {"nouns", w.nouns.size()},  {"adjectives", w.adjectives.size()}, {"verbs", w.verbs.size()},
             {"sha256", w.sha256}};
  } else {
    words = {{"source", "eval_text"}, {"files", plan.eval.files}};
  }
  return {{"haystack", haystack}, {"word_pool", words}};
}

std::string ruler_metric(const RulerPrompt& p) { return p.subtask + "@" + std::to_string(p.context_tokens); }

// ---- the task's driver ----------------------------------------------------------------------------------------------

namespace {

/// A RULER example: its prompt's parts and references.
struct RulerExample : TaskPayload {
  RulerPrompt prompt;
};

class RulerTask : public Task {
 public:
  std::string name() const override { return "ruler"; }

  /// With length_includes_answer, each context length must leave room for a prompt beside every subtask's answer.
  void check_plan(const RunPlan& plan) const override {
    if (!plan.ruler.length_includes_answer) return;
    for (const auto& subtask : plan.ruler.subtasks) {
      const RulerSubtask* s = find_ruler_subtask(subtask);
      if (!s) continue;  // named by build_examples
      const int64_t max_new = plan.ruler.max_new_tokens > 0 ? plan.ruler.max_new_tokens : s->max_new_tokens;
      for (int64_t n : plan.ruler.context_tokens)
        if (n <= max_new)
          throw InputError(plan.config_path + ": tasks.ruler.context_tokens = " + std::to_string(n) +
                           " with length_includes_answer = true leaves no room for the prompt: subtask " + subtask +
                           " answers with up to " + std::to_string(max_new) + " tokens (" +
                           (plan.ruler.max_new_tokens > 0 ? "tasks.ruler.max_new_tokens" : "RULER's own max_new_tokens") +
                           "), which the context length includes");
    }
  }

  /// Each context length plus the longest answer any configured subtask generates (the length alone when it
  /// includes the answer).
  void check_fits_context(const RunPlan& plan, int64_t context_length) const override {
    if (plan.ruler.length_includes_answer) {
      for (int64_t n : plan.ruler.context_tokens)
        check_sequence_fits(plan, n, "tasks.ruler.context_tokens (length_includes_answer = true)", context_length);
      return;
    }
    int64_t most_new = plan.ruler.max_new_tokens;
    for (const auto& subtask : plan.ruler.subtasks)
      if (const RulerSubtask* s = find_ruler_subtask(subtask); s && plan.ruler.max_new_tokens == 0)
        most_new = std::max(most_new, s->max_new_tokens);
    for (int64_t n : plan.ruler.context_tokens)
      check_sequence_fits(plan, n + most_new, "tasks.ruler.context_tokens + the answer's max_new_tokens",
                          context_length);
  }

  /// Every (subtask, context length, example) of [tasks.ruler] from its sources (ruler_sources_of).
  std::vector<TaskExample> build_examples(const RunPlan& plan, const Tokenizer& tok, const ModelConfig&) const override {
    std::vector<TaskExample> out;
    const auto prompts = build_ruler_prompts(tok, ruler_sources_of(plan), plan.ruler, plan.query_aware);
    for (size_t i = 0; i < prompts.size(); ++i) {
      const RulerPrompt& p = prompts[i];
      TaskExample ex;
      ex.task = name();
      ex.index = static_cast<int64_t>(i);
      ex.input = prompt_input("ruler", ruler_metric(p) + ",example=" + std::to_string(p.example), p.compressed_part,
                              p.question_part);
      ex.prompt = p.compressed_part;
      auto data = std::make_shared<RulerExample>();
      data->prompt = p;
      ex.payload = data;
      out.push_back(std::move(ex));
    }
    return out;
  }

  /// "<subtask>@<n>" and "average": 100 x string_match_all of the greedy answer.
  TaskScore score(Backend& backend, const Tokenizer& tok, const PrefilledPrompt& prompt, const TaskExample& example,
                  const TaskPayload*, ScoredCache& cache) const override {
    const RulerPrompt& p = static_cast<const RulerExample&>(*example.payload).prompt;
    const GreedyResult r = answer_greedily(backend, prompt.last_logits, *cache.cache, cache.start_pos, p.question_part,
                                           p.max_new_tokens, tok.end_of_generation_ids(), cache.decode);
    const double value = 100.0 * ruler_string_match_all(tok.decode(r.tokens, false), p.answers);
    TaskScore s;
    s.values[ruler_metric(p)] = value;
    s.values["average"] = value;
    s.decode_tokens_per_second = r.tokens_per_second;
    return s;
  }

  nlohmann::json manifest_settings(const RunPlan& plan) const override {
    return {{"subtasks", plan.ruler.subtasks},
            {"context_tokens", plan.ruler.context_tokens},
            {"examples", plan.ruler.examples},
            {"seed", plan.ruler.seed},
            {"max_new_tokens", plan.ruler.max_new_tokens == 0 ? nlohmann::json("per subtask (RULER)")
                                                               : nlohmann::json(plan.ruler.max_new_tokens)},
            {"length_includes_answer", plan.ruler.length_includes_answer},
            {"scoring", "string_match_all"},
            {"query_aware", plan.query_aware},
            {"sources", ruler_sources_manifest(plan)}};
  }
  /// The mean over every subtask's examples (RULER's headline number).
  std::string primary_metric(const std::vector<std::string>& metrics) const override {
    return metric_or_first(metrics, "average");
  }
};

}  // namespace

const Task& ruler_task() {
  static const RulerTask task;
  return task;
}

}  // namespace rkv
