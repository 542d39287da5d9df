// RULER's synthetic tasks without a model (eval/ruler_text.hpp, ruler_random.hpp, task_ruler.hpp's bisection and
// seeds) and RULER's scores (eval/ruler_metrics.hpp); each expected value is worked out in the comment beside it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/errors.hpp"
#include "eval/ruler_metrics.hpp"
#include "eval/ruler_families.hpp"
#include "eval/ruler_text.hpp"
#include "runner/tasks/ruler.hpp"

namespace {

using Words = std::vector<std::string>;

/// Non-overlapping occurrences of `what` in `text`.
int64_t count_of(const std::string& text, const std::string& what) {
  int64_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

const rkv::RulerSubtask& subtask(const std::string& name) {
  const rkv::RulerSubtask* s = rkv::find_ruler_subtask(name);
  EXPECT_NE(s, nullptr) << name;
  return *s;
}

/// Sources with a small essay (three sentences of 4 + 3 + 2 words) and a 12-word vocabulary.
rkv::RulerSources small_sources() {
  return rkv::ruler_sources(
      "It was a morning. She came home! Was it? "
      "apple banana cherry damson elder fig grape hazel iris juniper kale lemon");
}

// ---- scores ---------------------------------------------------------------------------------------------------------

TEST(RulerScore, StringMatchAllIsTheFractionOfReferencesFoundIgnoringCase) {
  // "1234567" and "7654321" occur, "1111111" does not: 2 of 3.
  EXPECT_DOUBLE_EQ(rkv::ruler_string_match_all("The numbers are 1234567 and 7654321.", {"1234567", "7654321", "1111111"}),
                   2.0 / 3.0);
  // Case-insensitive both ways: "APPLE" finds "apple", "Banana" finds "BANANA"; "cherry" is missing: 2 of 3.
  EXPECT_DOUBLE_EQ(rkv::ruler_string_match_all("1. APPLE 2. Banana", {"apple", "BANANA", "cherry"}), 2.0 / 3.0);
  // Substring, not word match: "VAR ABCDE" contains "BCD".
  EXPECT_DOUBLE_EQ(rkv::ruler_string_match_all("VAR ABCDE", {"bcd"}), 1.0);
  EXPECT_DOUBLE_EQ(rkv::ruler_string_match_all("", {"x", "y"}), 0.0);
  // Python's lower() beyond ASCII: the reference "Émile" is found in "ÉMILE".
  EXPECT_DOUBLE_EQ(rkv::ruler_string_match_all("\xC3\x89MILE", {"\xC3\x89mile"}), 1.0);
  EXPECT_THROW(rkv::ruler_string_match_all("x", {}), rkv::InputError);
}

TEST(RulerScore, StringMatchPartIsOneWhenAnyReferenceIsFound) {
  EXPECT_DOUBLE_EQ(rkv::ruler_string_match_part("It was in Paris.", {"London", "paris"}), 1.0);
  EXPECT_DOUBLE_EQ(rkv::ruler_string_match_part("It was in Rome.", {"London", "paris"}), 0.0);
  EXPECT_THROW(rkv::ruler_string_match_part("x", {}), rkv::InputError);
}

// ---- random draws ---------------------------------------------------------------------------------------------------

TEST(RulerRandom, DrawsAreDistinctInRangeAndSeeded) {
  rkv::RulerRng a(3), b(3);
  const std::vector<int64_t> s = rkv::ruler_sample(a, 10, 10);
  EXPECT_EQ(std::set<int64_t>(s.begin(), s.end()).size(), 10u);  // a full sample is a permutation of 0..9
  EXPECT_EQ(*std::min_element(s.begin(), s.end()), 0);
  EXPECT_EQ(*std::max_element(s.begin(), s.end()), 9);
  EXPECT_EQ(rkv::ruler_sample(b, 10, 10), s);  // the same seed draws the same
  EXPECT_THROW(rkv::ruler_sample(a, 3, 4), rkv::InputError);
  std::vector<int> v = {1, 2, 3, 4, 5, 6};
  rkv::ruler_shuffle(a, v);
  std::vector<int> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int>{1, 2, 3, 4, 5, 6}));
  for (int i = 0; i < 50; ++i) {
    const std::string n = rkv::ruler_random_number(a, 7);
    EXPECT_EQ(n.size(), 7u);
    EXPECT_NE(n[0], '0');
    const std::string u = rkv::ruler_uuid(a);  // 8-4-4-4-12 hex, version nibble 4, variant 8/9/a/b
    ASSERT_EQ(u.size(), 36u);
    EXPECT_EQ(u[8], '-');
    EXPECT_EQ(u[13], '-');
    EXPECT_EQ(u[18], '-');
    EXPECT_EQ(u[23], '-');
    EXPECT_EQ(u[14], '4');
    EXPECT_NE(std::string("89ab").find(u[19]), std::string::npos) << u;
    const std::string w = rkv::ruler_letters(a, 5, true);
    EXPECT_TRUE(std::all_of(w.begin(), w.end(), [](char c) { return c >= 'A' && c <= 'Z'; })) << w;
  }
}

