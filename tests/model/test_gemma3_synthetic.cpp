// A small Gemma-3-shaped model (rkv::synthetic_model "gemma3": window 16, layers 0 and 1 sliding, layer 2 global,
// RoPE bases 1e4 / 1e6, attention scale 1/sqrt(D/H), embeddings x sqrt(D), Q/K norms, post norms, GELU-tanh MLP,
// logit soft-cap 3) written as a GGUF, loaded back, and run against tests/reference/gemma3_reference.py, an
// independent float64 numpy forward written from transformers' Gemma3 (not from this C++). Prompts longer than the
// window and than one attention block (64 queries), so the sliding-window mask, both RoPE bases and the blocked
// attention are all exercised in prefill, chunked prefill and token-by-token decode.
#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "../backend/naive_forward.hpp"
#include "backend/backend.hpp"
#include "backend/cpu/forward.hpp"
#include "common/assets.hpp"
#include "core/atomic_file.hpp"
#include "core/errors.hpp"
#include "core/subprocess.hpp"
#include "model/gemma.hpp"
#include "model/model.hpp"
#include "model/synthetic_model.hpp"
#include "model_writers.hpp"

#define REQUIRE_ASSET_AT(expr)                 \
  do {                                         \
    const std::filesystem::path path = (expr); \
    RKV_REQUIRE_ASSET(path);                   \
  } while (0)

