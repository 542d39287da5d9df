// Backend::value_output_norms on the CPU (backend/cpu/value_output_norms.hpp): n[h, j] = sum_c |sum_i W_o[c, h d + i]
// v[g(h), j, i]|, the weight CriticalKV puts on an entry (kvpress CriticalKVPress.vwl1norm before its group mean).
//  - a 2-head example worked by hand;
//  - float32 and Q8_0 weights, 300 entries (two row blocks of 256 and 44), against the sum computed directly in
//    double from the weights as held (the Q8_0 ones dequantized by model/dequant);
//  - the backend refuses a per-head layer and a bad layer index;
//  - a scorer plugin that asks for RKV_STAT_VALUE_OUTPUT_NORMS (tests/plugins/wov_scorer.cpp, the group mean of what
//    it is given) gets, through ScoreMemo, exactly the backend's norms; decode-time requests are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>

#include "backend/backend.hpp"
#include "backend/cpu/value_output_norms.hpp"
#include "cache/selection.hpp"
#include "core/errors.hpp"
#include "model/dequant.hpp"
#include "model/quant_matrix.hpp"
#include "model/synthetic_model.hpp"
#include "plugin/instance.hpp"
#include "plugin/params.hpp"
#include "plugin/registry.hpp"
#include "plugin/scorer_call.hpp"
#include "runner/compress/prefill.hpp"
#include "runner/compress/score_memo.hpp"
#include "runner/compress/scorers.hpp"

namespace {

/// A uniform layer of one KV head, head dim d, T entries with the given values [T, d] (keys zero).
rkv::LayerKV layer_of(int64_t d, int64_t T, const std::vector<float>& v) {
  rkv::LayerKV l;
  l.n_kv_heads = 1;
  l.head_dim = d;
  l.capacity = l.length = T;
  l.k.assign(static_cast<size_t>(T * d), 0.0f);
  l.v = v;
  return l;
}

/// n[h, j] in double, straight from the definition. W: float32 [D, H d].
std::vector<double> direct(const rkv::LayerKV& l, const std::vector<float>& W, int64_t H, int64_t D) {
  const int64_t d = l.head_dim, T = l.length, G = H / l.n_kv_heads;
  std::vector<double> n(static_cast<size_t>(H * T));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t j = 0; j < T; ++j) {
      double s = 0;
      for (int64_t c = 0; c < D; ++c) {
        double y = 0;
        for (int64_t i = 0; i < d; ++i)
          y += double(W[static_cast<size_t>(c * H * d + h * d + i)]) * l.v_at(h / G, j)[i];
        s += std::fabs(y);
      }
      n[static_cast<size_t>(h * T + j)] = s;
    }
  return n;
}

TEST(ValueOutputNorms, TwoHeadsByHand) {
  // v0 = (1, 2), v1 = (-1, 0.5); W_o [D = 2, H d = 4]: head 0's columns are the identity, head 1's [[2, -1], [0, 3]].
  // Head 0: |1| + |2| = 3, |-1| + |0.5| = 1.5. Head 1: (2 - 2, 6) -> 6; (-2 - 0.5, 1.5) -> 4.
  const rkv::LayerKV l = layer_of(2, 2, {1, 2, -1, 0.5f});
  const std::vector<float> W = {1, 0, 2, -1, 0, 1, 0, 3};
  rkv::cpu::WeightRef w;
  w.f32 = W.data();
  w.rows = 2;
  w.cols = 4;
  EXPECT_EQ(rkv::cpu::value_output_norms(l, w, 2), (std::vector<float>{3, 1.5f, 6, 4}));
}

TEST(ValueOutputNorms, FloatAndQ8WeightsOverTwoRowBlocksEqualTheDirectSum) {
  const int64_t H = 2, d = 32, D = 8, T = 300;
  std::mt19937 rng(7);
  std::normal_distribution<float> N(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(T * d)), W(static_cast<size_t>(D * H * d));
  for (float& x : v) x = N(rng);
  for (float& x : W) x = N(rng);
  const rkv::LayerKV l = layer_of(d, T, v);
  // float32 weights
  rkv::cpu::WeightRef wf;
  wf.f32 = W.data();
  wf.rows = D;
  wf.cols = H * d;
  const std::vector<float> got = rkv::cpu::value_output_norms(l, wf, H);
  const std::vector<double> want = direct(l, W, H, D);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5 * want[i]) << "entry " << i;
  // Q8_0 weights: compared with the direct sum over the dequantized weights
  auto blocks = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(D * H * d / 32 * 34));
  for (int64_t c = 0; c < D; ++c) rkv::quantize_row_q8_0(W.data() + c * H * d, blocks->data() + c * (H * d / 32 * 34), H * d);
  rkv::QuantMatrix q = rkv::to_quant_matrix(8, blocks->data(), D, H * d, blocks);
  std::vector<float> Wq(W.size());
  for (int64_t c = 0; c < D; ++c) rkv::dequantize_row(8, q.row(c), Wq.data() + c * H * d, H * d);
  EXPECT_NE(Wq, W);  // the Q8_0 rounding moved the weights
  rkv::cpu::WeightRef wq;
  wq.q = &q;
  wq.rows = D;
  wq.cols = H * d;
  const std::vector<float> gotq = rkv::cpu::value_output_norms(l, wq, H);
  const std::vector<double> wantq = direct(l, Wq, H, D);
  for (size_t i = 0; i < gotq.size(); ++i) EXPECT_NEAR(gotq[i], wantq[i], 1e-5 * wantq[i]) << "entry " << i;
}

