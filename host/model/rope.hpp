// Rotary position embedding (RoPE) frequencies and the rotate_half rotation.
//
// Frequencies (Su et al. 2021, "RoFormer", eq. 15; Hugging Face transformers _compute_default_rope_parameters):
//   inv_freq[i] = theta^(-2i / d),  i = 0 .. d/2 - 1
// Scaling variants (transformers modeling_rope_utils.py):
//   linear: inv_freq[i] / factor
//   llama3 (_compute_llama3_parameters; Llama 3.1): with wavelen = 2 pi / inv_freq,
//     low_wavelen = original_context / low_freq_factor, high_wavelen = original_context / high_freq_factor:
//     wavelen < high_wavelen  -> inv_freq (unchanged)
//     wavelen > low_wavelen   -> inv_freq / factor
//     otherwise               -> (1 - s) inv_freq / factor + s inv_freq,
//                                s = (original_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
// llama.cpp stores the llama3 result in GGUF as per-frequency divisors (tensor rope_freqs.weight):
// inv_freq[i] / rope_freqs[i].
//
// Rotation (the Hugging Face layout, "rotate_half", GPT-NeoX style): for a head vector x[0..d), pair i couples x[i]
// and x[i + d/2] with angle a = pos * inv_freq[i]:
//   x'[i]       = x[i] cos a - x[i + d/2] sin a
//   x'[i + d/2] = x[i + d/2] cos a + x[i] sin a
//
// Re-rotation (llama.cpp#3825 context shift, kvpress KeyRerotationPress, transformers SinkCache): each pair is a 2-D
// rotation R(pos * inv_freq[i]), and 2-D rotations compose, R(a) R(b) = R(a + b), so a key rotated at position p is
// moved to position p' by one more rotation by delta = p' - p:  R(p' f) k = R((p' - p) f) R(p f) k.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace rkv {

struct RopeScaling {
  std::string type = "none";  ///< "none", "linear" or "llama3"
  double factor = 1.0;
  double low_freq_factor = 1.0;             ///< llama3 only
  double high_freq_factor = 4.0;            ///< llama3 only
  double original_context_length = 8192.0;  ///< llama3 only
};

/// inv_freq[d/2] for head dimension `head_dim` (even, > 0), base `theta` (> 0) and `scaling`.
/// Throws rkv::InputError for an odd head_dim, a non-positive theta or factor, or an unknown scaling type.
/// Computed in double precision. Pure, thread-safe.
std::vector<double> rope_inv_freq(int64_t head_dim, double theta, const RopeScaling& scaling);

/// cos/sin tables for `n` positions: cos_out[t * half + i] = cos(positions[t] * inv_freq[i]) (half = inv_freq.size()),
/// computed in double and rounded to float. `cos_out`, `sin_out` are resized to n * half.
void rope_tables(const std::vector<double>& inv_freq, const int64_t* positions, int64_t n, std::vector<float>& cos_out,
                 std::vector<float>& sin_out);

/// Rotates one head vector x[2 * half] in place (rotate_half layout above) with that position's cos/sin rows
/// (`half` values each).
inline void rope_rotate_half(float* x, int64_t half, const float* cos, const float* sin) {
  for (int64_t i = 0; i < half; ++i) {
    const float a = x[i], b = x[i + half];
    x[i] = a * cos[i] - b * sin[i];
    x[i + half] = b * cos[i] + a * sin[i];
  }
}

/// Undoes rope_rotate_half with the same cos/sin rows: the rotation by -a, x[i] <- x[i] cos a + x[i + half] sin a,
/// x[i + half] <- x[i + half] cos a - x[i] sin a (exact up to float rounding, since cos^2 + sin^2 = 1 within 1 ulp).
inline void rope_unrotate_half(float* x, int64_t half, const float* cos, const float* sin) {
  for (int64_t i = 0; i < half; ++i) {
    const float a = x[i], b = x[i + half];
    x[i] = a * cos[i] + b * sin[i];
    x[i + half] = b * cos[i] - a * sin[i];
  }
}

/// Rotates one head vector x[2 * half] (half = inv_freq.size()) in place by `delta` positions (rotate_half layout
/// above): pair i turns by the angle delta * inv_freq[i] radians (computed in double, cos/sin rounded to float as
/// rope_tables does; delta may be negative). On an unrotated vector this is RoPE at position delta; on a vector
/// already rotated at position p it gives the vector rotated at p + delta. Pure, thread-safe.
void rope_rotate_by(float* x, const std::vector<double>& inv_freq, int64_t delta);

/// Re-rotates one key x[2 * half] that RoPE rotated at position `from_pos` so that it reads as rotated at `to_pos`
/// (positions in tokens; kvpress KeyRerotationPress._rerotate_cos_sin, llama.cpp#3825):
///   x <- R((to_pos - from_pos) inv_freq) x,   since R(to_pos f) k = R((to_pos - from_pos) f) R(from_pos f) k.
/// In place; `inv_freq` [half] as rope_inv_freq returns (the model's Model::rope_inv_freq). Pure, thread-safe.
inline void rope_rerotate(float* x, const std::vector<double>& inv_freq, int64_t from_pos, int64_t to_pos) {
  rope_rotate_by(x, inv_freq, to_pos - from_pos);
}

}  // namespace rkv
