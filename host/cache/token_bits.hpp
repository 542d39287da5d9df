// Per-token KV precision (README "KV precision: per-token bits"; the MultiAlloc direction): a layer's packed
// entries split into precision classes by rank, at the bytes of the mix.
//
// There is no trained controller: the mapping from features to bits is a rule with parameters. Per KV head, the m
// entries a layer packs are ranked the way its eviction ranked them -- protected positions first (sinks, then the
// recent window, newest first), then the scorer's score descending, ties to the earlier position
// (cache/selection.hpp) -- so the top class holds exactly what the eviction would keep at a budget of that share.
// With shares p_1 .. p_C (CodecSpec::token_shares, top class first) and cumulative P_c = p_1 + .. + p_c:
//   N_c = floor(P_c m),   class c holds the ranked entries [N_{c-1}, N_c),   the rest (m - N_C) the base bits.
// Class bits exceed the base bits (check_codec), so flooring never spends more than the mean entry bytes
//   e_mix = e_base + sum_c p_c (e_c - e_base)            (e = codec_entry_bytes: key + value row + int32 position)
// and the classes hold the mix within one entry each per head.
//
// Thread rules: pure functions, reentrant.
#pragma once
#include <cstdint>
#include <vector>

#include "cache/codec.hpp"

namespace rkv {

/// The codec of a token class of `bits` bits beside the base codec `base` (format int): f16 for 16 bits, else int at
/// `bits` with base's group and symmetry; no residual and no classes of its own.
CodecSpec token_class_codec(const CodecSpec& base, int bits);

/// The codecs of base's token classes, top class first ([token_bits.size()]).
std::vector<CodecSpec> token_class_codecs(const CodecSpec& base);

/// Mean bytes of one packed entry of one KV head for `codec`: e_mix above (codec_entry_bytes when not mixed).
double mixed_entry_bytes(const CodecSpec& codec, int64_t head_dim);

/// N_c - N_{c-1} for every class: the entries of each class among m ranked entries, top class first.
std::vector<int64_t> token_class_counts(const std::vector<double>& shares, int64_t m);

/// The class of each of a KV head's first `m` entries (the ones a codec packs): 0 = base, c = token class c (1-based,
/// top first), as the top of this file says. `scores` float32 [T] are the head's scores over the prompt, `positions`
/// [m] the entries' prompt positions (each in [0, T)), `protect` the protected positions in priority order
/// (protected_positions()). Returns [m] class indices. rkv::InputError for a position outside [0, T).
std::vector<uint8_t> rank_token_classes(const float* scores, int64_t prefix_tokens, const int32_t* positions,
                                        int64_t m, const std::vector<int64_t>& protect,
                                        const std::vector<double>& shares);

}  // namespace rkv
