// RULER's scores (Hsieh et al. 2024; NVIDIA/RULER scripts/eval/synthetic/constants.py at c3f5e3b), per sample, in
// [0, 1] (RULER reports 100 x the mean over samples):
//
//   string_match_all(pred, refs)  = (1 / |refs|) sum_{r in refs} [lower(r) is a substring of lower(pred)]
//                                   the fraction of the references found (every synthetic task: niah, variable
//                                   tracking, common- and frequent-words extraction)
//   string_match_part(pred, refs) = max_{r in refs} [lower(r) is a substring of lower(pred)]
//                                   any reference found (RULER's QA tasks)
//
// lower() is Python's str.lower() (eval/metrics_python_text.hpp). RULER first strips the prediction and turns control
// characters into newlines; neither changes whether a reference (printable text) is a substring, so it is not
// repeated here. An empty reference list is an error (RULER divides by its length).
//
// Both functions are pure and thread-safe.
#pragma once
#include <string>
#include <vector>

namespace rkv {

/// The fraction of `references` that occur in `prediction`, case-insensitively (RULER's string_match_all for one
/// sample). Throws rkv::InputError when `references` is empty.
double ruler_string_match_all(const std::string& prediction, const std::vector<std::string>& references);

/// 1 when any of `references` occurs in `prediction`, case-insensitively, else 0 (RULER's string_match_part for one
/// sample). Throws rkv::InputError when `references` is empty.
double ruler_string_match_part(const std::string& prediction, const std::vector<std::string>& references);

}  // namespace rkv
