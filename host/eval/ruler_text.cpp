#include "eval/ruler_text.hpp"

#include <algorithm>
#include <cstdint>

#include "core/errors.hpp"
#include "eval/ruler_families.hpp"

namespace rkv {

int64_t ruler_min_size(const RulerSubtask& s) {
  switch (s.family) {
    case RulerFamily::Niah:
      return s.haystack == RulerHaystack::Essay ? 1 : std::max(s.num_keys, s.num_queries) * s.num_values;
    case RulerFamily::VariableTracking:
      return s.num_hops + 1;
    case RulerFamily::CommonWords:
      return s.num_cw;
    case RulerFamily::FrequentWords: {
      int64_t n = 1;
      while (ruler_fwe_count(n, 4, s.alpha) < 1) ++n;
      return n;
    }
  }
  return 1;
}

int64_t ruler_max_size(const RulerSubtask& s, const RulerSources& sources) {
  return s.family == RulerFamily::CommonWords ? static_cast<int64_t>(sources.vocabulary.size()) : INT64_MAX;
}

RulerText ruler_text(const RulerSubtask& s, int64_t size, uint64_t seed, int64_t context_tokens,
                     const RulerSources& sources, const std::string& preamble) {
  if (size < ruler_min_size(s))
    throw InputError("ruler " + s.name + ": a haystack of " + std::to_string(size) + " units is below the " +
                     std::to_string(ruler_min_size(s)) + " the task needs");
  switch (s.family) {
    case RulerFamily::Niah:
      return ruler_niah_text(s, size, seed, sources);
    case RulerFamily::VariableTracking:
      return ruler_vt_text(s, size, seed, 5, preamble);
    case RulerFamily::CommonWords:
      return ruler_cwe_text(s, size, seed, context_tokens, sources);
    case RulerFamily::FrequentWords:
      return ruler_fwe_text(s, size, seed, context_tokens);
  }
  throw InputError("ruler: unknown family of subtask " + s.name);
}

std::string ruler_vt_example(const RulerSubtask& s, int64_t size, uint64_t seed) {
  if (s.family != RulerFamily::VariableTracking)
    throw InputError("ruler: " + s.name + " is not a variable-tracking subtask");
  if (size < ruler_min_size(s))
    throw InputError("ruler " + s.name + ": an in-context example of " + std::to_string(size) +
                     " noise sentences is below the " + std::to_string(ruler_min_size(s)) + " the chain needs");
  const RulerText t = ruler_vt_text(s, size, seed, 3, "");
  std::string answers;
  for (size_t i = 0; i < t.answers.size(); ++i) answers += (i ? " " : "") + t.answers[i];
  // The reference's example is its input (template and answer prefix " Answer: ... they are: ") + " " + the answers
  // + "\n", inserted before the task's template followed by "\n".
  return t.user + " " + t.answer_prefix + " " + " " + answers + "\n\n";
}

}  // namespace rkv
