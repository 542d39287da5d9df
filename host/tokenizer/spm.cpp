// SentencePiece-style merge loop (see spm.hpp).
#include "tokenizer/spm.hpp"

#include <algorithm>
#include <queue>

#include "core/cancel.hpp"
#include "tokenizer/utf8.hpp"

namespace rkv {
namespace {

struct Symbol {
  uint32_t start, len;
  int32_t prev, next;
};

struct Candidate {
  float score;
  int32_t left, right;
  uint32_t left_len, right_len;
};

/// Priority: higher score first, then the leftmost pair.
struct Later {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.score != b.score ? a.score < b.score : a.left > b.left;
  }
};

}  // namespace

std::vector<std::string_view> spm_merge(std::string_view text, const std::unordered_map<std::string_view, int32_t>& ids,
                                        const std::vector<float>& scores) {
  std::vector<Symbol> sym;
  char32_t cp;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t n = std::max<std::size_t>(utf8::decode(text, pos, cp), 1);  // an invalid byte stands alone
    const auto i = static_cast<int32_t>(sym.size());
    sym.push_back({static_cast<uint32_t>(pos), static_cast<uint32_t>(n), i - 1, -1});
    if (i > 0) sym[i - 1].next = i;
    pos += n;
  }

  std::priority_queue<Candidate, std::vector<Candidate>, Later> queue;
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = sym[left];
    const Symbol& r = sym[right];
    const auto it = ids.find(text.substr(l.start, l.len + r.len));  // r starts where l ends
    if (it == ids.end()) return;
    queue.push({scores[static_cast<std::size_t>(it->second)], left, right, l.len, r.len});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(sym.size()); ++i) consider(i - 1, i);

  uint32_t polls = 0;
  while (!queue.empty()) {
    if ((++polls & 4095) == 0) throw_if_cancelled();  // a run's Ctrl-C / SIGTERM (core/cancel.hpp)
    const Candidate c = queue.top();
    queue.pop();
    Symbol& l = sym[c.left];
    Symbol& r = sym[c.right];
    if (l.len != c.left_len || r.len != c.right_len || l.next != c.right) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = c.left;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }

  std::vector<std::string_view> out;
  for (int32_t i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) out.push_back(text.substr(sym[i].start, sym[i].len));
  return out;
}

}  // namespace rkv
