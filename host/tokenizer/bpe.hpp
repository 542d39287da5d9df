// Byte-level BPE merges inside one pre-tokenized piece.
//
// Algorithm (Sennrich et al. 2016, as run by GPT-2's encoder.py, HF tokenizers and llama.cpp llm_tokenizer_bpe_session):
// cut the piece into characters, then repeatedly merge the adjacent pair with the lowest merge rank (ties: the leftmost
// pair) until no adjacent pair has a rank. The result is the list of merged symbols.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace rkv {

/// Merge ranks: the rank of a pair (left, right) is its position in the file's merge list.
class BpeRanks {
 public:
  /// Appends a merge with the next rank. A pair already present keeps its first (lower) rank.
  void add(std::string_view left, std::string_view right);
  /// Rank of (left, right), or -1. `scratch` is a caller-owned buffer (avoids an allocation per lookup).
  int32_t find(std::string_view left, std::string_view right, std::string& scratch) const;
  std::size_t size() const { return next_rank_; }

 private:
  std::unordered_map<std::string, int32_t> rank_;
  int32_t next_rank_ = 0;
};

/// Merges `word` (a byte-level encoded piece, i.e. UTF-8 text of GPT-2 byte characters) and returns its symbols in
/// order as views into `word`; they concatenate to `word`. Any byte string is accepted: it is cut into characters by
/// utf8::sequence_length. Cost: O(n log n) for n characters.
std::vector<std::string_view> bpe_merge(std::string_view word, const BpeRanks& ranks);

}  // namespace rkv
