// difflib.SequenceMatcher matching blocks and fuzz.ratio (see metrics_sequence_matcher.hpp).
#include "eval/metrics_sequence_matcher.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <unordered_map>

#include "eval/metrics_python_text.hpp"

namespace rkv {
namespace {

// The state of one SequenceMatcher: b2j without popular elements, and scratch arrays for find_longest_match
// (difflib's j2len dictionaries, kept as arrays indexed by j + 1 with lists of the entries set, so clearing is cheap).
class Matcher {
 public:
  Matcher(std::u32string_view a, std::u32string_view b) : a_(a), b_(b) {
    for (size_t j = 0; j < b.size(); ++j) b2j_[b[j]].push_back(j);
    const size_t n = b.size();
    if (n >= 200) {  // autojunk
      const size_t ntest = n / 100 + 1;
      for (auto it = b2j_.begin(); it != b2j_.end();) {
        if (it->second.size() > ntest) {
          it = b2j_.erase(it);
        } else {
          ++it;
        }
      }
    }
    len_prev_.assign(b.size() + 1, 0);
    len_next_.assign(b.size() + 1, 0);
  }

  MatchBlock find_longest_match(size_t alo, size_t ahi, size_t blo, size_t bhi) {
    size_t besti = alo, bestj = blo, bestsize = 0;
    // len_prev_[j + 1] = length of the match ending at a[i - 1], b[j] (difflib's j2len[j]); 0 when absent.
    for (size_t i = alo; i < ahi; ++i) {
      set_next_.clear();
      const auto found = b2j_.find(a_[i]);
      if (found != b2j_.end()) {
        for (size_t j : found->second) {
          if (j < blo) continue;
          if (j >= bhi) break;
          const size_t k = len_prev_[j] + 1;  // j2len.get(j - 1, 0) + 1, index shifted by one
          len_next_[j + 1] = k;
          set_next_.push_back(j + 1);
          if (k > bestsize) {
            besti = i + 1 - k;
            bestj = j + 1 - k;
            bestsize = k;
          }
        }
      }
      for (size_t idx : set_prev_) len_prev_[idx] = 0;
      std::swap(len_prev_, len_next_);
      std::swap(set_prev_, set_next_);
    }
    for (size_t idx : set_prev_) len_prev_[idx] = 0;
    set_prev_.clear();
    // Extend by equal elements on both sides (no junk without isjunk; popular elements may be taken in here).
    while (besti > alo && bestj > blo && a_[besti - 1] == b_[bestj - 1]) {
      --besti;
      --bestj;
      ++bestsize;
    }
    while (besti + bestsize < ahi && bestj + bestsize < bhi && a_[besti + bestsize] == b_[bestj + bestsize]) {
      ++bestsize;
    }
    return {besti, bestj, bestsize};
  }

  std::vector<MatchBlock> matching_blocks() {
    std::vector<MatchBlock> blocks;
    std::vector<std::tuple<size_t, size_t, size_t, size_t>> queue{{0, a_.size(), 0, b_.size()}};
    while (!queue.empty()) {
      const auto [alo, ahi, blo, bhi] = queue.back();
      queue.pop_back();
      const MatchBlock m = find_longest_match(alo, ahi, blo, bhi);
      if (m.size == 0) continue;
      blocks.push_back(m);
      if (alo < m.a_start && blo < m.b_start) queue.emplace_back(alo, m.a_start, blo, m.b_start);
      if (m.a_start + m.size < ahi && m.b_start + m.size < bhi) {
        queue.emplace_back(m.a_start + m.size, ahi, m.b_start + m.size, bhi);
      }
    }
    std::sort(blocks.begin(), blocks.end(), [](const MatchBlock& x, const MatchBlock& y) {
      return std::tie(x.a_start, x.b_start, x.size) < std::tie(y.a_start, y.b_start, y.size);
    });
    // Merge adjacent blocks, then the sentinel.
    std::vector<MatchBlock> merged;
    MatchBlock cur{0, 0, 0};
    for (const MatchBlock& m : blocks) {
      if (cur.a_start + cur.size == m.a_start && cur.b_start + cur.size == m.b_start) {
        cur.size += m.size;
      } else {
        if (cur.size) merged.push_back(cur);
        cur = m;
      }
    }
    if (cur.size) merged.push_back(cur);
    merged.push_back({a_.size(), b_.size(), 0});
    return merged;
  }

 private:
  std::u32string_view a_, b_;
  std::unordered_map<char32_t, std::vector<size_t>> b2j_;
  std::vector<size_t> len_prev_, len_next_;
  std::vector<size_t> set_prev_, set_next_;
};

}  // namespace

std::vector<MatchBlock> difflib_matching_blocks(std::u32string_view a, std::u32string_view b) {
  return Matcher(a, b).matching_blocks();
}

double difflib_ratio(std::u32string_view a, std::u32string_view b) {
  size_t matches = 0;
  for (const MatchBlock& m : difflib_matching_blocks(a, b)) matches += m.size;
  const size_t length = a.size() + b.size();
  if (length == 0) return 1.0;
  return 2.0 * static_cast<double>(matches) / static_cast<double>(length);
}

double python_round(double x) {
  // nearbyint rounds in the current rounding mode, which is round-to-nearest-even unless a caller changed it;
  // compute it explicitly so the result never depends on the floating-point environment.
  const double f = std::floor(x);
  const double diff = x - f;
  if (diff < 0.5) return f;
  if (diff > 0.5) return f + 1.0;
  return std::fmod(f, 2.0) == 0.0 ? f : f + 1.0;
}

int fuzz_ratio(std::string_view s1, std::string_view s2) {
  const std::u32string a = pytext::to_code_points(s1);
  const std::u32string b = pytext::to_code_points(s2);
  if (a == b) return 100;                   // utils.check_for_equivalence (runs before the empty-string check)
  if (a.empty() || b.empty()) return 0;     // utils.check_empty_string
  return static_cast<int>(python_round(100.0 * difflib_ratio(a, b)));  // utils.intr(100 * m.ratio())
}

}  // namespace rkv
