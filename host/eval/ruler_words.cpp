// RULER's word-counting generators: common words extraction (NVIDIA/RULER scripts/data/synthetic/
// common_words_extraction.py) and frequent words extraction (freq_words_extraction.py); eval/ruler_text.hpp.
#include <cmath>
#include <set>

#include "core/errors.hpp"
#include "eval/ruler_families.hpp"

namespace rkv {

namespace {
const char* kCweHead =
    "Below is a numbered list of words. In these words, some appear more often than others. Memorize the ones that "
    "appear most often.\n";
const char* kCweQuestion = "\nQuestion: What are the 10 most common words in the above list?";
const char* kCwePrefix = "Answer: The top 10 words that appear most often in the list are:";

std::string numbered(const std::vector<std::string>& words) {
  std::string s;
  for (size_t i = 0; i < words.size(); ++i) s += (i ? " " : "") + std::to_string(i + 1) + ". " + words[i];
  return s;
}

/// get_example: n vocabulary words, the first num_cw of them `common` repeated cr times, the rest ur times, shuffled
/// and numbered. Returns the numbered list; `common` receives the common words.
std::string cwe_list(RulerRng& rng, int64_t n, int64_t cr, int64_t ur, int64_t num_cw,
                     const std::vector<std::string>& vocab, std::vector<std::string>& common) {
  if (n > static_cast<int64_t>(vocab.size()))
    throw InputError("ruler cwe: a list of " + std::to_string(n) + " distinct words needs a larger word pool than its " +
                     std::to_string(vocab.size()) + " words; use tasks.ruler.word_pool = \"wonderwords\", add "
                     "[data.eval] files or lower tasks.ruler.context_tokens");
  std::vector<std::string> words;
  for (int64_t i : ruler_sample(rng, static_cast<int64_t>(vocab.size()), n)) words.push_back(vocab[static_cast<size_t>(i)]);
  common.assign(words.begin(), words.begin() + std::min(num_cw, n));
  std::vector<std::string> list;
  for (int64_t r = 0; r < cr; ++r) list.insert(list.end(), common.begin(), common.end());
  for (int64_t r = 0; r < ur; ++r) list.insert(list.end(), words.begin() + static_cast<int64_t>(common.size()), words.end());
  ruler_shuffle(rng, list);
  return numbered(list);
}
}  // namespace

RulerText ruler_cwe_text(const RulerSubtask& s, int64_t size, uint64_t seed, int64_t context_tokens,
                         const RulerSources& src) {
  RulerRng rng(seed);
  // Below 4096 tokens the reference uses an example of 20 words (3 / 1 repeats) and 6 / 1 repeats; else 40 words
  // (10 / 3) and freq_cw / freq_ucw.
  const bool short_context = context_tokens < 4096;
  std::vector<std::string> shot_common, common;
  const std::string shot = cwe_list(rng, short_context ? 20 : 40, short_context ? 3 : 10, short_context ? 1 : 3,
                                    s.num_cw, src.vocabulary, shot_common);
  const std::string list = cwe_list(rng, size, short_context ? 6 : s.freq_cw, short_context ? 1 : s.freq_ucw, s.num_cw,
                                    src.vocabulary, common);
  RulerText t;
  t.user = kCweHead + shot + kCweQuestion + " " + kCwePrefix + " " + numbered(shot_common) + "\n" + kCweHead + list +
           kCweQuestion;
  t.question_at = t.user.size() - std::string(kCweQuestion).size();
  t.answer_prefix = kCwePrefix;
  t.answers = common;
  return t;
}

double ruler_zeta(double alpha) {
  const int n = 1000;
  double sum = 0;
  for (int k = 1; k < n; ++k) sum += std::pow(static_cast<double>(k), -alpha);
  return sum + std::pow(n, 1.0 - alpha) / (alpha - 1.0) + std::pow(n, -alpha) / 2.0;
}

int64_t ruler_fwe_count(int64_t size, int64_t rank, double alpha) {
  return static_cast<int64_t>(static_cast<double>(size) * std::pow(static_cast<double>(rank), -alpha) / ruler_zeta(alpha));
}

RulerText ruler_fwe_text(const RulerSubtask& s, int64_t size, uint64_t seed, int64_t context_tokens) {
  RulerRng rng(seed);
  // The vocabulary does not depend on `size`: vocab_size = max_seq_length // 50 random coded words, distinct, sorted,
  // shuffled, the first replaced by "..." (noise).
  const size_t vocab_size = static_cast<size_t>(std::max<int64_t>(context_tokens / 50, 4));
  std::set<std::string> distinct;
  while (distinct.size() < vocab_size) distinct.insert(ruler_letters(rng, s.coded_word_length, false));
  std::vector<std::string> vocab(distinct.begin(), distinct.end());
  ruler_shuffle(rng, vocab);
  vocab[0] = "...";
  std::vector<std::string> words;
  for (size_t k = 0; k < vocab.size(); ++k)
    for (int64_t i = ruler_fwe_count(size, static_cast<int64_t>(k + 1), s.alpha); i > 0; --i) words.push_back(vocab[k]);
  ruler_shuffle(rng, words);
  std::string context;
  for (size_t i = 0; i < words.size(); ++i) context += (i ? " " : "") + words[i];
  const std::string question =
      "\nQuestion: Do not provide any explanation. Please ignore the dots '....'. What are the three most frequently "
      "appeared words in the above coded text?";
  RulerText t;
  t.user = "Read the following coded text and track the frequency of each coded word. Find the three most frequently "
           "appeared coded words. " + context + question;
  t.question_at = t.user.size() - question.size();
  t.answer_prefix = "Answer: According to the coded text above, the three most frequently appeared words are:";
  t.answers.assign(vocab.begin() + 1, vocab.begin() + 4);
  return t;
}

}  // namespace rkv
