// The generator of each RULER family (eval/ruler_text.hpp dispatches to them; same contracts as ruler_text).
#pragma once
#include <cstdint>
#include <string>

#include "eval/ruler_random.hpp"
#include "eval/ruler_text.hpp"

namespace rkv {

/// Needle in a haystack (niah.py): needles "One of the special magic {values} for {key} is: {value}." in a noise,
/// essay or needle haystack; the question asks for the values of num_queries keys.
RulerText ruler_niah_text(const RulerSubtask& s, int64_t size, uint64_t seed, const RulerSources& src);

/// Variable tracking (variable_tracking.py): chains "VAR A = 12345", "VAR B = VAR A ", ... in noise sentences;
/// `letters` is the length of variable names (5; 3 in the in-context example).
RulerText ruler_vt_text(const RulerSubtask& s, int64_t size, uint64_t seed, int64_t letters,
                        const std::string& preamble);

/// Common words extraction (common_words_extraction.py): a numbered list in which num_cw words repeat more often,
/// after one solved example.
RulerText ruler_cwe_text(const RulerSubtask& s, int64_t size, uint64_t seed, int64_t context_tokens,
                         const RulerSources& src);

/// Frequent words extraction (freq_words_extraction.py): coded words with Zipf(alpha) counts; the answer is the
/// second to fourth most frequent (the first is "...", noise).
RulerText ruler_fwe_text(const RulerSubtask& s, int64_t size, uint64_t seed, int64_t context_tokens);

/// The Riemann zeta function at alpha > 1: sum_{k<1000} k^-alpha plus the Euler-Maclaurin tail
/// 1000^(1-alpha) / (alpha - 1) + 1000^-alpha / 2 (relative error below 1e-9 for alpha >= 1.5).
double ruler_zeta(double alpha);

/// Fwe's occurrences of the coded word of rank k (1-based) among `size` words: int(size k^-alpha / zeta(alpha)).
int64_t ruler_fwe_count(int64_t size, int64_t rank, double alpha);

}  // namespace rkv
