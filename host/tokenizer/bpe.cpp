// Byte-level BPE merge loop (see bpe.hpp).
#include "tokenizer/bpe.hpp"

#include <algorithm>
#include <queue>

#include "tokenizer/utf8.hpp"

namespace rkv {

void BpeRanks::add(std::string_view left, std::string_view right) {
  std::string key;
  key.reserve(left.size() + 1 + right.size());
  key.append(left).append(1, ' ').append(right);
  rank_.emplace(std::move(key), next_rank_++);
}

int32_t BpeRanks::find(std::string_view left, std::string_view right, std::string& scratch) const {
  scratch.assign(left).append(1, ' ').append(right);
  const auto it = rank_.find(scratch);
  return it == rank_.end() ? -1 : it->second;
}

namespace {

/// A symbol of the word: bytes [start, start + len) of the word, in a doubly linked list of live symbols.
struct Symbol {
  uint32_t start, len;
  int32_t prev, next;
};

/// A candidate merge of symbol `left` with its right neighbour `right`, valid while both keep the lengths recorded.
struct Candidate {
  int32_t rank, left, right;
  uint32_t left_len, right_len;
};

/// Priority: lower rank first, then the leftmost pair.
struct Later {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
  }
};

}  // namespace

std::vector<std::string_view> bpe_merge(std::string_view word, const BpeRanks& ranks) {
  std::vector<Symbol> sym;
  for (std::size_t pos = 0; pos < word.size();) {
    const std::size_t n = std::min(utf8::sequence_length(static_cast<unsigned char>(word[pos])), word.size() - pos);
    const auto i = static_cast<int32_t>(sym.size());
    sym.push_back({static_cast<uint32_t>(pos), static_cast<uint32_t>(n), i - 1, -1});
    if (i > 0) sym[i - 1].next = i;
    pos += n;
  }

  std::priority_queue<Candidate, std::vector<Candidate>, Later> queue;
  std::string scratch;
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = sym[left];
    const Symbol& r = sym[right];
    const int32_t rank = ranks.find(word.substr(l.start, l.len), word.substr(r.start, r.len), scratch);
    if (rank >= 0) queue.push({rank, left, right, l.len, r.len});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(sym.size()); ++i) consider(i - 1, i);

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& l = sym[c.left];
    Symbol& r = sym[c.right];
    // Stale when either side has merged with something else since the candidate was made.
    if (l.len != c.left_len || r.len != c.right_len || l.next != c.right) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = c.left;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }

  std::vector<std::string_view> out;
  for (int32_t i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) out.push_back(word.substr(sym[i].start, sym[i].len));
  return out;
}

}  // namespace rkv