TEST(ValueOutputNorms, TheCpuBackendRefusesPerHeadLayersAndBadIndices) {
  const rkv::Model m = rkv::synthetic_model(rkv::synthetic_config("llama", 4, 2, 16, 2), 3);
  const std::unique_ptr<rkv::Backend> be = rkv::make_backend("cpu", m, {});
  std::vector<int32_t> prompt(20);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(i * 7 % m.config.vocab_size);
  const rkv::PrefillResult r = be->prefill(prompt, {});
  EXPECT_EQ(be->value_output_norms(*r.cache, 1).size(), static_cast<size_t>(4 * 20));
  EXPECT_THROW(be->value_output_norms(*r.cache, 2), rkv::InputError);
  EXPECT_THROW(be->value_output_norms(*r.cache, -1), rkv::InputError);
  rkv::Selection sel;  // KV head 0 keeps 3 entries, head 1 keeps 5
  sel.layer = 0;
  sel.n_kv_heads = 2;
  sel.prefix_tokens = 20;
  sel.head_kept = {3, 5};
  sel.positions = {0, 1, 2, 0, 1, 2, 3, 4};
  sel.kept = 5;
  sel.budget = 8;
  be->compact_layer(*r.cache, 0, sel);
  EXPECT_THROW(be->value_output_norms(*r.cache, 0), rkv::InputError);
}

TEST(ValueOutputNorms, AScorerThatAsksGetsTheBackendsNorms) {
  const rkv::ModelConfig c = rkv::synthetic_config("llama", 6, 2, 16, 2);
  const rkv::Model m = rkv::synthetic_model(c, 9);
  const std::unique_ptr<rkv::Backend> be = rkv::make_backend("cpu", m, {});
  const rkv::PluginRegistry reg = rkv::PluginRegistry::discover({RKV_TEST_BINARY_DIR "/tests/plugins/test_wov"});
  const rkv::PluginInfo& info = reg.resolve("org.test.wov", RKV_KIND_SCORER);
  rkv::HostServices host;
  const rkv::PluginInstance inst = rkv::PluginInstance::create(info, rkv::ParamSet::validate(*info.descriptor, {}), host);
  rkv::ScorerUse scorer;
  scorer.instance = &inst;
  scorer.requirements = rkv::query_scorer_requirements(
      inst, rkv_attention_shape{sizeof(rkv_attention_shape), c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim});
  scorer.key = "wov";
  std::vector<int32_t> tokens(24);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 11 + 3) % c.vocab_size);
  const rkv::PrefilledPrompt prompt = rkv::prefill_prompt(*be, tokens, rkv::prefill_needs({&scorer}));
  rkv::ScoreMemo memo;
  const int64_t T = 24, G = c.n_heads / c.n_kv_heads;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::vector<float> n = be->value_output_norms(*prompt.cache, l);
    const std::vector<float>& got = memo.scores(*be, prompt, scorer, l).scores;
    ASSERT_EQ(got.size(), static_cast<size_t>(c.n_kv_heads * T));
    for (int64_t g = 0; g < c.n_kv_heads; ++g)
      for (int64_t j = 0; j < T; ++j) {
        double want = 0;
        for (int64_t i = 0; i < G; ++i) want += n[static_cast<size_t>((g * G + i) * T + j)];
        EXPECT_NEAR(got[static_cast<size_t>(g * T + j)], want / G, 1e-6 * want) << "layer " << l;
      }
  }
  // Without the norms the call is refused, naming what is missing.
  const rkv::LayerKV kv = be->download_layer(*prompt.cache, 0);
  rkv::ScorerCallInputs in;
  in.layer = 0;
  in.n_heads = c.n_heads;
  in.kv = &kv;
  try {
    rkv::run_scorer(inst, scorer.requirements, in);
    ADD_FAILURE() << "no norms given, yet the call went through";
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("value-output norms"), std::string::npos) << e.what();
  }
  // A prompt statistic: asked for at decode time, the scorer is refused when its requirements are read.
  const rkv::PluginInstance decoding = rkv::PluginInstance::create(
      info, rkv::ParamSet::validate(*info.descriptor, {rkv::UserParam{"decode", true, false, "test"}}), host);
  try {
    rkv::query_scorer_requirements(
        decoding, rkv_attention_shape{sizeof(rkv_attention_shape), c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim});
    ADD_FAILURE() << "decode-time value-output norms were accepted";
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("at decode time"), std::string::npos) << e.what();
  }
}

}  // namespace
