// Key re-rotation (compression.rerotate; Backend::rerotate_layer, cache/rerotation.hpp, compress_prompt) on the CPU
// backend and a seeded synthetic model, checked against values computed independently here:
//  - every re-rotated key equals RoPE(k_raw, i) where k_raw is the key before RoPE from the naive double-precision
//    forward (naive_forward.hpp) at the entry's original position p, and i its new position; positions are
//    0 .. n - 1 per KV head (uniform and per-head layouts);
//  - compress_prompt with rerotate = true re-rotates exactly the compacted layers and puts the next token at the cache
//    length (kvpress' pipeline), with rerotate = false it keeps the original positions and T.
// (Decoding after re-rotation is not compared with a prefill of the kept tokens alone: that identity holds for the
// keys only, not for the values and hidden states they were computed from.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "backend/backend.hpp"
#include "cache/rerotation.hpp"
#include "cache/selection.hpp"
#include "core/errors.hpp"
#include "model/rope.hpp"
#include "model/synthetic_model.hpp"
#include "naive_forward.hpp"
#include "plugin/instance.hpp"
#include "plugin/params.hpp"
#include "plugin/registry.hpp"
#include "plugin/scorer_call.hpp"
#include "runner/compress/compress_prompt.hpp"

namespace {

std::vector<int32_t> random_tokens(int64_t n, int64_t V, uint64_t seed) {
  rkv::SyntheticRng r(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>((r.next() + 1.0f) * 0.5f * static_cast<float>(V - 1));
  return t;
}

/// RoPE of one raw key k_raw[d] at position `pos`, in double, written from the formula (rotate_half pairs (j, j + d/2)
/// turned by pos * theta^(-2j/d)), not through model/rope.hpp.
std::vector<double> rope_at(const double* k_raw, int64_t d, double theta, int64_t pos) {
  std::vector<double> out(static_cast<size_t>(d));
  for (int64_t j = 0; j < d / 2; ++j) {
    const double a = static_cast<double>(pos) * std::pow(theta, -2.0 * static_cast<double>(j) / static_cast<double>(d));
    const double x1 = k_raw[j], x2 = k_raw[j + d / 2];
    out[static_cast<size_t>(j)] = x1 * std::cos(a) - x2 * std::sin(a);
    out[static_cast<size_t>(j + d / 2)] = x2 * std::cos(a) + x1 * std::sin(a);
  }
  return out;
}

/// max over the entries of KV head g of `layer` of |stored key - RoPE(k_raw[p], pos)| / max |key|, where p is the
/// entry's original position (`original`[i]) and pos = i (re-rotated) or p (not).
double worst_key_error(const rkv::LayerKV& layer, int64_t g, const std::vector<int64_t>& original,
                       const std::vector<double>& k_raw, int64_t Hkv, double theta, bool rerotated) {
  const int64_t d = layer.head_dim;
  double worst = 0, scale = 1e-30;
  for (int64_t i = 0; i < layer.head_length(g); ++i) {
    const int64_t p = original[static_cast<size_t>(i)];
    const std::vector<double> want = rope_at(&k_raw[static_cast<size_t>((p * Hkv + g) * d)], d, theta, rerotated ? i : p);
    for (int64_t e = 0; e < d; ++e) {
      worst = std::max(worst, std::fabs(double(layer.k_at(g, i)[e]) - want[static_cast<size_t>(e)]));
      scale = std::max(scale, std::fabs(want[static_cast<size_t>(e)]));
    }
  }
  return worst / scale;
}

TEST(Rerotation, EveryKeptKeyIsTheRawKeyRotatedAtItsNewPosition) {
  const rkv::ModelConfig c = rkv::synthetic_config("llama", 4, 2, 16, 2);
  const rkv::Model m = rkv::synthetic_model(c, 31);
  const int64_t T = 40, Hkv = c.n_kv_heads;
  const std::vector<int32_t> prompt = random_tokens(T, c.vocab_size, 32);
  const rkv_test::NaiveOutput ref = rkv_test::naive_forward(m, prompt);
  ASSERT_EQ(ref.keys_before_rope.size(), 2u);

  const auto backend = rkv::make_backend("cpu", m);
  const rkv::PrefillResult r = backend->prefill(prompt, {});
  const auto kept = backend->clone(*r.cache), rotated = backend->clone(*r.cache);
  std::vector<float> scores(static_cast<size_t>(Hkv * T));
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = float((i * 29) % 83);
  const rkv::Selection sel[2] = {
      rkv::select_positions(scores.data(), Hkv, T, 12, rkv::ProtectedSpec{2, 2}, 0),                    // uniform
      rkv::select_positions_per_head(scores.data(), Hkv, T, {7, 19}, rkv::ProtectedSpec{2, 2}, 1)};  // per head
  ASSERT_TRUE(sel[1].per_head());
  for (int64_t l = 0; l < 2; ++l) {
    backend->compact_layer(*kept, l, sel[l]);
    backend->compact_layer(*rotated, l, sel[l]);
    backend->rerotate_layer(*rotated, l);
    const rkv::LayerKV a = backend->download_layer(*kept, l), b = backend->download_layer(*rotated, l);
    for (int64_t g = 0; g < Hkv; ++g) {
      SCOPED_TRACE("layer " + std::to_string(l) + ", KV head " + std::to_string(g));
      const int64_t n = sel[l].head_kept_count(g);
      ASSERT_EQ(b.head_length(g), n);
      const std::vector<int64_t> original(sel[l].head_positions(g), sel[l].head_positions(g) + n);
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(*a.pos_at(g, i), original[static_cast<size_t>(i)]);  // compaction alone keeps them
        EXPECT_EQ(*b.pos_at(g, i), i);                                  // re-rotation: 0 .. n - 1
      }
      const std::vector<double>& k_raw = ref.keys_before_rope[static_cast<size_t>(l)];
      EXPECT_LT(worst_key_error(b, g, original, k_raw, Hkv, c.rope_theta, true), 1e-5);
      EXPECT_LT(worst_key_error(a, g, original, k_raw, Hkv, c.rope_theta, false), 1e-5);
      // The check can fail: the compacted keys are not at their new positions until re-rotated.
      EXPECT_GT(worst_key_error(a, g, original, k_raw, Hkv, c.rope_theta, true), 1e-2);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t e = 0; e < c.head_dim; ++e) ASSERT_EQ(b.v_at(g, i)[e], a.v_at(g, i)[e]) << "values untouched";
    }
  }
  // Re-rotating again changes nothing (every head is at 0 .. n - 1 already): bit-identical.
  const rkv::LayerKV once = backend->download_layer(*rotated, 1);
  backend->rerotate_layer(*rotated, 1);
  EXPECT_EQ(backend->download_layer(*rotated, 1).k, once.k);
  EXPECT_THROW(backend->rerotate_layer(*rotated, 2), rkv::InputError);
}

