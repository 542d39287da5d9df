// The sharing part of `ripplekv analyze --sharing`: the per-layer sharing damage D^share_l (only layer l reads layer
// l - 1's cache; runner/profile/compression_damage.hpp sharing_damage) on the evaluation split, and how well each configured
// signal ranks it (Spearman rho over layers 1 .. L - 1, bootstrap CI over examples) -- which signal a
// [compression.share] count = k chooser should follow (README "Depth-wise sharing").
//
// Thread rules: pure functions.
#pragma once
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace rkv {

/// A signal's profile over every model layer, named for the report.
struct NamedProfile {
  std::string name;
  std::vector<double> s;  ///< [L]
};

/// Adds "sharing" to `j` -- {"D": [L] mean over examples (null for layer 0), "D_per_example": [N][L], "signals":
/// [{"signal", "rho", "ci_low", "ci_high"}], "order": layers 1 .. L - 1 from least to most damage} -- and a
/// "Sharing damage" section to `md`, from d[i][l] = sharing_damage() (NaN at l = 0). rho is signed Spearman between
/// s_l and D^share_l over l = 1 .. L - 1; its CI resamples examples (`resamples`, seeded by the signal's name).
/// rkv::InputError when there are fewer than 2 layers or no example.
void write_sharing(const std::vector<std::vector<double>>& d, const std::vector<NamedProfile>& signals,
                   int64_t resamples, nlohmann::json& j, std::ostringstream& md);

}  // namespace rkv
