// Choosing the next token from logits: greedy (argmax) or temperature + nucleus (top-p) sampling with a seed.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

namespace rkv {

struct SamplingOptions {
  float temperature = 0.0f;  ///< <= 0: greedy (argmax, lowest id on ties)
  float top_p = 1.0f;        ///< nucleus mass in (0, 1]; 1 keeps every token
  uint64_t seed = 0;         ///< seed of the mt19937_64 stream (same seed, same logits -> same tokens)
};

/// Stateful sampler (its random stream advances with each draw). Not thread-safe; one per generation.
class Sampler {
 public:
  /// Throws rkv::InputError for top_p outside (0, 1] or a non-finite temperature.
  explicit Sampler(const SamplingOptions& opts);
  /// Picks a token id from logits[0..V). Temperature sampling (Ackley et al. 1985 Boltzmann form):
  /// p_i = softmax(logits / T)_i in double; top-p (Holtzman et al. 2020): keep the most probable tokens (ties by
  /// lower id) whose cumulative probability first reaches top_p, renormalise, draw u = (rng() >> 11) * 2^-53.
  int32_t sample(const float* logits, int64_t V);

 private:
  SamplingOptions opts_;
  std::mt19937_64 rng_;
  std::vector<std::pair<double, int32_t>> buf_;
};

/// Index of the largest of `V` logits (float32; lowest index on ties). rkv::InputError naming the vocabulary id when a
/// logit is NaN (corrupt weights: without the check greedy decoding would stop or emit a fixed token silently).
int32_t argmax(const float* logits, int64_t V);

}  // namespace rkv
