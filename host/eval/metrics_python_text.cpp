// Python str operations on UTF-8 (see metrics_python_text.hpp).
#include "eval/metrics_python_text.hpp"

#include <algorithm>
#include <stdexcept>

#include "tokenizer/utf8.hpp"

namespace rkv::pytext {

std::u32string to_code_points(std::string_view utf8_text) {
  std::u32string out;
  out.reserve(utf8_text.size());
  size_t pos = 0;
  while (pos < utf8_text.size()) {
    char32_t cp = 0;
    const size_t n = utf8::decode(utf8_text, pos, cp);
    if (n == 0) {
      out.push_back(utf8::kReplacement);
      pos += 1;
    } else {
      out.push_back(cp);
      pos += n;
    }
  }
  return out;
}

std::string to_utf8(std::u32string_view cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) {
    const bool valid = cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    utf8::append(out, valid ? cp : utf8::kReplacement);
  }
  return out;
}

bool python_isspace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

char32_t lower_code_point(char32_t cp) {
  // The last run whose first code point is <= cp is the only one that can contain it (runs are disjoint).
  const LowerRun* begin = kLowerRuns;
  const LowerRun* end = kLowerRuns + kLowerRunCount;
  const LowerRun* it = std::upper_bound(begin, end, cp, [](char32_t c, const LowerRun& r) { return c < r.first; });
  if (it == begin) return cp;
  const LowerRun& run = *(it - 1);
  if (cp > run.last || (cp - run.first) % static_cast<char32_t>(run.stride) != 0) return cp;
  return static_cast<char32_t>(static_cast<int64_t>(cp) + run.delta);
}

std::string python_lower(std::string_view text) {
  std::u32string out;
  for (char32_t cp : to_code_points(text)) {
    if (cp < 0x80) {
      out.push_back(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
    } else if (cp == 0x0130) {  // LATIN CAPITAL LETTER I WITH DOT ABOVE -> "i" + COMBINING DOT ABOVE (SpecialCasing)
      out.push_back(U'i');
      out.push_back(0x0307);
    } else {
      out.push_back(lower_code_point(cp));
    }
  }
  return to_utf8(out);
}

std::vector<std::string> python_split(std::string_view text) {
  std::vector<std::string> words;
  std::u32string word;
  for (char32_t cp : to_code_points(text)) {
    if (python_isspace(cp)) {
      if (!word.empty()) words.push_back(to_utf8(word));
      word.clear();
    } else {
      word.push_back(cp);
    }
  }
  if (!word.empty()) words.push_back(to_utf8(word));
  return words;
}

std::vector<std::string> python_split(std::string_view text, std::string_view sep) {
  if (sep.empty()) throw std::invalid_argument("python_split: empty separator");
  // Splitting the UTF-8 bytes at the separator's bytes equals splitting code points: a well-formed sequence never
  // matches in the middle of another one. Sanitize first so the pieces are the same code points Python would see.
  const std::string clean = utf8::sanitize(text);
  const std::string clean_sep = utf8::sanitize(sep);
  std::vector<std::string> pieces;
  size_t start = 0;
  while (true) {
    const size_t at = clean.find(clean_sep, start);
    if (at == std::string::npos) {
      pieces.push_back(clean.substr(start));
      return pieces;
    }
    pieces.push_back(clean.substr(start, at - start));
    start = at + clean_sep.size();
  }
}

std::string python_collapse_whitespace(std::string_view text) {
  std::string out;
  for (const std::string& w : python_split(text)) {
    if (!out.empty()) out += ' ';
    out += w;
  }
  return out;
}

}  // namespace rkv::pytext