TEST(RulerRandom, ExampleSeedsDependOnEveryPart) {
  const uint64_t s = rkv::ruler_example_seed(42, "vt", 1024, 0);
  EXPECT_EQ(rkv::ruler_example_seed(42, "vt", 1024, 0), s);
  EXPECT_NE(rkv::ruler_example_seed(43, "vt", 1024, 0), s);
  EXPECT_NE(rkv::ruler_example_seed(42, "cwe", 1024, 0), s);
  EXPECT_NE(rkv::ruler_example_seed(42, "vt", 2048, 0), s);
  EXPECT_NE(rkv::ruler_example_seed(42, "vt", 1024, 1), s);
}

TEST(RulerFit, BisectionFindsTheLargestFittingSize) {
  // n^2 <= 50 holds for n <= 7.
  EXPECT_EQ(rkv::ruler_largest_fitting(1, 100, [](int64_t n) { return n * n <= 50; }), 7);
  EXPECT_EQ(rkv::ruler_largest_fitting(1, 5, [](int64_t n) { return n * n <= 50; }), 5);  // capped by hi
  EXPECT_EQ(rkv::ruler_largest_fitting(8, 100, [](int64_t n) { return n * n <= 50; }), 7);  // lo - 1: nothing fits
}

// ---- sources ----------------------------------------------------------------------------------------------------------

TEST(RulerSources, SentencesEndAtStopsBeforeClosingQuotes) {
  // "you?\"" ends a sentence (the quote is skipped), so does "no.\xE2\x80\x9D" (a right double quote); "Fine" is kept.
  EXPECT_EQ(rkv::ruler_sentences({"Hello", "there.", "How", "are", "you?\"", "I", "said", "no.\xE2\x80\x9D", "Fine"}),
            (Words{"Hello there.", "How are you?\"", "I said no.\xE2\x80\x9D", "Fine"}));
  EXPECT_EQ(rkv::ruler_sentences({}), Words{});
}

TEST(RulerSources, VocabularyIsLowercaseWordsOfThreeToTwelveLetters) {
  // "cat," -> cat; "(dog)" -> dog; "Emma" (capital), "o'clock" and "ran-away" (inner non-letter), "an" (2 letters)
  // and "extraordinarily" (15) are left out; "the" twice counts once.
  EXPECT_EQ(rkv::ruler_vocabulary("The cat, the (dog) Emma o'clock ran-away an dogs. the extraordinarily"),
            (Words{"cat", "dog", "dogs", "the"}));
  const rkv::RulerSources s = small_sources();
  EXPECT_EQ(s.essay_words.size(), 21u);  // 9 essay words + 12 fruit words
  // The 12 fruit words and came, home, morning, was ("It", "She", "Was" are capitalized, "a" and "it" too short).
  EXPECT_EQ(s.vocabulary.size(), 16u);
}

// ---- generators -------------------------------------------------------------------------------------------------------

TEST(RulerNiah, SingleNeedleInNoiseHasOneAnswerInTheContext) {
  const rkv::RulerText t = rkv::ruler_text(subtask("niah_single_1"), 10, 7, 1024, small_sources());
  ASSERT_EQ(t.answers.size(), 1u);
  const std::string value = t.answers[0];
  EXPECT_EQ(value.size(), 7u);
  // The key is two vocabulary words joined by "-"; it is named in the needle, the question and the answer prefix.
  const size_t k0 = t.answer_prefix.find("for ") + 4, k1 = t.answer_prefix.find(" mentioned");
  const std::string key = t.answer_prefix.substr(k0, k1 - k0);
  EXPECT_EQ(count_of(key, "-"), 1);
  EXPECT_EQ(t.answer_prefix, "The special magic number for " + key + " mentioned in the provided text is");
  EXPECT_EQ(count_of(t.user, "One of the special magic numbers for " + key + " is: " + value + ".\n"), 1)
      << t.user;  // one needle, followed by a noise line (it never lands last: indexes are < size)
  EXPECT_EQ(count_of(t.user, "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."),
            10);
  EXPECT_EQ(t.user.rfind("A special magic number is hidden within the following text. Make sure to memorize it. I will "
                         "quiz you about the number afterwards.\n", 0), 0u);
  EXPECT_EQ(t.user.substr(t.question_at),
            "\nWhat is the special magic number for " + key + " mentioned in the provided text?");
  // The same seed gives the same sample; another seed another.
  EXPECT_EQ(rkv::ruler_text(subtask("niah_single_1"), 10, 7, 1024, small_sources()).user, t.user);
  EXPECT_NE(rkv::ruler_text(subtask("niah_single_1"), 10, 8, 1024, small_sources()).user, t.user);
  EXPECT_THROW(rkv::ruler_text(subtask("niah_single_1"), 0, 7, 1024, small_sources()), rkv::InputError);
}