TEST(Rerotation, LayerWithoutPositionsOrWithOtherFrequenciesIsRefused) {
  rkv::LayerKV layer;
  layer.n_kv_heads = 1;
  layer.head_dim = 4;
  layer.capacity = layer.length = 2;
  layer.k.assign(8, 1.0f);
  layer.v.assign(8, 1.0f);
  const std::vector<double> inv = {1.0, 0.01};
  try {
    rkv::rerotate_layer(layer, inv, 7);
    ADD_FAILURE() << "no error without positions";
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("layer 7"), std::string::npos) << e.what();
  }
  layer.pos = {5, 9};
  EXPECT_THROW(rkv::rerotate_layer(layer, {1.0}, 7), rkv::InputError);
  EXPECT_EQ(layer.k, std::vector<float>(8, 1.0f));  // unchanged after the errors
  // By hand: d = 4, inv_freq = {1, 0.01}; entry 1 at position 9 moves to 1, a shift of -8: pair 0 = (k0, k2) = (1, 1)
  // turns by -8 rad -> (cos 8 + sin 8, cos 8 - sin 8); pair 1 = (k1, k3) turns by -0.08 rad.
  rkv::rerotate_layer(layer, inv, 7);
  EXPECT_EQ(layer.pos, (std::vector<int32_t>{0, 1}));
  EXPECT_NEAR(layer.k[4], std::cos(8.0) + std::sin(8.0), 1e-6);
  EXPECT_NEAR(layer.k[6], std::cos(8.0) - std::sin(8.0), 1e-6);
  EXPECT_NEAR(layer.k[5], std::cos(0.08) + std::sin(0.08), 1e-6);
  EXPECT_NEAR(layer.k[7], std::cos(0.08) - std::sin(0.08), 1e-6);
  EXPECT_NEAR(layer.k[0], std::cos(5.0) + std::sin(5.0), 1e-6);  // entry 0: position 5 -> 0, a shift of -5
}

