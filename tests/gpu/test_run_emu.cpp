// A whole ablation run through the CUDA backend's code path on a machine without a GPU: the backend compiled against
// the CPU emulator (backend/cuda/emu) is registered as "cuda", and configs/ci-tiny.toml runs end to end on the real
// SmolLM2 with model.backend = "cuda" (fp32) and with "cpu"; the two runs must agree:
//  - every cell's per-example budgets and KV bytes are identical (the same profile ranks, the same kept counts);
//  - lm_fidelity KL, top-1 agreement and perplexities within 1e-3 relative (the emulated device's attention sums in
//    another order than OpenBLAS: logits agree to about 1e-5, KL of two nearby distributions amplifies that);
//  - needle accuracy identical (identical greedy tokens);
//  - the perturbation-KL profile within 1e-3 relative per layer (docs/ARCHITECTURE.md "perturbation_kl": across backends).
// Then `generate --compress`'s code path (generate_compressed) gives identical greedy tokens on both backends.
// The same run on each model family's random model (tests/fixtures/families). Label model (needs the SmolLM2 and
// Austen assets); several minutes under the emulator.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "backend/backend.hpp"
#include "backend/cuda/cuda_backend.hpp"
#include "common/assets.hpp"
#include "common/family_fixtures.hpp"
#include "runner/decode/generate_compressed.hpp"
#include "runner/plan/config.hpp"
#include "runner/profile/profile.hpp"
#include "runner/run/run.hpp"
#include "tokenizer/chat_template.hpp"

namespace fs = std::filesystem;