TEST(RulerNiah, EssayHaystackKeepsEveryWordAndAddsTheNeedles) {
  // niah_multivalue: one key, 4 values, in 9 essay words: the context holds the 9 words and 4 needles; the question is
  // plural.
  const rkv::RulerText t = rkv::ruler_text(subtask("niah_multivalue"), 9, 1, 1024, small_sources());
  ASSERT_EQ(t.answers.size(), 4u);
  for (const auto& v : t.answers) EXPECT_EQ(count_of(t.user, " is: " + v + "."), 1) << v;
  EXPECT_EQ(t.user.rfind("Some special magic numbers are hidden", 0), 0u);
  EXPECT_NE(t.user.substr(t.question_at).find("\nWhat are all the special magic numbers for "), std::string::npos);
  EXPECT_EQ(t.answer_prefix.substr(t.answer_prefix.size() - 3), "are");
  const std::string context = t.user.substr(t.user.find('\n') + 1, t.question_at - t.user.find('\n') - 1);
  // 9 essay words + 4 needles of 10 words ("One of the special magic numbers for K is: V.").
  EXPECT_EQ(rkv::ruler_sources(context).essay_words.size(), 9u + 4u * 10u);
}

TEST(RulerNiah, MultiqueryAsksForFourKeysWithTheirValues) {
  const rkv::RulerText t = rkv::ruler_text(subtask("niah_multiquery"), 30, 2, 1024, small_sources());
  ASSERT_EQ(t.answers.size(), 4u);
  EXPECT_EQ(count_of(t.answer_prefix, ", "), 3);  // "k1, k2, k3, and k4"
  EXPECT_EQ(count_of(t.answer_prefix, ", and "), 1);
  ASSERT_EQ(t.queries.size(), 4u);  // the keys asked, in answer order: "... for <key i> is: <answer i>."
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(count_of(t.user, t.queries[i] + " is: " + t.answers[i] + "."), 1) << i;
  for (const auto& v : t.answers) EXPECT_EQ(count_of(t.user, v), 1) << v;
}

TEST(RulerNiah, NeedleHaystackIsAllNeedlesAndUuidsAreUuids) {
  // niah_multikey_3: uuid keys and values; 12 distractor needles plus the real one, one per line.
  const rkv::RulerText t = rkv::ruler_text(subtask("niah_multikey_3"), 12, 4, 1024, small_sources());
  ASSERT_EQ(t.answers.size(), 1u);
  EXPECT_EQ(t.answers[0].size(), 36u);
  EXPECT_EQ(count_of(t.user, "One of the special magic uuids for "), 13);
  EXPECT_EQ(count_of(t.user, t.answers[0]), 1);
}

TEST(RulerVariableTracking, TheChainIsInOrderAndTheAnswerIsItsVariables) {
  const rkv::RulerText t = rkv::ruler_text(subtask("vt"), 8, 5, 1024, small_sources(), "EXAMPLE\n\n");
  ASSERT_EQ(t.answers.size(), 5u);
  const size_t v = t.answer_prefix.find("value ") + 6;
  const std::string value = t.answer_prefix.substr(v, 5);
  EXPECT_EQ(t.answer_prefix, "Answer: According to the chain(s) of variable assignment in the text above, 5 variables "
                             "are assigned the value " + value + ", they are:");
  // VAR A = value, VAR B = VAR A, ... in this order, each on its own line between 8 noise lines.
  size_t at = t.user.find("VAR " + t.answers[0] + " = " + value + "\n");
  ASSERT_NE(at, std::string::npos);
  for (size_t j = 1; j < 5; ++j) {
    const size_t next = t.user.find("VAR " + t.answers[j] + " = VAR " + t.answers[j - 1] + " \n");
    ASSERT_NE(next, std::string::npos) << j;
    EXPECT_GT(next, at);
    at = next;
  }
  EXPECT_EQ(count_of(t.user, "There and back again."), 8);
  EXPECT_EQ(t.user.rfind("EXAMPLE\n\nMemorize and track the chain(s)", 0), 0u);
  EXPECT_EQ(t.user.substr(t.question_at),
            "\nQuestion: Find all variables that are assigned the value " + value + " in the text above.");
  // The in-context example: 3-letter variables, its own answer after the prefix.
  const std::string icl = rkv::ruler_vt_example(subtask("vt"), 6, 9);
  EXPECT_EQ(icl.substr(icl.size() - 2), "\n\n");
  const size_t they = icl.rfind("they are:  ");
  ASSERT_NE(they, std::string::npos);
  EXPECT_EQ(icl.size() - (they + 11), 5 * 3 + 4 + 2);  // "ABC DEF GHI JKL MNO" and "\n\n"
}

