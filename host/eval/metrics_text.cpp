// LongBench text metrics (see metrics_text.hpp).
#include "eval/metrics_text.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <new>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include "core/errors.hpp"
#include "eval/metrics_python_text.hpp"
#include "eval/metrics_sequence_matcher.hpp"
#include "tokenizer/utf8.hpp"

namespace rkv {
namespace {

// ---- A compiled PCRE2 pattern in Python-`str` mode (UTF + UCP) -----------------------------------------------------

class Regex {
 public:
  explicit Regex(const char* pattern) {
    int err = 0;
    PCRE2_SIZE err_off = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err,
                          &err_off, nullptr);
    if (!code_) throw std::logic_error(std::string("metrics_text: regex does not compile: ") + pattern);
  }
  ~Regex() { pcre2_code_free(code_); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  /// re.finditer over valid UTF-8 `subject`: (start, end) of group `group` of every non-overlapping match, left to
  /// right. The patterns used here never match the empty string.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view subject, int group) const {
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
        pcre2_match_data_create_from_pattern(code_, nullptr), &pcre2_match_data_free);
    if (!md) throw std::bad_alloc();
    std::vector<std::pair<size_t, size_t>> spans;
    size_t start = 0;
    while (start <= subject.size()) {
      const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), start, 0,
                                 md.get(), nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) throw std::runtime_error("metrics_text: PCRE2 match failed with code " + std::to_string(rc));
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
      spans.emplace_back(ov[2 * group], ov[2 * group + 1]);
      if (ov[1] == ov[0]) throw std::logic_error("metrics_text: empty regex match");
      start = ov[1];
    }
    return spans;
  }

 private:
  pcre2_code* code_ = nullptr;
};

const Regex& digits_regex() {
  static const Regex re(R"(\d+)");
  return re;
}
const Regex& articles_regex() {
  static const Regex re(R"(\b(a|an|the)\b)");
  return re;
}
const Regex& paragraph_regex() {
  static const Regex re(R"(Paragraph (\d+))");
  return re;
}

bool is_ascii_punctuation(char c) {
  // Python's string.punctuation: !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
}

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// Word sequences as integer ids, so the LCS table compares integers.
struct WordIds {
  std::unordered_map<std::string, uint32_t> ids;
  std::vector<uint32_t> map(const std::vector<std::string>& words) {
    std::vector<uint32_t> out;
    out.reserve(words.size());
    for (const auto& w : words) out.push_back(ids.emplace(w, static_cast<uint32_t>(ids.size())).first->second);
    return out;
  }
};

// The (|x| + 1) x (|y| + 1) LCS length table of pltrdy/rouge's _lcs, row-major.
std::vector<uint32_t> lcs_table(const std::vector<uint32_t>& x, const std::vector<uint32_t>& y) {
  const size_t n = x.size(), m = y.size();
  std::vector<uint32_t> t((n + 1) * (m + 1), 0);
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      t[i * (m + 1) + j] = x[i - 1] == y[j - 1] ? t[(i - 1) * (m + 1) + j - 1] + 1
                                                 : std::max(t[(i - 1) * (m + 1) + j], t[i * (m + 1) + j - 1]);
    }
  }
  return t;
}

