// The essay haystack and word pools of RULER's generators (eval/ruler_text.hpp): words, vocabulary, sentences, and
// RULER's own sources.
#include <algorithm>
#include <set>

#include "eval/ruler_text.hpp"

namespace rkv {

namespace {
bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }
bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/// Words separated by ASCII whitespace (the evaluation text's split, kept as it was so its prompts stay the same).
std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    const size_t b = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > b) words.push_back(text.substr(b, i - b));
  }
  return words;
}

/// The length in bytes of the Unicode whitespace character (Python's str.isspace(), which re's \s matches) that starts
/// at `text[i]` in UTF-8, or 0: the ASCII ones (\t \n \v \f \r, \x1c-\x1f, space), U+0085, U+00A0, U+1680,
/// U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
size_t python_space_at(const std::string& text, size_t i) {
  const auto b = [&](size_t k) { return i + k < text.size() ? static_cast<unsigned char>(text[i + k]) : 0u; };
  const unsigned c0 = b(0);
  if ((c0 >= 9 && c0 <= 13) || (c0 >= 0x1C && c0 <= 0x20)) return 1;
  if (c0 == 0xC2 && (b(1) == 0x85 || b(1) == 0xA0)) return 2;
  if (c0 == 0xE1 && b(1) == 0x9A && b(2) == 0x80) return 3;
  if (c0 == 0xE2 && b(1) == 0x80 && ((b(2) >= 0x80 && b(2) <= 0x8A) || b(2) == 0xA8 || b(2) == 0xA9 || b(2) == 0xAF))
    return 3;
  if (c0 == 0xE2 && b(1) == 0x81 && b(2) == 0x9F) return 3;
  if (c0 == 0xE3 && b(1) == 0x80 && b(2) == 0x80) return 3;
  return 0;
}

/// Words separated by Python's whitespace (re.sub(r"\s+", " ", text).split(" ") on a str, without empty ends).
std::vector<std::string> split_python_words(const std::string& text) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < text.size()) {
    for (size_t n; i < text.size() && (n = python_space_at(text, i)) > 0;) i += n;
    const size_t b = i;
    while (i < text.size() && python_space_at(text, i) == 0) ++i;
    if (i > b) words.push_back(text.substr(b, i - b));
  }
  return words;
}

/// Whether `word` ends a sentence: its last character before closing quotes and brackets is '.', '!' or '?'.
bool ends_sentence(const std::string& word) {
  std::string w = word;
  for (;;) {
    if (!w.empty() && (w.back() == '"' || w.back() == '\'' || w.back() == ')' || w.back() == ']')) {
      w.pop_back();
    } else if (w.size() >= 3 && (w.compare(w.size() - 3, 3, "\xE2\x80\x99") == 0 ||
                                 w.compare(w.size() - 3, 3, "\xE2\x80\x9D") == 0)) {
      w.resize(w.size() - 3);
    } else {
      break;
    }
  }
  return !w.empty() && (w.back() == '.' || w.back() == '!' || w.back() == '?');
}
}  // namespace

std::vector<std::string> ruler_vocabulary(const std::string& text) {
  std::set<std::string> vocab;
  for (const std::string& w : split_words(text)) {
    size_t b = 0, e = w.size();
    while (b < e && !is_letter(w[b])) ++b;
    while (e > b && !is_letter(w[e - 1])) --e;
    const std::string core = w.substr(b, e - b);
    if (core.size() < 3 || core.size() > 12) continue;
    if (std::all_of(core.begin(), core.end(), [](char c) { return c >= 'a' && c <= 'z'; })) vocab.insert(core);
  }
  return {vocab.begin(), vocab.end()};
}

RulerSources ruler_sources(const std::string& text) {
  RulerSources s;
  s.essay_words = split_words(text);
  s.essay_from_start = false;
  s.vocabulary = ruler_vocabulary(text);
  s.key_adjectives = s.vocabulary;
  s.key_nouns = s.vocabulary;
  return s;
}

void use_ruler_reference_essay(RulerSources& sources, const std::string& essays) {
  sources.essay_words = split_python_words(essays);
  sources.essay_from_start = true;
}

void use_ruler_wonderwords(RulerSources& sources, const std::vector<std::string>& nouns,
                           const std::vector<std::string>& adjectives, const std::vector<std::string>& verbs) {
  std::set<std::string> all(nouns.begin(), nouns.end());
  all.insert(adjectives.begin(), adjectives.end());
  all.insert(verbs.begin(), verbs.end());
  sources.vocabulary.assign(all.begin(), all.end());  // sorted(set(nouns + adjs + verbs))
  sources.key_adjectives = adjectives;
  sources.key_nouns = nouns;
}

std::vector<std::string> ruler_sentences(const std::vector<std::string>& words) {
  std::vector<std::string> sentences;
  std::string current;
  for (const std::string& w : words) {
    current += (current.empty() ? "" : " ") + w;
    if (ends_sentence(w)) sentences.push_back(std::move(current)), current.clear();
  }
  if (!current.empty()) sentences.push_back(std::move(current));
  return sentences;
}

}  // namespace rkv
