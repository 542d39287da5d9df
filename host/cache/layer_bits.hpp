// Per-layer KV precision from a sensitivity profile, at the bytes of uniform precision (README "KV precision:
// per-layer bits"; KVTuner, Li et al. ICML 2025, and the issue's "budget-aware precision allocation").
//
// The same normalise -> map -> rescale idea as the ripplekv allocator (allocators/ripplekv), with bits for tokens:
//   s^_l = (s_l - min s) / (max s - min s)           (all zeros for a constant profile)
//   m_l  = ratio ^ s^_l                              (ratio >= 1: the most sensitive layer's share over the least's)
//   t_l  = bits m_l / mean(m)                        (the target bits of layer l; mean = bits)
// then onto the codec's levels {2, 4, 8} under the byte total of every layer at `bits`:
//   1. beta_l = the largest level <= t_l (at least 2);
//   2. repeatedly raise the layer whose t_l / beta_l is largest (ties: the lower layer) to its next level, if the
//      bytes of the whole plan stay within the total; stop when no raise fits.
// Bytes of layer l at beta bits: entries_l x codec_entry_bytes(beta) (packed key and value + position), so the plan's
// bytes never exceed uniform bits' and the rounding leaves less than one raise unspent.
//
// Thread rules: pure functions, reentrant.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cache/codec.hpp"

namespace rkv {

/// Bytes one packed entry of one KV head costs with `codec`: key bytes (a key unit over its quantum entries), value
/// row bytes and its int32 position. float32 ("none"): 2 d x 4 + 4.
double codec_entry_bytes(const CodecSpec& codec, int64_t head_dim);

/// The bits of every layer (one of 2, 4, 8) as the top of this file says, for `codec` (format "int" or "kivi"; its
/// `bits` is the uniform precision whose bytes the plan spends). `profile` [L] and `entries` [L] (entries each
/// layer holds over its KV heads) have one value per layer. Throws rkv::InputError for mismatched lengths, a profile
/// value that is not finite, ratio < 1, or a codec without a bit width.
std::vector<int> allocate_layer_bits(const std::vector<double>& profile, const std::vector<int64_t>& entries,
                                     const CodecSpec& codec, int64_t head_dim, double ratio);

}  // namespace rkv
