// The essay haystack and word pool of RULER's generators (eval/ruler_text.hpp): words, vocabulary, sentences.
#include <algorithm>
#include <set>

#include "eval/ruler_text.hpp"

namespace rkv {

namespace {
bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }
bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/// Whitespace-separated words (Python's re.sub(r'\s+', " ", text).split(" ") without the empty ends).
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

RulerSources ruler_sources(const std::string& text) { return RulerSources{split_words(text), ruler_vocabulary(text)}; }

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
