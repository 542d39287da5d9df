// Internal to the conformance kit: the seeded synthetic layers a scorer (conformance_scorer.cpp) and a per-prompt
// signal (conformance_prompt_signal.cpp) are called on, with the statistics they ask for computed as the host's
// prefill computes them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cache/attention_stats.hpp"
#include "cache/kv_cache.hpp"
#include "plugin/scorer_call.hpp"

namespace rkv::conformance {

/// An attention shape: H query heads, H_kv KV heads, head dim d.
struct Shape {
  int64_t H, Hkv, d;
};
inline constexpr Shape kShapes[] = {{4, 2, 8}, {3, 1, 16}, {2, 2, 4}};
inline constexpr int64_t kLayers = 3;  ///< the model shape's layer count; inputs use layers 0 .. 2
inline constexpr int64_t kLengths[] = {1, 7, 64, 300};

/// random: keys, queries and values uniform in +-1. tied: every key of a head equal (uniform attention, so every
/// statistic ties exactly), stored with spare capacity (the strided path). peaked: queries and keys scaled by 6
/// (softmax probabilities underflow to 0 for most keys).
enum class Variant { random, tied, peaked };
inline constexpr Variant kVariants[] = {Variant::random, Variant::tied, Variant::peaked};
const char* variant_name(Variant v);

/// One layer's inputs, with the statistics the plugin asked for.
struct Input {
  std::string label;
  Shape shape{};
  int64_t T = 0, layer = 0;
  LayerKV kv;
  AttentionStats stats;
  bool has_stats = false;
  std::vector<float> window_queries;
  bool has_window_queries = false;
  int64_t window = -1;  ///< decode-time inputs: the number of decoded queries behind the window statistics
  std::vector<double> inv_freq;  ///< RoPE frequencies [d/2] (theta 10000): the keys and queries read as rotated
  std::vector<float> value_output_norms;  ///< [H, T] when asked: ||W_o v||_1 for a random W_o [16, H d]

  /// The call's inputs (pointing into this object).
  ScorerCallInputs call() const;
};

/// A seeded layer of shape `s` and T positions for requirements `req`; decode_window >= 1: decode-time inputs (the
/// last decode_window entries are decoded tokens). Deterministic in (s, T, variant, layer, req, seed, decode_window).
Input make_input(const Shape& s, int64_t T, Variant variant, int64_t layer, const ScorerRequirements& req,
                 uint64_t seed, int64_t decode_window = -1);

/// The attention shape plugins are told for `s` (kLayers layers).
rkv_attention_shape attention_shape_of(const Shape& s);

}  // namespace rkv::conformance
