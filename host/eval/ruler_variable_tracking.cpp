// RULER's variable-tracking generator (NVIDIA/RULER scripts/data/synthetic/variable_tracking.py; ruler_text.hpp).
#include <algorithm>
#include <set>

#include "eval/ruler_families.hpp"

namespace rkv {

namespace {
const char* kNoise = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";

/// `count` distinct names of `letters` uppercase letters, a repeat drawn again (the reference draws until its list
/// holds `count` distinct names but then slices the list with the repeat in it; a repeat of 5 letters has odds ~1e-6).
std::vector<std::string> variable_names(RulerRng& rng, int64_t count, int64_t letters) {
  std::vector<std::string> names;
  std::set<std::string> seen;
  while (static_cast<int64_t>(names.size()) < count) {
    std::string v = ruler_letters(rng, letters, true);
    if (seen.insert(v).second) names.push_back(std::move(v));
  }
  return names;
}
}  // namespace

RulerText ruler_vt_text(const RulerSubtask& s, int64_t size, uint64_t seed, int64_t letters,
                        const std::string& preamble) {
  RulerRng rng(seed);
  const int64_t per_chain = s.num_hops + 1;
  const std::vector<std::string> names = variable_names(rng, per_chain * s.num_chains, letters);
  std::vector<std::vector<std::string>> chains;
  std::string value;
  for (int64_t c = 0; c < s.num_chains; ++c) {
    const std::string v = std::to_string(ruler_uniform(rng, 10000, 99998));  // np.random.randint(10000, 99999)
    if (c == 0) value = v;
    std::vector<std::string> chain = {"VAR " + names[static_cast<size_t>(c * per_chain)] + " = " + v};
    for (int64_t j = 1; j < per_chain; ++j)
      chain.push_back("VAR " + names[static_cast<size_t>(c * per_chain + j)] + " = VAR " +
                      names[static_cast<size_t>(c * per_chain + j - 1)] + " ");
    chains.push_back(std::move(chain));
  }
  std::vector<std::string> sentences(static_cast<size_t>(size), kNoise);
  for (const auto& chain : chains) {
    std::vector<int64_t> at = ruler_sample(rng, static_cast<int64_t>(sentences.size()), per_chain);
    std::sort(at.begin(), at.end());
    for (int64_t j = 0; j < per_chain; ++j)
      sentences.insert(sentences.begin() + at[static_cast<size_t>(j)] + j, chain[static_cast<size_t>(j)]);
  }
  std::string context;
  for (size_t i = 0; i < sentences.size(); ++i) context += (i ? "\n" : "") + sentences[i];
  const std::string question = "\nQuestion: Find all variables that are assigned the value " + value + " in the text above.";
  RulerText t;
  t.user = preamble + "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n" + context +
           question;
  t.question_at = t.user.size() - question.size();
  t.answer_prefix = "Answer: According to the chain(s) of variable assignment in the text above, " +
                    std::to_string(per_chain) + " variables are assigned the value " + value + ", they are:";
  t.answers.assign(names.begin(), names.begin() + per_chain);
  return t;
}

}  // namespace rkv
