// The random draws of RULER's generators (eval/ruler_text.hpp) on std::mt19937_64, whose sequence the C++ standard
// fixes; every draw here is written out (no std::shuffle or distributions, whose algorithms are the library's own), so
// a seed gives the same samples on every platform.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace rkv {

using RulerRng = std::mt19937_64;

/// An integer in [lo, hi]: lo + r % (hi - lo + 1) for the next output r (hi >= lo).
int64_t ruler_uniform(RulerRng& rng, int64_t lo, int64_t hi);

/// k distinct integers of [0, n) in draw order (Python's random.sample(range(n), k)): the first k steps of a
/// Fisher-Yates shuffle, step i swapping i with ruler_uniform(i, n - 1). Throws rkv::InputError when k > n or k < 0.
std::vector<int64_t> ruler_sample(RulerRng& rng, int64_t n, int64_t k);

/// Shuffles `v` in place: Fisher-Yates from the back, position i swapped with ruler_uniform(0, i).
template <class T>
void ruler_shuffle(RulerRng& rng, std::vector<T>& v) {
  for (int64_t i = static_cast<int64_t>(v.size()) - 1; i > 0; --i)
    std::swap(v[static_cast<size_t>(i)], v[static_cast<size_t>(ruler_uniform(rng, 0, i))]);
}

/// A number of `digits` digits, uniform in [10^(digits-1), 10^digits - 1] (RULER's generate_random_number, 7 digits).
std::string ruler_random_number(RulerRng& rng, int digits = 7);

/// A version-4 UUID in canonical form from 128 random bits (Python's uuid.UUID(int=getrandbits(128), version=4): the
/// version nibble set to 4 and the variant bits to 10), lowercase hex, e.g. "1b4e28ba-2fa1-41d2-883f-0016d3cca427".
std::string ruler_uuid(RulerRng& rng);

/// `k` uniform letters of A-Z (variable names of variable tracking) or a-z (fwe's coded words).
std::string ruler_letters(RulerRng& rng, int64_t k, bool upper);

}  // namespace rkv
