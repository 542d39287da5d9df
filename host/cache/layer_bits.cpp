#include "cache/layer_bits.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/errors.hpp"

namespace rkv {
namespace {

constexpr int kLevels[3] = {2, 4, 8};

CodecSpec with_bits(CodecSpec c, int bits) {
  c.bits = bits;
  return c;
}

}  // namespace

double codec_entry_bytes(const CodecSpec& codec, int64_t head_dim) {
  return static_cast<double>(codec_key_unit_bytes(codec, head_dim)) / static_cast<double>(codec_key_quantum(codec)) +
         static_cast<double>(codec_value_row_bytes(codec, head_dim)) + sizeof(int32_t);
}

std::vector<int> allocate_layer_bits(const std::vector<double>& profile, const std::vector<int64_t>& entries,
                                     const CodecSpec& codec, int64_t head_dim, double ratio) {
  const size_t L = profile.size();
  if (entries.size() != L)
    throw InputError("per-layer bits: a profile of " + std::to_string(L) + " layers but entries of " +
                     std::to_string(entries.size()));
  if (codec.format != CodecFormat::integer && codec.format != CodecFormat::kivi)
    throw InputError("per-layer bits need a codec with a bit width (format \"int\" or \"kivi\"), not " + codec.label());
  if (!(ratio >= 1.0) || !std::isfinite(ratio)) throw InputError("per-layer bits: ratio must be >= 1");
  for (size_t l = 0; l < L; ++l)
    if (!std::isfinite(profile[l])) throw InputError("per-layer bits: profile value of layer " + std::to_string(l) + " is not finite");
  if (L == 0) return {};
  const double s_min = *std::min_element(profile.begin(), profile.end());
  const double s_max = *std::max_element(profile.begin(), profile.end());
  const double range = s_max / 2 - s_min / 2;  // halves first, as the ripplekv allocator (no overflow)
  std::vector<double> target(L);
  double mean_m = 0;
  for (size_t l = 0; l < L; ++l) {
    target[l] = std::pow(ratio, range > 0 ? (profile[l] / 2 - s_min / 2) / range : 0.0);
    mean_m += target[l] / static_cast<double>(L);
  }
  for (double& t : target) t = codec.bits * t / mean_m;

  double entry_bytes[3];
  for (int i = 0; i < 3; ++i) entry_bytes[i] = codec_entry_bytes(with_bits(codec, kLevels[i]), head_dim);
  const double uniform = codec_entry_bytes(codec, head_dim);
  double total = 0, spent = 0;
  std::vector<int> level(L, 0);  // index into kLevels
  for (size_t l = 0; l < L; ++l) {
    total += static_cast<double>(entries[l]) * uniform;
    while (level[l] < 2 && kLevels[level[l] + 1] <= target[l]) ++level[l];
    spent += static_cast<double>(entries[l]) * entry_bytes[level[l]];
  }
  for (;;) {  // raise the most under-served layer whose next level still fits
    size_t best = L;
    double best_gap = 0;
    for (size_t l = 0; l < L; ++l) {
      if (level[l] == 2) continue;
      const double cost = static_cast<double>(entries[l]) * (entry_bytes[level[l] + 1] - entry_bytes[level[l]]);
      if (spent + cost > total + 1e-9 * total) continue;
      const double gap = target[l] / kLevels[level[l]];
      if (best == L || gap > best_gap) {
        best = l;
        best_gap = gap;
      }
    }
    if (best == L) break;
    spent += static_cast<double>(entries[best]) * (entry_bytes[level[best] + 1] - entry_bytes[level[best]]);
    ++level[best];
  }
  std::vector<int> bits(L);
  for (size_t l = 0; l < L; ++l) bits[l] = kLevels[level[l]];
  return bits;
}

}  // namespace rkv
