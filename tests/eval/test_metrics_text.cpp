// LongBench's metrics (eval/metrics_text.hpp) on small hand-made cases; each expected value is worked out in the
// comment beside it from the definition in THUDM/LongBench metrics.py (and pltrdy/rouge 1.0.1 for ROUGE-L).
#include <gtest/gtest.h>

#include "core/errors.hpp"
#include "eval/metrics_text.hpp"

namespace {

using Words = std::vector<std::string>;

// ---- normalize_answer -----------------------------------------------------------------------------------------------

TEST(NormalizeAnswer, LowercasePunctuationArticlesWhitespace) {
  // lower: "the  answer, is: an apple!" -> no punctuation: "the  answer is an apple"
  // -> articles to spaces: "   answer is   apple" -> whitespace fix: "answer is apple".
  EXPECT_EQ(rkv::normalize_answer("The  Answer, is: an Apple!"), "answer is apple");
  // Articles only as whole words: "theater" keeps its "the"; "a-team" loses the hyphen first and becomes "ateam".
  EXPECT_EQ(rkv::normalize_answer("Theater a-team"), "theater ateam");
  // "A.N. The" -> "an the" -> both are articles -> "".
  EXPECT_EQ(rkv::normalize_answer("A.N. The"), "");
  // Underscore is in string.punctuation: "the_end" -> "theend" (no article left).
  EXPECT_EQ(rkv::normalize_answer("the_end"), "theend");
  EXPECT_EQ(rkv::normalize_answer(""), "");
}

TEST(NormalizeAnswer, UnicodeEdgeCases) {
  // Non-ASCII letters are lowercased and kept; non-ASCII punctuation (the curly quotes) is not in string.punctuation.
  EXPECT_EQ(rkv::normalize_answer("\xC3\x9Cn\xC3\xAF" "code CAF\xC3\x89 \xE2\x80\x9Cq\xE2\x80\x9D"),
            "\xC3\xBCn\xC3\xAF" "code caf\xC3\xA9 \xE2\x80\x9Cq\xE2\x80\x9D");
  // Word boundaries are Unicode: in "éthe" the "é" is a word character, so "the" is not a separate word ...
  EXPECT_EQ(rkv::normalize_answer("\xC3\xA9the"), "\xC3\xA9the");
  // ... while "€" (a currency symbol) is not: "the€" -> " €" -> "€".
  EXPECT_EQ(rkv::normalize_answer("the\xE2\x82\xAC"), "\xE2\x82\xAC");
  // NO-BREAK SPACE and EM SPACE are whitespace and non-word:
  // "a\u00A0cat\u2003sat" -> " \u00A0cat\u2003sat" -> "cat sat".
  EXPECT_EQ(rkv::normalize_answer("a\xC2\xA0" "cat\xE2\x80\x83sat"), "cat sat");
}

// ---- qa_f1_score ----------------------------------------------------------------------------------------------------

TEST(QaF1, TokenOverlap) {
  // pred "The cat sat on the mat" -> [cat, sat, on, mat] (4); truth "a cat on a mat" -> [cat, on, mat] (3).
  // common = 3; P = 3/4, R = 3/3 = 1; F1 = 2 * 0.75 * 1 / 1.75 = 6/7.
  EXPECT_DOUBLE_EQ(rkv::qa_f1_score("The cat sat on the mat", "a cat on a mat"), 6.0 / 7.0);
  // Counts are a multiset: pred [paris, paris, london], truth [paris]: common = min(2, 1) = 1; P = 1/3, R = 1;
  // F1 = 2 (1/3) / (4/3) = 0.5.
  EXPECT_DOUBLE_EQ(rkv::qa_f1_score("Paris, Paris, London", "paris"), 0.5);
  EXPECT_DOUBLE_EQ(rkv::qa_f1_score("Paris.", "PARIS"), 1.0);
  EXPECT_DOUBLE_EQ(rkv::qa_f1_score("Berlin", "Paris"), 0.0);
  EXPECT_DOUBLE_EQ(rkv::qa_f1_score("", "Paris"), 0.0);
  // Both normalize to nothing: no common token -> 0 (not 1).
  EXPECT_DOUBLE_EQ(rkv::qa_f1_score("the", "a"), 0.0);
}

TEST(QaF1, TokenF1OnLists) {
  // [a, b, b] vs [b, b, c, d]: common b x2 = 2; P = 2/3, R = 2/4; F1 = 2 (1/3) / (7/6) = 4/7.
  EXPECT_DOUBLE_EQ(rkv::token_f1({"a", "b", "b"}, {"b", "b", "c", "d"}), 4.0 / 7.0);
  EXPECT_DOUBLE_EQ(rkv::token_f1({}, {}), 0.0);
}

// ---- LCS and ROUGE-L ------------------------------------------------------------------------------------------------

TEST(Lcs, KnownSequences) {
  // CLRS 15.4: x = ABCBDAB, y = BDCABA: LCS length 4.
  const Words x{"A", "B", "C", "B", "D", "A", "B"}, y{"B", "D", "C", "A", "B", "A"};
  EXPECT_EQ(rkv::lcs_length(x, y), 4u);
  // The package's walk back from (7, 6) (table c[i][j] filled by hand):
  //  (7,6) B != A, c[6][6] = 4 is not > c[7][5] = 4 -> (7,5); B == B take B -> (6,4); A == A take A -> (5,3);
  //  D != C, c[4][3] = 2 is not > c[5][2] = 2 -> (5,2); D == D take D -> (4,1); B == B take B -> (3,0): stop.
  //  Reversed: B D A B (CLRS's own walk gives B C B A: the tie rule matters).
  EXPECT_EQ(rkv::rouge_lcs_words(x, y), (Words{"B", "D", "A", "B"}));
  EXPECT_EQ(rkv::lcs_length({"a", "b", "c"}, {}), 0u);
  EXPECT_EQ(rkv::lcs_length({"a", "b", "c"}, {"a", "b", "c"}), 3u);
  EXPECT_EQ(rkv::lcs_length({"a", "b", "c"}, {"c", "b", "a"}), 1u);
}

TEST(RougeL, SentencesAreCutAtDots) {
  // "Hello  world. \n. Bye" -> split(".") = ["Hello  world", " \n", " Bye"] (none empty) -> whitespace collapsed:
  // ["Hello world", "", "Bye"].
  EXPECT_EQ(rkv::rouge_sentences("Hello  world. \n. Bye"), (Words{"Hello world", "", "Bye"}));
  EXPECT_EQ(rkv::rouge_sentences("..."), Words{});
  EXPECT_EQ(rkv::rouge_sentences("3.5 m"), (Words{"3", "5 m"}));
}

TEST(RougeL, SingleSentenceUsesDistinctWords) {
  // cand "the cat sat on the mat", ref "the cat is on the mat": the LCS is "the cat on the mat" (5 words) but the
  // package keeps sets of words (exclusive=True): {the, cat, on, mat} -> LCS_u = 4. m = |{the, cat, is, on, mat}| = 5,
  // n = |{the, cat, sat, on, mat}| = 5. R = P = 0.8; F = 2 (0.64 / (1.6 + 1e-8)).
  const auto r = rkv::rouge_l_summary_level({"the cat sat on the mat"}, {"the cat is on the mat"});
  EXPECT_EQ(r.union_lcs, 4u);
  EXPECT_EQ(r.reference_words, 5u);
  EXPECT_EQ(r.candidate_words, 5u);
  EXPECT_DOUBLE_EQ(r.recall, 0.8);
  EXPECT_DOUBLE_EQ(r.precision, 0.8);
  EXPECT_DOUBLE_EQ(r.f, 2.0 * ((0.8 * 0.8) / (0.8 + 0.8 + 1e-8)));
  EXPECT_DOUBLE_EQ(rkv::rouge_score("the cat sat on the mat", "the cat is on the mat"), r.f);
}

TEST(RougeL, UnionLcsOverCandidateSentences) {
  // Lin's example (rouge-working-note): r = "w1 w2 w3 w4 w5", c1 = "w1 w2 w6 w7 w8", c2 = "w1 w3 w8 w9 w5".
  // LCS(r, c1) = w1 w2, LCS(r, c2) = w1 w3 w5; union {w1, w2, w3, w5}: LCS_u = 4. m = 5; n = distinct words of
  // c1 and c2 = {w1, w2, w6, w7, w8, w3, w9, w5} = 8. R = 4/5, P = 4/8; F = 2 (0.4 / (1.3 + 1e-8)).
  const double f = rkv::rouge_score("w1 w2 w6 w7 w8. w1 w3 w8 w9 w5", "w1 w2 w3 w4 w5");
  EXPECT_DOUBLE_EQ(f, 2.0 * ((0.5 * 0.8) / (0.5 + 0.8 + 1e-8)));
  const auto r = rkv::rouge_l_summary_level(rkv::rouge_sentences("w1 w2 w6 w7 w8. w1 w3 w8 w9 w5"), {"w1 w2 w3 w4 w5"});
  EXPECT_EQ(r.union_lcs, 4u);
  EXPECT_EQ(r.candidate_words, 8u);
}

TEST(RougeL, EmptyTextsScoreZero) {
  EXPECT_EQ(rkv::rouge_score("", "a summary"), 0.0);
  EXPECT_EQ(rkv::rouge_score("...", "a summary"), 0.0);
  EXPECT_EQ(rkv::rouge_score("a summary", ""), 0.0);
  EXPECT_THROW(rkv::rouge_l_summary_level({}, {"x"}), std::invalid_argument);
  // No common word: LCS_u = 0 -> F = 0.
  EXPECT_EQ(rkv::rouge_score("alpha beta", "gamma"), 0.0);
  // Identical one-word texts: R = P = 1, F = 2 (1 / (2 + 1e-8)).
  EXPECT_DOUBLE_EQ(rkv::rouge_score("word", "word"), 2.0 * (1.0 / (2.0 + 1e-8)));
}

// ---- classification_score -------------------------------------------------------------------------------------------

TEST(Classification, MatchesAmongClasses) {
  const Words classes{"city", "country", "state"};
  // One class in the prediction, the right one: 1 / 1.
  EXPECT_DOUBLE_EQ(rkv::classification_score("Type: city", "city", classes), 1.0);
  // Two classes in the prediction: [city, country]; neither is a proper substring of "city" -> 1 / 2.
  EXPECT_DOUBLE_EQ(rkv::classification_score("city or country", "city", classes), 0.5);
  // Only a wrong class: 0. No class at all: 0. Matching is case-sensitive substring search.
  EXPECT_DOUBLE_EQ(rkv::classification_score("country", "city", classes), 0.0);
  EXPECT_DOUBLE_EQ(rkv::classification_score("no idea", "city", classes), 0.0);
  EXPECT_DOUBLE_EQ(rkv::classification_score("City", "city", classes), 0.0);
}

TEST(Classification, ClassesInsideTheTruthAreDropped) {
  // classes [Human, Human being, Date], truth "Human being", prediction "Human being": matches [Human, Human being];
  // "Human" is a proper substring of the truth -> removed -> [Human being] -> 1 / 1.
  EXPECT_DOUBLE_EQ(rkv::classification_score("Human being", "Human being", {"Human", "Human being", "Date"}), 1.0);
}

TEST(Classification, RemovalDuringIterationSkipsTheNextElement) {
  // classes [a, ab, abc], truth "abc", prediction "abc": matches [a, ab, abc]. Python's loop: index 0 "a" is a proper
  // substring of "abc" -> removed, list [ab, abc]; index 1 is now "abc" (equal to the truth, kept); "ab" was skipped.
  // Final [ab, abc], truth among them -> 1 / 2.
  EXPECT_DOUBLE_EQ(rkv::classification_score("abc", "abc", {"a", "ab", "abc"}), 0.5);
}

// ---- retrieval_score and count_score --------------------------------------------------------------------------------

TEST(Retrieval, ParagraphNumber) {
  // Truth id 12. Prediction numbers [12] -> 1/1; [12, 3] -> 1/2; [7] -> 0; none -> 0.
  EXPECT_DOUBLE_EQ(rkv::retrieval_score("Paragraph 12", "Paragraph 12"), 1.0);
  EXPECT_DOUBLE_EQ(rkv::retrieval_score("Paragraph 12 or Paragraph 3", "Paragraph 12"), 0.5);
  EXPECT_DOUBLE_EQ(rkv::retrieval_score("The answer is 7", "Paragraph 12"), 0.0);
  EXPECT_DOUBLE_EQ(rkv::retrieval_score("I do not know", "Paragraph 12"), 0.0);
  // Digit runs, not words: "12x12" -> [12, 12] -> 2/2. "012" != "12" -> 0/1.
  EXPECT_DOUBLE_EQ(rkv::retrieval_score("12x12", "Paragraph 12"), 1.0);
  EXPECT_DOUBLE_EQ(rkv::retrieval_score("Paragraph 012", "Paragraph 12"), 0.0);
  // The first "Paragraph N" of the truth is the id: 3. Prediction [3, 5] -> 1/2.
  EXPECT_DOUBLE_EQ(rkv::retrieval_score("3 then 5", "Paragraph 3 and Paragraph 5"), 0.5);
  // Unicode decimal digits are digit runs too (Python's \d): Arabic-Indic "١٢" is one run, not equal to "12" -> 0/1.
  EXPECT_EQ(rkv::find_digit_runs("Paragraph \xD9\xA1\xD9\xA2"), (Words{"\xD9\xA1\xD9\xA2"}));
  EXPECT_DOUBLE_EQ(rkv::retrieval_score("Paragraph \xD9\xA1\xD9\xA2", "Paragraph 12"), 0.0);
}

TEST(Retrieval, TruthWithoutParagraphIsAnInputError) {
  EXPECT_THROW(rkv::retrieval_score("12", "Section 12"), rkv::InputError);
  EXPECT_THROW(rkv::retrieval_score("12", "paragraph 12"), rkv::InputError);  // case-sensitive, as the regex
}

TEST(Count, NumbersEqualToTheTruth) {
  // Truth "5". [5, 5] -> 2/2; [5, 6] -> 1/2; [15] -> 0/1; none -> 0.
  EXPECT_DOUBLE_EQ(rkv::count_score("There are 5 unique paragraphs, 5.", "5"), 1.0);
  EXPECT_DOUBLE_EQ(rkv::count_score("5 or 6", "5"), 0.5);
  EXPECT_DOUBLE_EQ(rkv::count_score("15", "5"), 0.0);
  EXPECT_DOUBLE_EQ(rkv::count_score("none", "5"), 0.0);
  EXPECT_EQ(rkv::find_digit_runs("a1b22c333"), (Words{"1", "22", "333"}));
}

// ---- code_sim_score -------------------------------------------------------------------------------------------------

TEST(CodeSim, FirstLineWithoutCommentOrFence) {
  // Leading newlines go; "```python" and "# comment" contain "`" / "#"; the first clean line is "x = foo(1)".
  EXPECT_EQ(rkv::code_sim_line("\n\n```python\n# comment\nx = foo(1)\n```"), "x = foo(1)");
  // Containment, not prefix: a trailing comment disqualifies the line; so does "//" inside a string.
  EXPECT_EQ(rkv::code_sim_line("a = 1  # note\nb = 2"), "b = 2");
  EXPECT_EQ(rkv::code_sim_line("url = 'http://x'\ny"), "y");
  EXPECT_EQ(rkv::code_sim_line("# only\n// comments"), "");
  EXPECT_EQ(rkv::code_sim_line(""), "");
  // An empty first line (after a non-newline start) is a clean line: " \n" is not stripped (only "\n" is).
  EXPECT_EQ(rkv::code_sim_line(" \nx"), " ");
}

TEST(CodeSim, FuzzRatioOverHundred) {
  // fuzz.ratio("x = foo(1)", "x = foo(2)") = 90 (test_sequence_matcher) -> 0.9.
  EXPECT_DOUBLE_EQ(rkv::code_sim_score("# fix\nx = foo(1)", "x = foo(2)"), 0.9);
  EXPECT_DOUBLE_EQ(rkv::code_sim_score("return x", "return x"), 1.0);
  // Nothing left of the prediction vs a non-empty truth: ratio("", truth) = 0.
  EXPECT_DOUBLE_EQ(rkv::code_sim_score("# all comment", "return x"), 0.0);
  // Both empty: equal strings -> 100 -> 1.
  EXPECT_DOUBLE_EQ(rkv::code_sim_score("// all comment", ""), 1.0);
}

}  // namespace