namespace {

namespace fs = std::filesystem;
using rkv::cpu::LogitsFor;

constexpr int64_t kT = 100;  // > window 16 and > one attention block of 64 queries

fs::path venv_python() { return rkv_test::asset_cache_dir() / "venv" / "bin" / "python"; }

std::vector<float> read_f32(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<float> v;
  float x;
  while (in.read(reinterpret_cast<char*>(&x), 4)) v.push_back(x);
  return v;
}

std::vector<int32_t> tokens(int64_t n, int64_t V) {
  rkv::SyntheticRng r(7);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>((r.next() + 1.0f) * 0.5f * static_cast<float>(V - 1));
  return t;
}

/// This test process's own folder under the test temp folder, removed when the process ends: ctest runs the cases of
/// this file as parallel processes, and a file one case writes while another maps it would be read half-written.
const fs::path& process_dir() {
  struct Dir {
    fs::path path = fs::path(testing::TempDir()) / ("rkv_gemma3_synthetic." + std::to_string(::getpid()));
    Dir() { fs::create_directories(path); }
    ~Dir() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  };
  static const Dir dir;
  return dir.path;
}

/// The synthetic model written to a GGUF in this process's folder, its path.
fs::path written_gguf() {
  static const fs::path p = [] {
    const rkv::Model m = rkv::synthetic_model(rkv::synthetic_config("gemma3", 4, 2, 8, 3), 5);
    const fs::path f = process_dir() / "model.gguf";
    rkv_test::gguf_writer_for(m).write(f.string());
    return f;
  }();
  return p;
}

std::vector<float> prefill_all(const rkv::Model& m, const std::vector<int32_t>& ids, int64_t chunk = 0) {
  rkv::cpu::Workspace ws;
  rkv::KVCache cache = rkv::cpu::make_cache(m, 4);  // grows
  return rkv::cpu::prefill(m, ids, 0, cache, ws, LogitsFor::All, chunk);
}

/// The numpy reference's logits [kT, V] for tokens(kT).
const std::vector<float>& numpy_logits() {
  static std::vector<float> ref;
  if (!ref.empty()) return ref;
  const fs::path dir = process_dir() / "ref";
  fs::create_directories(dir);
  const rkv::Model m = rkv::load_model(written_gguf().string());
  nlohmann::json j;
  j["prompts"] = {tokens(kT, m.config.vocab_size)};
  std::ofstream(dir / "ids.json") << j.dump();
  const std::vector<std::string> cmd = {venv_python().string(), RKV_TEST_SOURCE_DIR "/tests/reference/gemma3_reference.py",
                                       "--model", written_gguf().string(), "--ids", (dir / "ids.json").string(),
                                       "--out", (dir / "ref_").string()};
  const std::string log = (dir / "log.txt").string();
  if (rkv::run_program(cmd, "", log) != 0) throw std::runtime_error("gemma3_reference.py failed: " + rkv::read_file(log));
  ref = read_f32(dir / "ref_0.f32");
  return ref;
}

TEST(Gemma3Synthetic, GgufLoadsBackWithItsConfig) {
  const rkv::Model ref = rkv::synthetic_model(rkv::synthetic_config("gemma3", 4, 2, 8, 3), 5);
  const rkv::Model m = rkv::load_model(written_gguf().string());
  const rkv::ModelConfig& c = m.config;
  EXPECT_EQ(c.architecture, "gemma3");
  EXPECT_EQ(c.layer_sliding, (std::vector<uint8_t>{1, 1, 0}));  // period 3: l % 3 < 2
  EXPECT_EQ(c.sliding_window, 16);
  EXPECT_EQ(c.layer_window(0), 16);
  EXPECT_EQ(c.layer_window(2), 0);
  EXPECT_EQ(c.layer_span(1, 100), 16);
  EXPECT_EQ(c.layer_span(2, 100), 100);
  EXPECT_EQ(c.layer_span(0, 10), 10);
  EXPECT_FLOAT_EQ(c.attention_scale(), 0.5f);  // 1/sqrt(D/H) = 1/sqrt(4), from attention.scale
  EXPECT_FLOAT_EQ(c.embed_scale, 4.0f);        // sqrt(16)
  EXPECT_FLOAT_EQ(c.final_logit_softcap, 3.0f);
  EXPECT_EQ(c.rope_theta_swa, 1e4);
  EXPECT_TRUE(c.qk_norm == rkv::QkNorm::per_head && c.post_norms && c.tied_embeddings);
  EXPECT_EQ(c.ffn_act, rkv::FfnActivation::gelu_tanh);
  ASSERT_EQ(m.rope_inv_freq_swa.size(), 4u);
  EXPECT_NEAR(m.rope_inv_freq_swa[1], std::pow(1e4, -0.25), 1e-15);  // theta^(-2i/d), i = 1, d = 8
  EXPECT_NEAR(m.rope_inv_freq[1], std::pow(1e6, -0.25), 1e-15);
  EXPECT_EQ(&m.layer_inv_freq(0), &m.rope_inv_freq_swa);
  EXPECT_EQ(&m.layer_inv_freq(2), &m.rope_inv_freq);
  for (size_t l = 0; l < 3; ++l) {
    EXPECT_EQ(m.layers[l].q_norm, ref.layers[l].q_norm);
    EXPECT_EQ(m.layers[l].post_ffn_norm, ref.layers[l].post_ffn_norm);
    EXPECT_EQ(m.layers[l].wq, ref.layers[l].wq);  // gemma3 GGUFs are not Q/K-permuted
  }
}

TEST(Gemma3Synthetic, SlidingPatternFollowsLlamaCpp) {
  const std::vector<uint8_t> p = rkv::sliding_pattern(18, 6);
  for (int64_t l = 0; l < 18; ++l) EXPECT_EQ(p[static_cast<size_t>(l)], l == 5 || l == 11 || l == 17 ? 0 : 1) << l;
  EXPECT_EQ(rkv::sliding_pattern(3, 0), (std::vector<uint8_t>{1, 1, 1}));
  EXPECT_EQ(rkv::sliding_pattern(3, 1), (std::vector<uint8_t>{0, 0, 0}));
  EXPECT_THROW(rkv::sliding_pattern(3, -1), rkv::InputError);
}

TEST(Gemma3Synthetic, PrefillMatchesTheNumpyReference) {
  REQUIRE_ASSET_AT(venv_python());
  const rkv::Model m = rkv::load_model(written_gguf().string());
  const int64_t V = m.config.vocab_size;
  const std::vector<float>& ref = numpy_logits();
  ASSERT_EQ(ref.size(), static_cast<size_t>(kT * V));
  const double err = rkv_test::max_rel_err(prefill_all(m, tokens(kT, V)), ref, kT, V);
  std::printf("prefill vs numpy: max|delta|/max|logit| = %.3g\n", err);
  EXPECT_LT(err, 1e-4);
  const double chunked = rkv_test::max_rel_err(prefill_all(m, tokens(kT, V), 24), ref, kT, V);
  std::printf("prefill in chunks of 24 vs numpy: %.3g\n", chunked);
  EXPECT_LT(chunked, 1e-4);
}

TEST(Gemma3Synthetic, DecodeMatchesTheNumpyReference) {
  REQUIRE_ASSET_AT(venv_python());
  const rkv::Model m = rkv::load_model(written_gguf().string());
  const int64_t V = m.config.vocab_size;
  const std::vector<int32_t> ids = tokens(kT, V);
  rkv::cpu::Workspace ws;
  rkv::KVCache cache = rkv::cpu::make_cache(m, 1);
  std::vector<float> dec;
  for (int64_t t = 0; t < kT; ++t) {
    const std::vector<float> lg = rkv::cpu::decode_step(m, ids[static_cast<size_t>(t)], t, cache, ws);
    dec.insert(dec.end(), lg.begin(), lg.end());
  }
  const double err = rkv_test::max_rel_err(dec, numpy_logits(), kT, V);
  std::printf("token-by-token decode vs numpy: %.3g\n", err);
  EXPECT_LT(err, 1e-4);
}

TEST(Gemma3Synthetic, WindowAndBothRopeBasesMatter) {
  REQUIRE_ASSET_AT(venv_python());
  // The same weights without the window, or with one RoPE base everywhere, must miss the reference by far: the
  // test above would fail without either.
  const int64_t V = 40;
  const std::vector<int32_t> ids = tokens(kT, V);
  rkv::Model unbounded = rkv::load_model(written_gguf().string());
  unbounded.config.sliding_window = 1 << 30;  // still the sliding layers' RoPE base, but a window that never binds
  EXPECT_GT(rkv_test::max_rel_err(prefill_all(unbounded, ids), numpy_logits(), kT, V), 1e-2);
  rkv::Model one_base = rkv::load_model(written_gguf().string());
  one_base.rope_inv_freq_swa = one_base.rope_inv_freq;
  EXPECT_GT(rkv_test::max_rel_err(prefill_all(one_base, ids), numpy_logits(), kT, V), 1e-2);
}

TEST(Gemma3Synthetic, HooksSeeTheWindowAndDoNotChangeTheResult) {
  const rkv::Model m = rkv::load_model(written_gguf().string());
  const int64_t V = m.config.vocab_size, W = m.config.sliding_window;
  const std::vector<int32_t> ids = tokens(kT, V);
  std::vector<float> x = rkv::cpu::embed(m, ids), x_hooked = x;
  std::vector<int64_t> pos(static_cast<size_t>(kT));
  for (int64_t t = 0; t < kT; ++t) pos[static_cast<size_t>(t)] = t;
  rkv::cpu::Workspace ws;
  rkv::KVCache a = rkv::cpu::make_cache(m, kT), b = rkv::cpu::make_cache(m, kT);
  int64_t rows = 0;
  rkv::cpu::LayerHooks hooks;
  hooks.on_attention_probs = [&](int64_t, int64_t query, const float* probs, int64_t len) {
    ++rows;
    double sum = 0.0;
    for (int64_t j = 0; j < len; ++j) {
      if (query - j >= W) EXPECT_EQ(probs[j], 0.0f) << "query " << query << " key " << j;
      sum += probs[j];
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
  };
  rkv::cpu::forward_layer(m, 0, x.data(), kT, pos.data(), a.layers[0], ws);  // layer 0 slides
  rkv::cpu::forward_layer(m, 0, x_hooked.data(), kT, pos.data(), b.layers[0], ws, &hooks);
  EXPECT_EQ(rows, kT * m.config.n_heads);
  EXPECT_LT(rkv_test::max_rel_err(x_hooked, x, kT, m.config.d_model), 1e-6);
}

TEST(Gemma3Synthetic, QueryCountsOfASlidingLayerStopAtTheWindow) {
  // H2O's normalizer: key j of a prompt of T = 100 is seen by T - j queries on the global layer 2, and by
  // min(T - j, 16) on the sliding layers 0 and 1 (queries j .. j + 15).
  const rkv::Model m = rkv::load_model(written_gguf().string());
  const std::unique_ptr<rkv::Backend> be = rkv::make_backend("cpu", m);
  rkv::PrefillRequest req;
  rkv::AttentionStatsOptions o;
  o.cumulative_attention = o.query_counts = true;
  req.stats = {o};
  const rkv::PrefillResult r = be->prefill(tokens(kT, m.config.vocab_size), req);
  for (int64_t l = 0; l < 3; ++l) {
    const std::vector<float>& n = r.stats[0][static_cast<size_t>(l)].query_counts;
    ASSERT_EQ(n.size(), static_cast<size_t>(kT));
    EXPECT_EQ(n[0], l == 2 ? 100.0f : 16.0f) << "layer " << l;
    EXPECT_EQ(n[84], 16.0f) << "layer " << l;  // T - j = 16 either way
    EXPECT_EQ(n[90], 10.0f) << "layer " << l;
  }
}

TEST(Gemma3Synthetic, SlidingLayerNeedsCachePositions) {
  const rkv::Model m = rkv::load_model(written_gguf().string());
  rkv::LayerKV kv;  // a hand-built layer without positions
  kv.n_kv_heads = m.config.n_kv_heads;
  kv.head_dim = m.config.head_dim;
  kv.capacity = 4;
  kv.k.assign(static_cast<size_t>(kv.n_kv_heads * 4 * kv.head_dim), 0.0f);
  kv.v = kv.k;
  std::vector<float> x = rkv::cpu::embed(m, {1, 2});
  const int64_t pos[2] = {0, 1};
  rkv::cpu::Workspace ws;
  EXPECT_THROW(rkv::cpu::forward_layer(m, 0, x.data(), 2, pos, kv, ws), rkv::InputError);
}

}  // namespace
