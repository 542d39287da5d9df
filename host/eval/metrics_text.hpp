// LongBench's text metrics (THUDM/LongBench v1, metrics.py), one pure function each, on UTF-8 text. Each returns a
// score in [0, 1] for one prediction against one ground truth; LongBench scores an example by the maximum over its
// answers and a dataset by 100 * the mean over examples (eval/longbench.hpp does both).
//
// Text is handled as Python 3 `str` is (eval/metrics_python_text.hpp): code points, Unicode lowercase, Unicode
// whitespace for split(); regexes are matched with PCRE2 in UTF + UCP mode, whose \d (\p{Nd}) and \w (letters, numbers,
// underscore) equal Python re's for str patterns. Invalid UTF-8 bytes count as U+FFFD.
//
//   qa_f1_score            SQuAD-style token F1 after normalize_answer (lowercase; drop ASCII punctuation, i.e.
//                          Python's string.punctuation; replace the words a/an/the (regex \b(a|an|the)\b) by a space;
//                          collapse whitespace): F1 = 2 P R / (P + R) with P = common / |pred|, R = common / |truth|,
//                          common = the multiset intersection size; 0 when nothing is common.
//   rouge_score            ROUGE-L F of the `rouge` package (pltrdy/rouge 1.0.1, Rouge().get_scores(avg=True)
//                          ["rouge-l"]["f"]): both texts are cut into sentences at every "." (empty pieces dropped,
//                          whitespace collapsed inside each), words are the pieces of split(" "); summary-level
//                          ROUGE-L with the package's defaults (exclusive=True): LCS_u = the number of distinct words
//                          in the union, over reference sentences r and candidate sentences c, of the words of the
//                          LCS of (r, c) that the package reconstructs (tie rule in rouge_lcs_words); m, n = the
//                          numbers of distinct words of reference and candidate; R = LCS_u / m, P = LCS_u / n,
//                          F = 2 P R / (P + R + 1e-8). 0 when either text has no sentence (LongBench catches the
//                          package's ValueError). Deviation: for a sentence pair longer than about 1000 words combined
//                          the package's recursive LCS reconstruction raises RecursionError, which LongBench also
//                          scores 0; here the value is computed.
//   classification_score   matches = the classes of all_classes that occur in the prediction (substring), in
//                          all_classes order; then, walking that list as Python's `for ... in list` with
//                          list.remove() inside does (the element after a removed one is skipped), every class that
//                          is a substring of the ground truth but not equal to it is removed; score = 1 / |matches|
//                          when the ground truth is in matches, else 0. (metrics.py's difflib fallback for no match is
//                          unreachable: its guard `em_match_list != 0` compares a list with 0 and is always true.)
//   retrieval_score        the ground truth's paragraph id = the first capture of "Paragraph (\d+)" in it; score =
//                          (number of digit runs \d+ in the prediction equal to that id) / (number of digit runs),
//                          0 when the prediction has none. Throws rkv::InputError when the ground truth has no
//                          "Paragraph N" (metrics.py raises IndexError).
//   count_score            as retrieval_score, with the ground truth itself as the number (string equality).
//   code_sim_score         the prediction's first line (after removing leading "\n", lines cut at "\n") containing
//                          none of "`", "#", "//" anywhere (metrics.py tests containment, not a prefix; "" when every
//                          line has one), then fuzz.ratio(line, ground_truth) / 100
//                          (eval/metrics_sequence_matcher.hpp).
//
// All functions are pure and thread-safe.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace rkv {

/// LongBench normalize_answer: lower -> remove string.punctuation -> replace \b(a|an|the)\b by " " ->
/// " ".join(split()).
/// Example: "The  Answer, is: an Apple!" -> "answer is apple".
std::string normalize_answer(std::string_view text);

/// LongBench f1_score on token lists (multiset intersection, F1 as in the file comment); 0 when nothing is common.
double token_f1(const std::vector<std::string>& prediction_tokens, const std::vector<std::string>& truth_tokens);

/// LongBench qa_f1_score: token_f1 of the whitespace-split normalize_answer of both texts.
double qa_f1_score(std::string_view prediction, std::string_view ground_truth);

/// Length of the longest common subsequence of two word sequences (dynamic programming, O(|x| |y|)).
size_t lcs_length(const std::vector<std::string>& x, const std::vector<std::string>& y);

/// The LCS of `x` (reference words) and `y` (candidate words) as pltrdy/rouge's _recon_lcs reconstructs it: walk back
/// from (|x|, |y|); equal words are taken; otherwise step to (i - 1, j) when table[i - 1][j] > table[i][j - 1], else to
/// (i, j - 1). Returns the words in order.
std::vector<std::string> rouge_lcs_words(const std::vector<std::string>& x, const std::vector<std::string>& y);

/// The sentences the `rouge` package scores: text.split(".") without empty pieces, each " ".join(piece.split()).
std::vector<std::string> rouge_sentences(std::string_view text);

/// Summary-level ROUGE-L of the `rouge` package (file comment) on already split sentences.
struct RougeL {
  size_t union_lcs = 0;       ///< LCS_u: distinct words in the union of the reconstructed LCSs
  size_t reference_words = 0; ///< m: distinct words of the reference
  size_t candidate_words = 0; ///< n: distinct words of the candidate
  double recall = 0, precision = 0, f = 0;
};
/// Throws std::invalid_argument when either list is empty (the package raises ValueError).
RougeL rouge_l_summary_level(const std::vector<std::string>& candidate_sentences,
                             const std::vector<std::string>& reference_sentences);

/// LongBench rouge_score: rouge_l_summary_level(rouge_sentences(prediction), rouge_sentences(ground_truth)).f, or 0
/// when either has no sentence.
double rouge_score(std::string_view prediction, std::string_view ground_truth);

/// LongBench classification_score (file comment).
double classification_score(std::string_view prediction, std::string_view ground_truth,
                            const std::vector<std::string>& all_classes);

/// Python re.findall(r"\d+", text): the maximal runs of Unicode decimal digits, in order.
std::vector<std::string> find_digit_runs(std::string_view text);

/// LongBench retrieval_score (file comment). Throws rkv::InputError when `ground_truth` has no "Paragraph N".
double retrieval_score(std::string_view prediction, std::string_view ground_truth);

/// LongBench count_score (file comment).
double count_score(std::string_view prediction, std::string_view ground_truth);

/// The line of the prediction code_sim_score compares (file comment).
std::string code_sim_line(std::string_view prediction);

/// LongBench code_sim_score = fuzz_ratio(code_sim_line(prediction), ground_truth) / 100.
double code_sim_score(std::string_view prediction, std::string_view ground_truth);

}  // namespace rkv
