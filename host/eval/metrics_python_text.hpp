// The few Python `str` operations LongBench's metrics are written with, on UTF-8 text, so the C++ metrics see the same
// characters, cases and words as the reference (THUDM/LongBench metrics.py, run on Python 3 `str`).
//
// Python works on code points; these functions take and return UTF-8. Every function first replaces each byte that
// does not start a well-formed UTF-8 sequence by U+FFFD (rkv::utf8::sanitize), which is what a Hugging Face
// tokenizer's decode (bytes.decode(errors="replace")) hands the reference metrics for broken byte sequences (CPython
// replaces a maximal invalid prefix by one U+FFFD, we replace each invalid byte; both only differ on invalid input).
//
//   python_lower       str.lower(): the Unicode lowercase mapping of every code point (table generated from Python
//                      3.11, Unicode 14.0.0, by tests/eval/gen_lower_table.py), U+0130 -> "i" U+0307 (the one
//                      multi-code-point mapping). Not reproduced: the Final_Sigma context rule (Python lowers a
//                      capital sigma at the end of a word to U+03C2; here it is always U+03C3).
//   python_isspace     str.isspace() of one code point: U+0009..U+000D, U+001C..U+0020, U+0085, U+00A0, U+1680,
//                      U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
//   python_split       str.split() (runs of whitespace, no empty words) and str.split(sep) (every separator counts,
//                      empty pieces kept).
//
// All functions are pure and thread-safe.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rkv::pytext {

/// Code points of `utf8` (invalid bytes become U+FFFD, see the file comment).
std::u32string to_code_points(std::string_view utf8);

/// UTF-8 of `cps`. Code points above U+10FFFF or in the surrogate range are written as U+FFFD.
std::string to_utf8(std::u32string_view cps);

/// Python's str.isspace() for one code point (list in the file comment).
bool python_isspace(char32_t cp);

/// Python's str.lower() (see the file comment for the one rule left out).
std::string python_lower(std::string_view text);

/// Python's str.split() with no argument: the maximal runs of non-whitespace code points, in order.
/// Example: " a\u00A0 b\n" -> {"a", "b"}; "" -> {}.
std::vector<std::string> python_split(std::string_view text);

/// Python's str.split(sep) for a non-empty `sep`: the pieces between occurrences of `sep`, empty pieces kept.
/// Example: split("a..b", ".") -> {"a", "", "b"}; split("", ".") -> {""}. Throws std::invalid_argument for an empty
/// `sep` (Python raises ValueError).
std::vector<std::string> python_split(std::string_view text, std::string_view sep);

/// Python's " ".join(text.split()): whitespace runs collapsed to one space, none at either end.
std::string python_collapse_whitespace(std::string_view text);

/// One run of the lowercase table: code points first, first + stride, ..., last map to cp + delta.
struct LowerRun {
  char32_t first;
  char32_t last;
  int stride;
  int delta;
};
/// The lowercase table (metrics_lower_table.cpp), sorted by `first`, runs disjoint.
extern const LowerRun kLowerRuns[];
extern const size_t kLowerRunCount;
/// The Unicode version the table was generated from, e.g. "14.0.0".
extern const char* const kLowerUnicodeVersion;

/// The single-code-point lowercase of `cp` from the table (U+0130 gives U+0069 here; python_lower adds U+0307).
char32_t lower_code_point(char32_t cp);

}  // namespace rkv::pytext
