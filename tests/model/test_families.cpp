// The model families against transformers (tests/fixtures/families, made by tests/reference/make_family_fixtures.sh):
// for each family's random model, the CPU forward from the Hugging Face folder and from llama.cpp's converter's f32
// GGUF gives transformers' float64 logits within 1e-4 relative (max |delta| / max |logit|) on every prompt position
// and 8 decode steps, with the same greedy ids; the q8_0 GGUF on the quantized path stays within the KL bound of
// tests/model/test_quantized_smollm2.cpp (4e-3, llama.cpp's own noise on SmolLM2). Both files hold the same weights.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>

#include "backend/cpu/forward.hpp"
#include "common/family_fixtures.hpp"
#include "model/model.hpp"
#include "model/rope.hpp"

namespace {

using rkv_test::FamilyFixture;

/// float32 [T + steps, V]: the prompt's logits at every position, then one row per decode step fed `steps`.
std::vector<float> cpu_logits(const rkv::Model& m, const std::vector<int32_t>& ids, const std::vector<int32_t>& steps) {
  rkv::cpu::Workspace ws;
  const int64_t T = static_cast<int64_t>(ids.size());
  rkv::KVCache cache = rkv::cpu::make_cache(m, T + static_cast<int64_t>(steps.size()));
  std::vector<float> out = rkv::cpu::prefill(m, ids, 0, cache, ws, rkv::LogitsFor::All);
  for (size_t s = 0; s < steps.size(); ++s) {
    const std::vector<float> row = rkv::cpu::decode_step(m, steps[s], T + static_cast<int64_t>(s), cache, ws);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

/// The f32 forward of `path` against `want`: relative error of the prompt rows and of the decode rows, greedy ids.
void expect_matches(const FamilyFixture& f, const std::string& path, const std::string& want_file,
                    const std::vector<int32_t>& greedy) {
  SCOPED_TRACE(f.name + " " + path);
  const rkv::Model m = rkv::load_model(path, rkv::WeightStorage::f32);
  const std::vector<float> want = f.logits(want_file);
  ASSERT_FALSE(want.empty()) << want_file;
  const std::vector<float> got = cpu_logits(m, f.ids, greedy);
  ASSERT_EQ(got.size(), want.size());
  const int64_t T = static_cast<int64_t>(f.ids.size()), V = f.vocab;
  const double prompt = rkv_test::max_relative_error(got, want, V, 0, T);
  const double decode = rkv_test::max_relative_error(got, want, V, T, T + static_cast<int64_t>(greedy.size()));
  EXPECT_LE(prompt, 1e-4);
  EXPECT_LE(decode, 1e-4);
  EXPECT_EQ(rkv_test::greedy_of(got, T, static_cast<int64_t>(greedy.size()), V), greedy);
  std::printf("[ %-8s %-22s ] max rel error: prompt %.2e, decode %.2e\n", f.name.c_str(),
              std::filesystem::path(path).filename().c_str(), prompt, decode);
}

TEST(ModelFamilies, EveryFamilyHasAFixture) {
  std::vector<std::string> names;
  for (const auto& f : rkv_test::family_fixtures()) names.push_back(f.name);
  EXPECT_EQ(names, (std::vector<std::string>{"gemma2", "gemma3", "llama3", "mistral", "olmo2", "phi3", "qwen3"}));
}

TEST(ModelFamilies, SafetensorsAndF32GgufMatchTransformers) {
  for (const auto& f : rkv_test::family_fixtures()) {
    expect_matches(f, f.hf().string(), f.hf_logits, f.greedy);
    expect_matches(f, f.gguf_f32().string(), f.gguf_logits, f.greedy_gguf);
  }
}

TEST(ModelFamilies, Q8GgufOnTheQuantizedPathStaysWithinTheKlBound) {
  for (const auto& f : rkv_test::family_fixtures()) {
    SCOPED_TRACE(f.name);
    const rkv::Model m = rkv::load_model(f.gguf_q8_0().string(), rkv::WeightStorage::quantized);
    EXPECT_FALSE(m.layers[0].quant.wq.empty()) << "q8_0 matrices stay in their blocks";
    const std::vector<float> want = f.logits(f.gguf_logits);
    const std::vector<float> got = cpu_logits(m, f.ids, f.greedy_gguf);
    const double kl = rkv_test::mean_kl(got, want, f.vocab);
    EXPECT_LT(kl, 4e-3);
    EXPECT_GT(kl, 0.0) << "q8_0 weights cannot give the float64 logits exactly";
    std::printf("[ %-8s model-q8_0.gguf ] mean KL %.2e over %zu rows\n", f.name.c_str(), kl, want.size() / f.vocab);
  }
}

/// The two files of a family hold the same float32 weights (model.hpp: both sources give the same layout), and the
/// same configuration but for what the converter drops.
TEST(ModelFamilies, SafetensorsAndGgufHoldTheSameWeights) {
  for (const auto& f : rkv_test::family_fixtures()) {
    SCOPED_TRACE(f.name);
    const rkv::Model hf = rkv::load_model(f.hf().string()), gg = rkv::load_model(f.gguf_f32().string());
    EXPECT_EQ(hf.config.architecture, gg.config.architecture);
    EXPECT_EQ(hf.config.qk_norm, gg.config.qk_norm);
    EXPECT_EQ(hf.config.pre_norms, gg.config.pre_norms);
    EXPECT_EQ(hf.config.post_norms, gg.config.post_norms);
    EXPECT_EQ(hf.tok_embd, gg.tok_embd);
    EXPECT_EQ(hf.lm_head, gg.lm_head);
    for (size_t l = 0; l < hf.layers.size(); ++l) {
      const auto &a = hf.layers[l], &b = gg.layers[l];
      EXPECT_EQ(a.wq, b.wq) << "layer " << l;
      EXPECT_EQ(a.wk, b.wk) << "layer " << l;
      EXPECT_EQ(a.wo, b.wo) << "layer " << l;
      EXPECT_EQ(a.attn_norm, b.attn_norm) << "layer " << l;
      EXPECT_EQ(a.q_norm, b.q_norm) << "layer " << l;
      EXPECT_EQ(a.post_ffn_norm, b.post_ffn_norm) << "layer " << l;
    }
    ASSERT_EQ(hf.rope_inv_freq.size(), gg.rope_inv_freq.size());
    for (size_t i = 0; i < hf.rope_inv_freq.size(); ++i)  // llama3: config scaling vs the GGUF's f32 factors
      EXPECT_NEAR(gg.rope_inv_freq[i] / hf.rope_inv_freq[i], 1.0, 1e-6) << "frequency " << i;
  }
}

/// The fixtures exercise what they claim: without Gemma 2's score soft-cap, or without Mistral's or Phi-3's window,
/// with Phi-3's fused gate and up halves swapped, or with OLMo 2's Q/K norms per head instead of over the whole
/// projection, the logits leave transformers' by far more than the 1e-4 the tests allow.
TEST(ModelFamilies, EachFeatureChangesTheLogits) {
  auto error_without = [](const FamilyFixture& f, const std::function<void(rkv::Model&)>& change) {
    rkv::Model m = rkv::load_model(f.hf().string());
    change(m);
    const int64_t T = static_cast<int64_t>(f.ids.size());
    return rkv_test::max_relative_error(cpu_logits(m, f.ids, f.greedy), f.logits(f.hf_logits), f.vocab, 0,
                                        T + static_cast<int64_t>(f.greedy.size()));
  };
  for (const auto& f : rkv_test::family_fixtures()) {
    if (f.name == "gemma2") {
      EXPECT_GT(error_without(f, [](rkv::Model& m) { m.config.attn_logit_softcap = 0.0f; }), 1e-2);
      EXPECT_GT(error_without(f, [](rkv::Model& m) { m.config.final_logit_softcap = 0.0f; }), 1e-2);
      EXPECT_GT(error_without(f, [](rkv::Model& m) { m.config.layer_sliding = {0, 0}; }), 1e-2);
    }
    if (f.name == "mistral") {
      EXPECT_GT(error_without(f, [](rkv::Model& m) { m.config.layer_sliding.clear(), m.config.sliding_window = 0; }), 1e-2);
    }
    if (f.name == "gemma3") {  // the global layer's RoPE unscaled; the Q/K norms without Gemma's 1 +
      EXPECT_GT(error_without(f, [](rkv::Model& m) {
        m.rope_inv_freq = rkv::rope_inv_freq(m.config.head_dim, m.config.rope_theta, rkv::RopeScaling{});
      }), 1e-2);
      EXPECT_GT(error_without(f, [](rkv::Model& m) {
        for (auto& w : m.layers)
          for (float& x : w.q_norm) x -= 1.0f;
      }), 1e-2);
    }
    if (f.name == "phi3") {  // without the window; with gate and up swapped
      EXPECT_GT(error_without(f, [](rkv::Model& m) { m.config.layer_sliding.clear(), m.config.sliding_window = 0; }), 1e-2);
      EXPECT_GT(error_without(f, [](rkv::Model& m) {
        for (auto& w : m.layers) std::swap(w.w_gate, w.w_up);
      }), 1e-2);
    }
    if (f.name == "olmo2") {  // per-head weights: the first d of each whole-row weight
      EXPECT_GT(error_without(f, [](rkv::Model& m) { m.config.qk_norm = rkv::QkNorm::per_head; }), 1e-2);
    }
  }
}

/// What each family's files say it has, as the table of model/architectures.hpp and the fixture's config give it.
TEST(ModelFamilies, EachFamilyHasItsFeatures) {
  for (const auto& f : rkv_test::family_fixtures()) {
    SCOPED_TRACE(f.name);
    const rkv::ModelConfig c = rkv::describe_model(f.hf().string()).config;
    const rkv::ModelConfig g = rkv::describe_model(f.gguf_f32().string()).config;
    if (f.name == "llama3") {
      EXPECT_EQ(c.rope_scaling.type, "llama3");
      EXPECT_EQ(c.rope_scaling.original_context_length, 256.0);
      EXPECT_TRUE(g.rope_freq_factors) << "the converter writes llama3 scaling as rope_freqs.weight";
      EXPECT_TRUE(c.tied_embeddings && g.tied_embeddings);
    }
    if (f.name == "mistral") {
      EXPECT_EQ(c.sliding_window, 32);
      EXPECT_EQ(c.layer_sliding, std::vector<uint8_t>(static_cast<size_t>(c.n_layers), 1));
      EXPECT_TRUE(g.layer_sliding.empty()) << "llama.cpp's converter writes Mistral as llama, without the window";
    }
    if (f.name == "qwen3") {
      EXPECT_EQ(c.qk_norm, rkv::QkNorm::per_head);
      EXPECT_EQ(c.head_dim, 128);
      EXPECT_FALSE(c.qkv_bias);
    }
    if (f.name == "gemma2") {
      for (const rkv::ModelConfig* x : {&c, &g}) {
        EXPECT_EQ(x->attn_logit_softcap, 3.0f);
        EXPECT_EQ(x->final_logit_softcap, 10.0f);
        EXPECT_EQ(x->layer_sliding, (std::vector<uint8_t>{1, 0}));
        EXPECT_EQ(x->sliding_window, 32);
        EXPECT_EQ(x->attn_scale, 0.125f);
        EXPECT_EQ(x->embed_scale, 8.0f);
        EXPECT_TRUE(x->pre_norms && x->post_norms && x->tied_embeddings);
        EXPECT_EQ(x->ffn_act, rkv::FfnActivation::gelu_tanh);
      }
    }
    if (f.name == "gemma3") {
      EXPECT_EQ(c.layer_sliding, (std::vector<uint8_t>{1, 0}));
      EXPECT_EQ(g.layer_sliding, (std::vector<uint8_t>{1, 1})) << "llama.cpp's pattern: every 6th layer global";
      EXPECT_EQ(c.rope_theta_swa, 1e4);
      EXPECT_EQ(c.rope_theta, 1e6);
      EXPECT_EQ(c.rope_scaling.type, "linear");
      EXPECT_EQ(c.qk_norm, rkv::QkNorm::per_head);
      EXPECT_EQ(c.attn_logit_softcap, 0.0f);
      EXPECT_EQ(c.final_logit_softcap, 0.0f);
      EXPECT_TRUE(c.tied_embeddings);
    }
    if (f.name == "phi3") {
      EXPECT_EQ(c.layer_sliding, std::vector<uint8_t>(static_cast<size_t>(c.n_layers), 1));
      EXPECT_EQ(g.layer_sliding, c.layer_sliding) << "the GGUF keeps phi3.attention.sliding_window";
      EXPECT_EQ(c.sliding_window, 32);
    }
    if (f.name == "olmo2") {
      EXPECT_EQ(c.qk_norm, rkv::QkNorm::whole);
      EXPECT_FALSE(c.pre_norms);
      EXPECT_TRUE(c.post_norms);
    }
  }
}

}  // namespace
