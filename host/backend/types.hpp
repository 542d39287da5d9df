// Small types shared by every backend and by the host code that drives them (backend.hpp). Neutral ground: the CPU
// and CUDA backends both include this file and never each other.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace rkv {

/// Which positions a prefill returns logits for: the last one ([1, V]), every one ([n, V]) or none.
enum class LogitsFor { Last, All, None };

/// Checks that every id of `tokens` lies in [0, vocab_size). Throws rkv::InputError naming the first bad id and its
/// index otherwise. Reentrant.
void check_token_ids(const std::vector<int32_t>& tokens, int64_t vocab_size);

}  // namespace rkv