namespace {

class EmulatedCudaRun : public ::testing::Test {
 protected:
  void SetUp() override {
    rkv::register_backend("cuda", [](const rkv::Model& m, const rkv::BackendOptions& o) {
      return rkv::cuda_emu::make_cuda_backend(m, o);
    }, [] { return true; });
  }
  void TearDown() override { rkv::register_backend("cuda", nullptr); }
};

nlohmann::json read_json(const fs::path& p) {
  std::ifstream f(p);
  return nlohmann::json::parse(f);
}

std::map<std::string, nlohmann::json> cells_of(const fs::path& run) {
  std::map<std::string, nlohmann::json> out;
  for (const auto& e : fs::directory_iterator(run / "cells"))
    if (e.path().extension() == ".json") out[e.path().stem().string()] = read_json(e.path());
  return out;
}

void expect_close(double got, double want, double rel, const std::string& what) {
  EXPECT_LE(std::fabs(got - want), rel * std::max(std::fabs(want), 1e-12)) << what << ": " << got << " vs " << want;
}

/// Runs `plan` on the CPU and on the emulated device into tmp/cpu and tmp/cuda (each profile computed afresh on its
/// backend) and checks the two agree as the top of this file says. Returns the worst relative difference of a metric
/// and of a profile layer.
std::pair<double, double> expect_runs_agree(rkv::RunPlan plan, const fs::path& tmp) {
  fs::remove_all(tmp);
  plan.weights = rkv::WeightStorage::f32;  // the CPU side is the f32 oracle the device (always f32 weights) must match
  rkv::RunOptions o;
  o.quiet = true;
  double worst = 0;
  for (const char* kind : {"cpu", "cuda"}) {
    plan.backend = kind;
    // The emulated device runs its kernels on one thread; one CPU thread also keeps OpenBLAS's idle workers from
    // spinning against it on a 2-core machine.
    plan.threads = std::string(kind) == "cuda" ? 1 : 2;
    o.out_dir = (tmp / kind).string();
    // The profile is computed on this backend, never read from an earlier run's cache.
    {
      const rkv::Model model = rkv::load_model(plan.model_path);
      const rkv::Tokenizer tok = rkv::Tokenizer::from_path(plan.model_path);
      const auto backend = rkv::make_backend(kind, model);
      for (const auto& c : plan.cells) {
        if (c.config.full_cache || !c.config.uses_profile) continue;
        rkv::ProfileRequest r = rkv::make_profile_request(plan, c.config, model, tok);
        r.backend = backend.get();
        fs::remove(fs::path(rkv::asset_cache_dir()) / "profiles" / (rkv::profile_cache_key(r) + ".json"));
      }
    }
    rkv::run_ablation(plan, o);
  }
  const auto cpu = cells_of(tmp / "cpu"), dev = cells_of(tmp / "cuda");
  EXPECT_EQ(cpu.size(), dev.size());
  EXPECT_GE(cpu.size(), 6u);
  for (const auto& [id, a] : cpu) {
    if (!dev.count(id)) {
      ADD_FAILURE() << id << " is missing from the cuda run";
      continue;
    }
    const nlohmann::json& b = dev.at(id);
    EXPECT_EQ(a["backend"], "cpu");
    EXPECT_EQ(b["backend"], "cuda");
    EXPECT_EQ(b["compute_dtype"], "f32");
    EXPECT_EQ(a["examples"].size(), b["examples"].size()) << id;
    for (size_t i = 0; i < std::min(a["examples"].size(), b["examples"].size()); ++i) {
      const nlohmann::json &ea = a["examples"][i], &eb = b["examples"][i];
      const std::string what = a["label"].get<std::string>() + " " + ea["task"].get<std::string>() + " #" +
                               std::to_string(ea["example"].get<int64_t>());
      EXPECT_EQ(eb["budgets"], ea["budgets"]) << what;
      EXPECT_EQ(eb["kv_bytes"], ea["kv_bytes"]) << what;
      EXPECT_EQ(eb["B"], ea["B"]) << what;
      for (const char* field : {"values", "full_values"})
        for (const auto& [metric, va] : ea[field].items()) {
          const double x = va.get<double>(), y = eb[field][metric].get<double>();
          if (metric == "accuracy") {
            EXPECT_EQ(y, x) << what << " " << metric;
          } else {
            expect_close(y, x, 1e-3, what + " " + field + "." + metric);
            worst = std::max(worst, std::fabs(y - x) / std::max(std::fabs(x), 1e-12));
          }
        }
    }
  }
  const nlohmann::json pa = read_json(tmp / "cpu" / "profile.json"), pb = read_json(tmp / "cuda" / "profile.json");
  EXPECT_EQ(pa["s"].size(), pb["s"].size());
  double worst_profile = 0;
  for (size_t l = 0; l < std::min(pa["s"].size(), pb["s"].size()); ++l) {
    const double x = pa["s"][l].get<double>(), y = pb["s"][l].get<double>();
    expect_close(y, x, 1e-3, "profile layer " + std::to_string(l));
    worst_profile = std::max(worst_profile, std::fabs(y - x) / std::fabs(x));
  }
  fs::remove_all(tmp);
  return {worst, worst_profile};
}

fs::path temp_run_dir(const std::string& what) {
  return fs::temp_directory_path() / ("rkv-emu-run-" + what + "-" + std::to_string(::getpid()));
}

TEST_F(EmulatedCudaRun, CiTinyOnTheCudaCodePathEqualsTheCpuRun) {
  RKV_REQUIRE_ASSET(rkv_test::smollm2_gguf());
  RKV_REQUIRE_ASSET(rkv_test::austen_dir());
  const auto [worst, worst_profile] = expect_runs_agree(
      rkv::load_run_plan(std::string(RKV_TEST_SOURCE_DIR) + "/configs/ci-tiny.toml"), temp_run_dir("smollm2"));
  std::printf("[ emulated cuda vs cpu ] ci-tiny: worst metric relative difference %.3g, worst profile %.3g\n", worst,
              worst_profile);
}

/// configs/ci-tiny.toml on each family's random model (tests/fixtures/families, the Hugging Face folder): the
/// compression pipeline sees each family's features (Q/K norms in the scorers' statistics, post norms, Mistral's
/// window in the spans) the same way on both backends: identical budgets and bytes, metrics within 1e-3.
TEST_F(EmulatedCudaRun, CiTinyOnEveryFamilyEqualsTheCpuRun) {
  RKV_REQUIRE_ASSET(rkv_test::austen_dir());
  for (const auto& f : rkv_test::family_fixtures()) {
    SCOPED_TRACE(f.name);
    const std::string set = "model.path = '" + f.hf().string() + "'";
    const rkv::RunPlan plan =
        rkv::load_run_plan(std::string(RKV_TEST_SOURCE_DIR) + "/configs/ci-tiny.toml", {set});
    const auto [worst, worst_profile] = expect_runs_agree(plan, temp_run_dir(f.name));
    std::printf("[ emulated cuda vs cpu ] ci-tiny on %s: worst metric relative difference %.3g, worst profile %.3g\n",
                f.name.c_str(), worst, worst_profile);
  }
}

TEST_F(EmulatedCudaRun, GenerateCompressedGivesTheSameTokens) {
  RKV_REQUIRE_ASSET(rkv_test::smollm2_gguf());
  const rkv::Model model = rkv::load_model(rkv_test::smollm2_gguf().string());
  const rkv::Tokenizer tok = rkv::Tokenizer::from_path(rkv_test::smollm2_gguf().string());
  const rkv::ChatTemplate tmpl = rkv::ChatTemplate::for_tokenizer(tok);
  const std::vector<int32_t> ids = tok.encode(
      tmpl.apply({{"user", "Name the capital of France and say one thing about its history."}}, true),
      tok.add_bos_by_default(), true);
  const fs::path config = fs::temp_directory_path() / ("rkv-emu-compress-" + std::to_string(::getpid()) + ".toml");
  {
    std::ofstream f(config);
    f << "[scorer]\nplugin = \"h2o\"\n[scorer.h2o]\nrecent = 8\n[allocator]\nplugin = \"uniform\"\n"
         "[budget]\nfraction = 0.4\n";
  }
  const auto cpu = rkv::make_backend("cpu", model), dev = rkv::make_backend("cuda", model);
  const rkv::CompressedGeneration a = rkv::generate_compressed(*cpu, tok, ids, config.string(), "", 12);
  const rkv::CompressedGeneration b = rkv::generate_compressed(*dev, tok, ids, config.string(), "", 12);
  EXPECT_EQ(b.tokens, a.tokens) << "cpu: " << tok.decode(a.tokens, false) << " | cuda: " << tok.decode(b.tokens, false);
  EXPECT_EQ(b.budgets, a.budgets);
  EXPECT_EQ(b.bytes_kept, a.bytes_kept);
  EXPECT_FALSE(a.tokens.empty());
  fs::remove(config);
}

}  // namespace
