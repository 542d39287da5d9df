#include "backend/types.hpp"

#include "core/errors.hpp"

namespace rkv {

void check_token_ids(const std::vector<int32_t>& tokens, int64_t vocab_size) {
  for (size_t t = 0; t < tokens.size(); ++t)
    if (tokens[t] < 0 || tokens[t] >= vocab_size)
      throw InputError("token id " + std::to_string(tokens[t]) + " at index " + std::to_string(t) +
                       " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
}

}  // namespace rkv