TEST(RulerWords, CommonWordsRepeatSixTimesBelow4096Tokens) {
  // A vocabulary of 40 words "qaa" .. "qbn".
  std::string text;
  for (int i = 0; i < 40; ++i) text += std::string{'q', static_cast<char>('a' + i / 26), static_cast<char>('a' + i % 26), ' '};
  ASSERT_EQ(rkv::ruler_vocabulary(text).size(), 40u);
  // 13 listed words: the 10 common ones 6 times, the other 3 once: 63 numbered entries after a solved example of 20
  // words (10 x 3 + 10 x 1 = 40 entries).
  const rkv::RulerText t = rkv::ruler_text(subtask("cwe"), 13, 3, 1024, rkv::ruler_sources(text));
  ASSERT_EQ(t.answers.size(), 10u);
  const size_t main_list = t.user.rfind("Below is a numbered list of words.");
  ASSERT_NE(main_list, std::string::npos);
  const std::string list = t.user.substr(main_list, t.question_at - main_list) + " ";
  EXPECT_NE(list.find(" 63. "), std::string::npos);
  EXPECT_EQ(list.find(" 64. "), std::string::npos);
  for (const auto& w : t.answers) EXPECT_EQ(count_of(list, ". " + w + " "), 6) << w;
  // The solved example lists its common words after the answer prefix.
  EXPECT_NE(t.user.find("in the list are: 1. "), std::string::npos);
  EXPECT_EQ(t.answer_prefix, "Answer: The top 10 words that appear most often in the list are:");
  // A vocabulary of 3 words cannot hold the example's 20.
  EXPECT_THROW(rkv::ruler_text(subtask("cwe"), 13, 3, 1024, rkv::ruler_sources("apple banana cherry")),
               rkv::InputError);
}

TEST(RulerWords, FrequentWordsFollowZipfCounts) {
  // zeta(2) = pi^2 / 6 = 1.6449340668...
  EXPECT_NEAR(rkv::ruler_zeta(2.0), M_PI * M_PI / 6.0, 1e-9);
  // int(1000 k^-2 / 1.6449...): k = 1: 607.9 -> 607; 2: 151.98 -> 151; 3: 67.5 -> 67; 4: 37.99 -> 37.
  EXPECT_EQ(rkv::ruler_fwe_count(1000, 1, 2.0), 607);
  EXPECT_EQ(rkv::ruler_fwe_count(1000, 2, 2.0), 151);
  EXPECT_EQ(rkv::ruler_fwe_count(1000, 3, 2.0), 67);
  EXPECT_EQ(rkv::ruler_fwe_count(1000, 4, 2.0), 37);
  // The smallest size with a fourth word: int(n / (16 zeta(2))) >= 1 from n = ceil(26.32) = 27.
  EXPECT_EQ(rkv::ruler_min_size(subtask("fwe")), 27);
  const rkv::RulerText t = rkv::ruler_text(subtask("fwe"), 1000, 6, 1024, small_sources());
  ASSERT_EQ(t.answers.size(), 3u);
  const std::string context = t.user.substr(0, t.question_at);
  std::map<std::string, int64_t> seen;
  for (const auto& w : rkv::ruler_sources(context).essay_words) ++seen[w];
  EXPECT_EQ(seen["..."], 607);
  EXPECT_EQ(seen[t.answers[0]], 151);
  EXPECT_EQ(seen[t.answers[1]], 67);
  EXPECT_EQ(seen[t.answers[2]], 37);
  for (const auto& a : t.answers) EXPECT_EQ(a.size(), 6u);
}

}  // namespace
