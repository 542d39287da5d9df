// Reading a sensitivity profile file (profile.json, written by `ripplekv profile` and by runs).
//
// Format: a JSON object with an array "s" of numbers (one per layer); optional "layers" (the layer index of each
// entry: 0 .. n - 1 in order, checked). Other keys (CIs, per-example values, cache key) are ignored here.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace rkv {

struct ProfileFile {
  std::vector<double> s;        ///< sensitivity per entry
  std::vector<int64_t> layers;  ///< layer index per entry (0..n-1 when the file has none)
};

/// Reads `path`. Throws rkv::InputError naming the file and what is wrong: unreadable, not JSON, no array "s",
/// an entry that is not a number, NaN/infinity (written as null or strings), "layers" of another length, or a
/// "layers" entry that is not an integer in 0 .. n - 1 (n = entries of "s"), repeats one, or is below the one before
/// (naming "layers"[i]); so a file's "layers", when present, is exactly 0 .. n - 1.
ProfileFile read_profile_file(const std::string& path);

/// Parses "s0,s1,..." (the CLI's --sensitivity, --fractions). Throws rkv::InputError naming `what` and the bad item.
std::vector<double> parse_sensitivity_list(const std::string& text, const std::string& what = "--sensitivity");

}  // namespace rkv
