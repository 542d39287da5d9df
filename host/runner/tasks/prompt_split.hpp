// Splitting a task prompt where its question starts, for query_aware = true: the part before is prefilled and
// compressed, the question is fed after compression (kvpress' default; the needle and ruler tasks).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace rkv {

/// The prompt's token ids in two parts.
struct PromptParts {
  std::vector<int32_t> context;   ///< prompt[0 : question_at] (compressed)
  std::vector<int32_t> question;  ///< the rest (fed after compression)
};

/// Tokenizes `prompt` (no BOS added, special tokens parsed) split at byte `question_at`. When the head tokenized alone
/// is a prefix of the whole prompt's ids (BPE did not merge across the cut) the question is the rest of those ids, so
/// the parts concatenate to exactly the unsplit prompt; otherwise both parts are tokenized separately.
PromptParts split_prompt(const Tokenizer& tok, const std::string& prompt, size_t question_at);

}  // namespace rkv
