// The real Gemma 3 270M against tests/reference/gemma3_reference.py, an independent float64 numpy forward written
// from transformers' Gemma3 (label `slow`: reading and widening the file in numpy takes about a minute). 600 tokens:
// the last position's windows start past position 0, so the sliding-window mask and both RoPE bases are in play.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "../backend/naive_forward.hpp"
#include "core/subprocess.hpp"
#include "gemma3_test_util.hpp"

namespace {

using namespace rkv_test;

TEST(Gemma3, MatchesTheNumpyReferenceBeyondTheWindow) {
  REQUIRE_ASSET_AT(gemma3_gguf());
  REQUIRE_ASSET_AT(venv_python());
  REQUIRE_ASSET_AT(rkv_test::austen_dir());
  const std::vector<int32_t> ids = austen_ids(600);
  const fs::path dir = fs::path(testing::TempDir()) / "rkv_gemma3_numpy";
  fs::create_directories(dir);
  nlohmann::json j;
  j["prompts"] = {ids};
  std::ofstream(dir / "ids.json") << j.dump();
  const std::vector<std::string> cmd = {venv_python().string(), RKV_TEST_SOURCE_DIR "/tests/reference/gemma3_reference.py",
                                       "--model", gemma3_gguf().string(), "--ids", (dir / "ids.json").string(),
                                       "--out", (dir / "ref_").string(), "--rows", "last"};
  const std::string log = (dir / "log.txt").string();
  ASSERT_EQ(rkv::run_program(cmd, "", log), 0) << rkv::read_file(log);
  const std::vector<float> ref = read_f32(dir / "ref_0.f32");
  const int64_t V = gemma().config.vocab_size;
  ASSERT_EQ(ref.size(), static_cast<size_t>(V));
  const double err = rkv_test::max_rel_err(last_logits(gemma(), ids, 1), ref, 1, V);
  std::printf("600 tokens, last position vs numpy float64: max|delta|/max|logit| = %.3g\n", err);
  EXPECT_LT(err, 1e-4);
}

}  // namespace