// Positions in x of the LCS words, reconstructed with the package's tie rule.
std::vector<size_t> recon_lcs_positions(const std::vector<uint32_t>& x, const std::vector<uint32_t>& y) {
  const std::vector<uint32_t> t = lcs_table(x, y);
  const size_t m = y.size();
  std::vector<size_t> out;
  size_t i = x.size(), j = y.size();
  while (i > 0 && j > 0) {
    if (x[i - 1] == y[j - 1]) {
      out.push_back(i - 1);
      --i;
      --j;
    } else if (t[(i - 1) * (m + 1) + j] > t[i * (m + 1) + j - 1]) {
      --i;
    } else {
      --j;
    }
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> split_words(const std::vector<std::string>& sentences) {
  std::vector<std::string> words;
  for (const auto& s : sentences) {
    for (auto& w : pytext::python_split(s, " ")) words.push_back(std::move(w));
  }
  return words;
}

}  // namespace

// ---- QA F1 ----------------------------------------------------------------------------------------------------------

std::string normalize_answer(std::string_view text) {
  const std::string lowered = pytext::python_lower(text);  // valid UTF-8 from here on
  std::string no_punct;
  no_punct.reserve(lowered.size());
  for (char c : lowered) {
    if (!is_ascii_punctuation(c)) no_punct += c;  // ASCII bytes never occur inside a multi-byte sequence
  }
  std::string no_articles;
  size_t pos = 0;
  for (const auto& [start, end] : articles_regex().find_all(no_punct, 0)) {
    no_articles.append(no_punct, pos, start - pos);
    no_articles += ' ';
    pos = end;
  }
  no_articles.append(no_punct, pos, std::string::npos);
  return pytext::python_collapse_whitespace(no_articles);
}

double token_f1(const std::vector<std::string>& prediction_tokens, const std::vector<std::string>& truth_tokens) {
  std::map<std::string, long> truth_counts;
  for (const auto& t : truth_tokens) ++truth_counts[t];
  long num_same = 0;
  for (const auto& t : prediction_tokens) {
    auto it = truth_counts.find(t);
    if (it != truth_counts.end() && it->second > 0) {
      --it->second;
      ++num_same;
    }
  }
  if (num_same == 0) return 0.0;
  const double precision = 1.0 * static_cast<double>(num_same) / static_cast<double>(prediction_tokens.size());
  const double recall = 1.0 * static_cast<double>(num_same) / static_cast<double>(truth_tokens.size());
  return (2 * precision * recall) / (precision + recall);
}

double qa_f1_score(std::string_view prediction, std::string_view ground_truth) {
  return token_f1(pytext::python_split(normalize_answer(prediction)),
                  pytext::python_split(normalize_answer(ground_truth)));
}

// ---- ROUGE-L --------------------------------------------------------------------------------------------------------

size_t lcs_length(const std::vector<std::string>& x, const std::vector<std::string>& y) {
  WordIds ids;
  const auto xi = ids.map(x), yi = ids.map(y);
  return lcs_table(xi, yi).back();
}

std::vector<std::string> rouge_lcs_words(const std::vector<std::string>& x, const std::vector<std::string>& y) {
  WordIds ids;
  const auto xi = ids.map(x), yi = ids.map(y);
  std::vector<std::string> out;
  for (size_t p : recon_lcs_positions(xi, yi)) out.push_back(x[p]);
  return out;
}

std::vector<std::string> rouge_sentences(std::string_view text) {
  std::vector<std::string> sentences;
  for (const auto& piece : pytext::python_split(text, ".")) {
    if (!piece.empty()) sentences.push_back(pytext::python_collapse_whitespace(piece));
  }
  return sentences;
}

RougeL rouge_l_summary_level(const std::vector<std::string>& candidate_sentences,
                             const std::vector<std::string>& reference_sentences) {
  if (candidate_sentences.empty() || reference_sentences.empty()) {
    throw std::invalid_argument("Collections must contain at least 1 sentence.");
  }
  const auto ref_words = split_words(reference_sentences);
  const auto cand_words = split_words(candidate_sentences);
  RougeL out;
  out.reference_words = std::set<std::string>(ref_words.begin(), ref_words.end()).size();
  out.candidate_words = std::set<std::string>(cand_words.begin(), cand_words.end()).size();

  WordIds ids;
  std::vector<std::vector<uint32_t>> cand_ids;
  for (const auto& c : candidate_sentences) cand_ids.push_back(ids.map(pytext::python_split(c, " ")));
  std::set<uint32_t> lcs_union;  // distinct words (exclusive=True keeps sets of words, not positions)
  for (const auto& r : reference_sentences) {
    const auto r_ids = ids.map(pytext::python_split(r, " "));
    for (const auto& c : cand_ids) {
      for (size_t p : recon_lcs_positions(r_ids, c)) lcs_union.insert(r_ids[p]);
    }
  }
  out.union_lcs = lcs_union.size();
  // m and n are at least 1 here: every sentence yields at least one (possibly empty) word.
  out.recall = static_cast<double>(out.union_lcs) / static_cast<double>(out.reference_words);
  out.precision = static_cast<double>(out.union_lcs) / static_cast<double>(out.candidate_words);
  out.f = 2.0 * ((out.precision * out.recall) / (out.precision + out.recall + 1e-8));
  return out;
}

double rouge_score(std::string_view prediction, std::string_view ground_truth) {
  const auto hyp = rouge_sentences(prediction);
  const auto ref = rouge_sentences(ground_truth);
  if (hyp.empty() || ref.empty()) return 0.0;
  return rouge_l_summary_level(hyp, ref).f;
}

// ---- Classification, retrieval, count -------------------------------------------------------------------------------

double classification_score(std::string_view prediction, std::string_view ground_truth,
                            const std::vector<std::string>& all_classes) {
  const std::string pred = utf8::sanitize(prediction);
  const std::string truth = utf8::sanitize(ground_truth);
  std::vector<std::string> matches;
  for (const auto& c : all_classes) {
    const std::string cls = utf8::sanitize(c);
    if (contains(pred, cls)) matches.push_back(cls);
  }
  // `for match_term in em_match_list: ... em_match_list.remove(match_term)`: the list iterator walks by index, so
  // after a removal the element that moves into the current slot is skipped; remove() drops the first equal element.
  for (size_t i = 0; i < matches.size(); ++i) {
    const std::string term = matches[i];
    if (contains(truth, term) && term != truth) {
      matches.erase(std::find(matches.begin(), matches.end(), term));
    }
  }
  if (std::find(matches.begin(), matches.end(), truth) == matches.end()) return 0.0;
  return 1.0 / static_cast<double>(matches.size());
}

std::vector<std::string> find_digit_runs(std::string_view text) {
  const std::string clean = utf8::sanitize(text);
  std::vector<std::string> runs;
  for (const auto& [start, end] : digits_regex().find_all(clean, 0)) runs.push_back(clean.substr(start, end - start));
  return runs;
}

namespace {
double fraction_equal(const std::vector<std::string>& numbers, const std::string& target) {
  if (numbers.empty()) return 0.0;
  const auto right = std::count(numbers.begin(), numbers.end(), target);
  return static_cast<double>(right) / static_cast<double>(numbers.size());
}
}  // namespace

double retrieval_score(std::string_view prediction, std::string_view ground_truth) {
  const std::string truth = utf8::sanitize(ground_truth);
  const auto ids = paragraph_regex().find_all(truth, 1);
  if (ids.empty()) {
    throw InputError("retrieval_score: the ground truth '" + truth.substr(0, 80) +
                     "' has no 'Paragraph N' (LongBench passage_retrieval answers look like \"Paragraph 12\")");
  }
  const std::string id = truth.substr(ids[0].first, ids[0].second - ids[0].first);
  return fraction_equal(find_digit_runs(prediction), id);
}

double count_score(std::string_view prediction, std::string_view ground_truth) {
  return fraction_equal(find_digit_runs(prediction), utf8::sanitize(ground_truth));
}

// ---- Code edit similarity -------------------------------------------------------------------------------------------

std::string code_sim_line(std::string_view prediction) {
  const std::string clean = utf8::sanitize(prediction);
  const size_t first = clean.find_first_not_of('\n');
  const std::string stripped = first == std::string::npos ? std::string() : clean.substr(first);
  for (const auto& line : pytext::python_split(stripped, "\n")) {
    if (!contains(line, "`") && !contains(line, "#") && !contains(line, "//")) return line;
  }
  return "";
}

double code_sim_score(std::string_view prediction, std::string_view ground_truth) {
  return fuzz_ratio(code_sim_line(prediction), ground_truth) / 100.0;
}

}  // namespace rkv
