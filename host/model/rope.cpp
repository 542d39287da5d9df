#include "model/rope.hpp"

#include <cmath>

#include "core/errors.hpp"

namespace rkv {

std::vector<double> rope_inv_freq(int64_t head_dim, double theta, const RopeScaling& s) {
  if (head_dim <= 0 || head_dim % 2 != 0) {
    throw InputError("rope: head dimension must be even and positive, got " + std::to_string(head_dim));
  }
  if (!(theta > 0.0)) throw InputError("rope: freq base (rope_theta) must be positive, got " + std::to_string(theta));
  const int64_t half = head_dim / 2;
  std::vector<double> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    inv[static_cast<size_t>(i)] = std::pow(theta, -static_cast<double>(2 * i) / static_cast<double>(head_dim));
  }
  if (s.type == "none") return inv;
  if (!(s.factor > 0.0)) throw InputError("rope scaling '" + s.type + "': factor must be positive");
  if (s.type == "linear") {
    for (double& f : inv) f /= s.factor;
    return inv;
  }
  if (s.type == "llama3") {
    if (!(s.high_freq_factor > s.low_freq_factor) || !(s.original_context_length > 0.0)) {
      throw InputError("rope scaling 'llama3': needs high_freq_factor > low_freq_factor and a positive original context");
    }
    const double pi = 3.14159265358979323846;
    const double low_wavelen = s.original_context_length / s.low_freq_factor;
    const double high_wavelen = s.original_context_length / s.high_freq_factor;
    for (double& f : inv) {
      const double wavelen = 2.0 * pi / f;
      if (wavelen < high_wavelen) continue;
      if (wavelen > low_wavelen) {
        f /= s.factor;
      } else {
        const double sm = (s.original_context_length / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = (1.0 - sm) * f / s.factor + sm * f;
      }
    }
    return inv;
  }
  throw InputError("unsupported rope scaling type '" + s.type + "' (supported: none, linear, llama3)");
}

void rope_tables(const std::vector<double>& inv_freq, const int64_t* positions, int64_t n, std::vector<float>& cos_out,
                 std::vector<float>& sin_out) {
  const size_t half = inv_freq.size();
  cos_out.resize(static_cast<size_t>(n) * half);
  sin_out.resize(static_cast<size_t>(n) * half);
  for (int64_t t = 0; t < n; ++t) {
    const double p = static_cast<double>(positions[t]);
    for (size_t i = 0; i < half; ++i) {
      const double a = p * inv_freq[i];
      cos_out[static_cast<size_t>(t) * half + i] = static_cast<float>(std::cos(a));
      sin_out[static_cast<size_t>(t) * half + i] = static_cast<float>(std::sin(a));
    }
  }
}

void rope_rotate_by(float* x, const std::vector<double>& inv_freq, int64_t delta) {
  std::vector<float> c, s;
  rope_tables(inv_freq, &delta, 1, c, s);
  rope_rotate_half(x, static_cast<int64_t>(inv_freq.size()), c.data(), s.data());
}

}  // namespace rkv
