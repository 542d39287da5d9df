// Python's difflib.SequenceMatcher (isjunk = None) over code points, and fuzzywuzzy's fuzz.ratio built on it: the
// code edit similarity of LongBench (metrics.py code_sim_score = fuzz.ratio(prediction, ground_truth) / 100).
//
// Ratcliff/Obershelp "gestalt pattern matching" as difflib implements it (CPython Lib/difflib.py):
//  - b2j: for every element of b, the increasing list of its positions in b. Autojunk: when len(b) >= 200, every
//    element occurring more than len(b) // 100 + 1 times in b is "popular" and removed from b2j.
//  - find_longest_match(alo, ahi, blo, bhi): the longest block a[i:i+k] == b[j:j+k] built from b2j (so free of
//    popular elements), the earliest i among the longest and then the earliest j; then extended element by element
//    to the left and to the right while a and b agree (this extension may take in popular elements).
//  - matching blocks: find the longest block of the whole ranges, recurse on the parts to its left and to its right.
//  - ratio = 2 M / (len(a) + len(b)), M = total size of the matching blocks; 1.0 when both are empty.
// fuzz.ratio(s1, s2) (fuzzywuzzy 0.18.0 / thefuzz, pure-Python path, i.e. without python-Levenshtein): 100 when
// s1 == s2 (also for two empty strings), 0 when exactly one is empty, else int(round(100 * ratio)) with Python's
// round-half-to-even. s1 is difflib's `a`, s2 its `b` (autojunk looks at s2 only, so the order matters).
//
// All functions are pure and thread-safe. Time O(len(a) * number of matching positions), memory O(len(a) + len(b)).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace rkv {

/// One matching block: a[a_start, a_start + size) == b[b_start, b_start + size).
struct MatchBlock {
  size_t a_start = 0;
  size_t b_start = 0;
  size_t size = 0;
  bool operator==(const MatchBlock& o) const {
    return a_start == o.a_start && b_start == o.b_start && size == o.size;
  }
};

/// difflib.SequenceMatcher(None, a, b).get_matching_blocks(): blocks sorted by position, adjacent blocks merged,
/// ending with the sentinel {len(a), len(b), 0}.
std::vector<MatchBlock> difflib_matching_blocks(std::u32string_view a, std::u32string_view b);

/// difflib.SequenceMatcher(None, a, b).ratio() = 2 M / (len(a) + len(b)) (1.0 when both are empty).
double difflib_ratio(std::u32string_view a, std::u32string_view b);

/// fuzzywuzzy fuzz.ratio(s1, s2) on UTF-8 text, an integer in [0, 100] (rules in the file comment). Invalid UTF-8
/// bytes count as U+FFFD.
int fuzz_ratio(std::string_view s1, std::string_view s2);

/// Python 3 round(x) for a finite double: to the nearest integer, halves to the even neighbour (2.5 -> 2, 3.5 -> 4).
double python_round(double x);

}  // namespace rkv
