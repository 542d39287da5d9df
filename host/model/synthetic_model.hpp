// Small seeded random models held in memory: for tests, benchmarks and `ripplekv plugins check` (the signal
// conformance kit runs signals on one). No file is read or written.
//
// Thread rules: pure functions; a SyntheticRng belongs to one thread.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/model.hpp"

namespace rkv {

/// Deterministic uniform numbers in [-1, 1): a 64-bit LCG (Knuth's MMIX constants) whose top 53 bits give the
/// mantissa. The same seed gives the same sequence on every platform.
struct SyntheticRng {
  uint64_t state;
  explicit SyntheticRng(uint64_t seed);
  /// The next number, uniform in [-1, 1), as float32.
  float next();
};

/// n numbers offset + scale * u, u uniform in [-1, 1) from `rng` (float32).
std::vector<float> synthetic_uniform(SyntheticRng& rng, size_t n, float scale, float offset = 0.0f);

/// A small configuration: `arch` (a name of model/architectures.hpp, whose row sets the biases, Q/K norms and pre/post
/// norms: qwen2 gets Q/K/V biases, qwen3 per-head Q/K norms, olmo2 whole-projection Q/K norms and norms after
/// attention and the MLP instead of before), H query heads, Hkv KV heads, head
/// dim d, `layers` layers; d_model 16, d_ff 24, vocabulary 40, context 256, rms eps 1e-5, RoPE theta 1e4, tied
/// embeddings. "gemma3" adds the Gemma 3 layer: window 16 on layers l % 3 < 2 (every third layer global), RoPE bases
/// 1e4 (sliding) and 1e6 (global), attention scale 1/sqrt(D/H) (not 1/sqrt(d), so the field is exercised), embeddings
/// times sqrt(D), final logit soft-cap 3, per-head Q/K norms, post-attention/post-MLP norms, GELU-tanh MLP. "gemma2"
/// the Gemma 2 layer: window 16 on even layers, one RoPE base, attention scale 1/sqrt(D/H), embeddings times sqrt(D),
/// attention-score soft-cap 2 (small, so most scores bend), final logit soft-cap 3, pre and post norms, GELU-tanh MLP.
/// Throws rkv::InputError for an architecture not in the table; the sizes are not validated (model_check does that).
ModelConfig synthetic_config(const std::string& arch = "llama", int64_t H = 4, int64_t Hkv = 2, int64_t d = 8,
                             int64_t layers = 2);

/// Random float32 weights for `config`, deterministic in `seed`: embeddings uniform in +-1, norm weights 1 +- 0.2,
/// wq, wk, gate and up uniform in +-2/sqrt(in), wv, wo, down (and an untied LM head) in +-1/sqrt(in), biases in
/// +-0.5, with `in` the input width of the matrix; Q/K and post norm weights 1 +- 0.2 (drawn after a layer's
/// other weights, so llama/qwen2 models are unchanged; olmo2 draws no pre-norm weights); RoPE frequencies from the config (model/rope.hpp). The model's
/// sha256 is left empty (set it when a cache key needs one).
Model synthetic_model(const ModelConfig& config, uint64_t seed);

}  // namespace rkv
