// Random scorer: a seeded random-eviction baseline that reproduces kvpress's RandomPress draw for draw.
//
// Source: kvpress 0.5.5, kvpress/presses/random_press.py:
//   generator = torch.Generator(); generator.manual_seed(seed); scores = torch.rand(*keys.shape[:-1], generator)
// torch's CPU generator is MT19937 seeded with the low 32 bits of the seed, and torch.rand (float32) turns each 32-bit
// draw x into (x mod 2^24) * 2^-24, filling [batch = 1, H_kv, T] in row-major order (ATen's uniform_real_distribution
// in a serial CPU kernel). So, with std::mt19937 (the same engine and seeding):
//
//   s[g, j] = (mt19937(seed)^(g T + j + 1) mod 2^24) * 2^-24       (the (g T + j + 1)-th draw of a fresh engine)
//
// kvpress re-seeds on every call, so every layer gets the same draws (per_layer = false, the default). per_layer =
// true seeds layer l's engine with (seed + l) mod 2^32 instead, so layers differ. kvpress's seed = None (the global,
// unseeded generator) is not offered: a ripplekv plugin must be a function of its inputs and params. Nothing is
// protected. Checked draw for draw against kvpress on tests/fixtures/kvpress.
#include <ripplekv/sdk.hpp>

#include <cstdint>
#include <random>

namespace {

using rkv::sdk::Param;

class Random final : public rkv::sdk::Scorer {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.scorer.random", RKV_KIND_SCORER, "1.0.0",
                                "Random: seeded uniform scores (kvpress RandomPress's torch draws), a baseline")
        .param(Param::Int("seed", 0, "MT19937 seed (low 32 bits used, as torch.Generator.manual_seed)")
                   .min(0)
                   .max(4294967295.0))
        .param(Param::Bool("per_layer", false,
                           "false: every layer draws the same scores (kvpress); true: layer l uses seed + l"));
  }

  Random(const rkv::sdk::Params& p, const rkv::sdk::Host&)
      : seed_(static_cast<uint32_t>(p.get_int("seed"))), per_layer_(p.get_bool("per_layer")) {}

  rkv_scorer_requirements requirements(const rkv_attention_shape&) override {
    rkv_scorer_requirements r{};
    return r;
  }

  /// scores [H_kv, T] float32 in [0, 1), a function of (seed, per_layer ? layer : -, g, j) only. Never throws.
  /// Thread rule: never called concurrently on one instance.
  void score(const rkv_scorer_inputs& in, float* scores, int64_t n_kv_heads, int64_t T,
             rkv::sdk::Diagnostics&) override {
    const uint32_t seed = per_layer_ ? static_cast<uint32_t>(seed_ + static_cast<uint64_t>(in.layer)) : seed_;
    std::mt19937 engine(seed);
    for (int64_t i = 0; i < n_kv_heads * T; ++i)
      scores[i] = static_cast<float>(engine() & 0xFFFFFFu) * (1.0f / 16777216.0f);
  }

 private:
  uint32_t seed_;
  bool per_layer_;
};

}  // namespace

RKV_PLUGIN(Random)