/// compress_prompt on the CPU with the streamingllm scorer (sinks + most recent; no statistics), with and without
/// rerotate: layer 0 keeps 10, layer 1 keeps 14, layer 2 is left whole.
TEST(Rerotation, CompressPromptReRotatesTheCompactedLayersAndContinuesAtTheCacheLength) {
  const rkv::ModelConfig c = rkv::synthetic_config("llama", 4, 2, 16, 3);
  const rkv::Model m = rkv::synthetic_model(c, 33);
  const auto backend = rkv::make_backend("cpu", m);
  const int64_t T = 30;
  const rkv::PluginRegistry reg = rkv::PluginRegistry::discover();
  const rkv::PluginInfo& info = reg.resolve("streamingllm", RKV_KIND_SCORER);
  rkv::HostServices host;
  const rkv::PluginInstance inst =
      rkv::PluginInstance::create(info, rkv::ParamSet::validate(*info.descriptor, {}), host);
  rkv::ScorerUse scorer;
  scorer.instance = &inst;
  scorer.requirements = rkv::query_scorer_requirements(
      inst, rkv_attention_shape{sizeof(rkv_attention_shape), c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim});
  scorer.key = "streamingllm";
  const rkv::PrefilledPrompt prompt =
      rkv::prefill_prompt(*backend, random_tokens(T, c.vocab_size, 34), rkv::prefill_needs({&scorer}));
  rkv::ScoreMemo memo;
  const rkv::CompressedPrompt orig = rkv::compress_prompt(*backend, prompt, scorer, {0, 1}, {10, 14}, memo);
  const rkv::CompressedPrompt rot = rkv::compress_prompt(*backend, prompt, scorer, {0, 1}, {10, 14}, memo, nullptr, true);
  EXPECT_EQ(orig.next_position, T);  // original positions: the next token is at T
  EXPECT_EQ(rot.next_position, T);   // layer 2 was left whole: the longest head holds T
  const rkv::CompressedPrompt rot01 =
      rkv::compress_prompt(*backend, prompt, scorer, {0, 1, 2}, {10, 14, 12}, memo, nullptr, true);
  EXPECT_EQ(rot01.next_position, 14);  // every layer compressed: the cache length, max_l b_l
  EXPECT_EQ(rot.bytes_kept, orig.bytes_kept);
  for (int64_t l = 0; l < 3; ++l) {
    const rkv::LayerKV a = backend->download_layer(*orig.cache, l), b = backend->download_layer(*rot.cache, l);
    ASSERT_EQ(a.length, b.length);
    EXPECT_EQ(a.v, b.v);
    for (int64_t g = 0; g < c.n_kv_heads; ++g)
      for (int64_t i = 0; i < b.length; ++i) {
        EXPECT_EQ(*b.pos_at(g, i), i) << "layer " << l;
        std::vector<float> want(a.k_at(g, i), a.k_at(g, i) + c.head_dim);  // original-position key, moved here
        rkv::rope_rerotate(want.data(), m.rope_inv_freq, *a.pos_at(g, i), i);
        for (int64_t e = 0; e < c.head_dim; ++e) ASSERT_NEAR(b.k_at(g, i)[e], want[static_cast<size_t>(e)], 1e-5);
      }
    if (l == 2) EXPECT_EQ(a.k, b.k) << "a layer left whole is already at 0 .. T - 1";
  }
}

}  // namespace
