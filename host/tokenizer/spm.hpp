// SentencePiece-style merges (the "llama" SPM vocabularies), as llama.cpp's llm_tokenizer_spm_session runs them.
//
// Algorithm: cut the (space-escaped) text into characters; seed a queue with every adjacent pair whose concatenation
// is a vocabulary token, keyed by that token's score; repeatedly merge the highest-scoring pair (ties: the leftmost)
// while both halves are still as recorded, and queue the new pairs it forms with its neighbours. Every merged symbol is
// a vocabulary token; a final symbol that is not one is a single character the vocabulary lacks, which the caller
// spells with byte-fallback tokens.
//
// Reference: llama.cpp src/llama-vocab.cpp (llm_tokenizer_spm_session::tokenize), after
// https://github.com/google/sentencepiece bpe_model.cc.
#pragma once
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace rkv {

/// Merges `text` and returns its symbols in order (views into `text`, concatenating to it). `ids` maps token texts to
/// ids and `scores[id]` is each token's score. Any byte string is accepted: it is cut into well-formed UTF-8 characters,
/// and each byte that does not start one is a symbol of its own. (llama.cpp cuts by the lead byte alone, so an invalid
/// lead byte such as 0xFF swallows the next three bytes, e.g. an escaped space; the two agree on valid UTF-8.)
std::vector<std::string_view> spm_merge(std::string_view text, const std::unordered_map<std::string_view, int32_t>& ids,
                                        const std::vector<float>& scores);

}  // namespace rkv
