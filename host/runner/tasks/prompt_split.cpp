#include "runner/tasks/prompt_split.hpp"

#include <algorithm>

namespace rkv {

PromptParts split_prompt(const Tokenizer& tok, const std::string& prompt, size_t question_at) {
  const std::vector<int32_t> ids = tok.encode(prompt, false, true);
  PromptParts p;
  p.context = tok.encode(prompt.substr(0, question_at), false, true);
  if (p.context.size() <= ids.size() && std::equal(p.context.begin(), p.context.end(), ids.begin()))
    p.question.assign(ids.begin() + static_cast<int64_t>(p.context.size()), ids.end());
  else
    p.question = tok.encode(prompt.substr(question_at), false, true);
  return p;
}

}  // namespace rkv
