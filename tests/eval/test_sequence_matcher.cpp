// difflib.SequenceMatcher and fuzz.ratio (eval/metrics_sequence_matcher.hpp), on examples worked out by hand from the
// Ratcliff/Obershelp definition: take the longest common block (earliest in a, then in b), recurse left and right;
// ratio = 2 M / T with M the matched characters and T the total length; fuzz.ratio = round-half-even(100 * ratio).
#include <gtest/gtest.h>

#include "eval/metrics_sequence_matcher.hpp"

namespace {

using rkv::difflib_matching_blocks;
using rkv::difflib_ratio;
using rkv::fuzz_ratio;
using rkv::MatchBlock;
using Blocks = std::vector<MatchBlock>;

TEST(SequenceMatcher, WikimediaWikimania) {
  // a = WIKIMEDIA, b = WIKIMANIA. Longest block "WIKIM" (a[0:5] = b[0:5]). Right of it: "EDIA" vs "ANIA": longest
  // "IA" (a[7:9] = b[7:9]); between them "ED" vs "AN" share nothing. Blocks (0,0,5), (7,7,2), sentinel (9,9,0).
  const std::u32string a = U"WIKIMEDIA", b = U"WIKIMANIA";
  EXPECT_EQ(difflib_matching_blocks(a, b), (Blocks{{0, 0, 5}, {7, 7, 2}, {9, 9, 0}}));
  // M = 7, T = 18: ratio 14/18 = 0.777..., 100 * ratio = 77.78 -> 78.
  EXPECT_DOUBLE_EQ(difflib_ratio(a, b), 14.0 / 18.0);
  EXPECT_EQ(fuzz_ratio("WIKIMEDIA", "WIKIMANIA"), 78);
}

TEST(SequenceMatcher, EarliestLongestBlockWins) {
  // a = "abxcd", b = "cdxab": "ab" (a[0:2] = b[3:5]) and "cd" (a[3:5] = b[0:2]) both have length 2; the earliest in a
  // wins: block (0,3,2). Left of it a[0:0] is empty; right of it b[5:5] is empty -> nothing more. M = 2 (a longest
  // common subsequence would also be 2 here, but the greedy choice fixes which characters match).
  EXPECT_EQ(difflib_matching_blocks(U"abxcd", U"cdxab"), (Blocks{{0, 3, 2}, {5, 5, 0}}));
  // ratio = 4/10 -> 40.
  EXPECT_EQ(fuzz_ratio("abxcd", "cdxab"), 40);
}

TEST(SequenceMatcher, AdjacentBlocksAreMerged) {
  // a = "x = foo(1)", b = "x = foo(2)": longest "x = foo(" (8), then right "1)" vs "2)": ")" (a[9], b[9]).
  // Blocks (0,0,8), (9,9,1): not adjacent (a[8] != b[8]). M = 9, T = 20 -> 0.9 -> 90.
  EXPECT_EQ(difflib_matching_blocks(U"x = foo(1)", U"x = foo(2)"), (Blocks{{0, 0, 8}, {9, 9, 1}, {10, 10, 0}}));
  EXPECT_EQ(fuzz_ratio("x = foo(1)", "x = foo(2)"), 90);
  // Identical halves found separately merge: a = "abab", b = "abab" is one block (0,0,4).
  EXPECT_EQ(difflib_matching_blocks(U"abab", U"abab"), (Blocks{{0, 0, 4}, {4, 4, 0}}));
}

TEST(SequenceMatcher, AutojunkFrom200Elements) {
  // b = "b" + 199 x "a" (length 200 >= 200): 'a' occurs 199 > 200 // 100 + 1 = 3 times, so it is "popular" and left
  // out of the index. a = "aab": only a[2] = 'b' finds b[0]; the block cannot grow left (b starts there) nor right
  // (a ends): M = 1. ratio = 2/203 -> 100 * 0.00985 = 0.985 -> 1.
  const std::u32string b200 = U"b" + std::u32string(199, U'a');
  EXPECT_EQ(difflib_matching_blocks(U"aab", b200), (Blocks{{2, 0, 1}, {3, 200, 0}}));
  EXPECT_DOUBLE_EQ(difflib_ratio(U"aab", b200), 2.0 / 203.0);
  EXPECT_EQ(fuzz_ratio("aab", "b" + std::string(199, 'a')), 1);
  // With 199 elements there is no autojunk: the longest block is "aa" (a[0:2] = b[1:3]); right of it "b" vs b[3:]
  // ("a"s only) matches nothing. M = 2, ratio = 4/202 -> 1.98 -> 2.
  const std::u32string b199 = U"b" + std::u32string(198, U'a');
  EXPECT_EQ(difflib_matching_blocks(U"aab", b199), (Blocks{{0, 1, 2}, {3, 199, 0}}));
  EXPECT_EQ(fuzz_ratio("aab", "b" + std::string(198, 'a')), 2);
  // Popular elements are still matched by the extension step: a = "a", b = 200 x "a": no indexed match, but the empty
  // best block at (0,0) extends right over a[0] == b[0]: M = 1, ratio = 2/201 -> 0.995 -> 1.
  EXPECT_EQ(difflib_matching_blocks(U"a", std::u32string(200, U'a')), (Blocks{{0, 0, 1}, {1, 200, 0}}));
}

TEST(SequenceMatcher, AutojunkLooksAtTheSecondStringOnly) {
  // Swapping the arguments of the example above: b = "aab" is short, no autojunk; a = "b" + 199 x "a".
  // Longest block "aa" at a[1:3] = b[0:2] (earliest i among length-2 blocks); left: a[0:1] = "b" vs b[0:0] empty;
  // right: a[3:] vs b[2:3] = "b": no "b" in a[3:]. M = 2 -> 4/203 -> 1.97 -> 2.
  EXPECT_EQ(fuzz_ratio("b" + std::string(199, 'a'), "aab"), 2);
}

TEST(FuzzRatio, EdgeCasesAndRounding) {
  EXPECT_EQ(fuzz_ratio("", ""), 100);       // equal strings first: 100 even when empty
  EXPECT_EQ(fuzz_ratio("abc", ""), 0);
  EXPECT_EQ(fuzz_ratio("", "abc"), 0);
  EXPECT_EQ(fuzz_ratio("same", "same"), 100);
  EXPECT_EQ(fuzz_ratio("abc", "xyz"), 0);
  // Half-way cases round to even: a = "a" + 7 x "x", b = "a" + 7 x "y": M = 1, T = 16, 100 * 2/16 = 12.5 -> 12.
  EXPECT_EQ(fuzz_ratio("axxxxxxx", "ayyyyyyy"), 12);
  // M = 3, T = 16: 100 * 6/16 = 37.5 -> 38.
  EXPECT_EQ(fuzz_ratio("abcxxxxx", "abcyyyyy"), 38);
}

TEST(FuzzRatio, CountsCodePointsNotBytes) {
  // "café" vs "cafe": 4 code points each, M = 3 ("caf"): 6/8 = 0.75 -> 75. (On UTF-8 bytes it would be 6/9 -> 67.)
  EXPECT_EQ(fuzz_ratio("caf\xC3\xA9", "cafe"), 75);
}

TEST(PythonRound, HalvesToEven) {
  EXPECT_EQ(rkv::python_round(0.5), 0.0);
  EXPECT_EQ(rkv::python_round(1.5), 2.0);
  EXPECT_EQ(rkv::python_round(2.5), 2.0);
  EXPECT_EQ(rkv::python_round(2.4999), 2.0);
  EXPECT_EQ(rkv::python_round(2.6), 3.0);
  EXPECT_EQ(rkv::python_round(-2.5), -2.0);
  EXPECT_EQ(rkv::python_round(99.5), 100.0);
}

}  // namespace
