// A joint cell ([compression.joint], runner/compress/joint.hpp) run through the emulated CUDA backend (registered
// as "cuda") against the CPU backend on the seeded 2-layer synthetic model (head dim 64, as the CUDA backend needs): the same plan per layer (options,
// budgets, bits, shared layers), the same packed bytes, and metrics within 1e-3. The plan's damage table is measured
// on each backend, so the two plans agree only if the two backends' damages order the options alike.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>

#include "backend/backend.hpp"
#include "backend/cuda/cuda_backend.hpp"
#include "reliability/synthetic_run.hpp"
#include "runner/plan/config.hpp"
#include "runner/run/run.hpp"

namespace fs = std::filesystem;

namespace {

std::map<std::string, nlohmann::json> cells_of(const fs::path& run) {
  std::map<std::string, nlohmann::json> out;
  for (const auto& e : fs::directory_iterator(run / "cells")) {
    std::ifstream f(e.path());
    out[e.path().stem().string()] = nlohmann::json::parse(f);
  }
  return out;
}

TEST(EmulatedCudaJointRun, AJointCellPlansAndPacksAsOnTheCpu) {
  rkv::register_backend("cuda", [](const rkv::Model& m, const rkv::BackendOptions& o) {
    return rkv::cuda_emu::make_cuda_backend(m, o);
  }, [] { return true; });
  const fs::path dir = fs::temp_directory_path() / ("rkv-joint-emu-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  rkv_test::write_synthetic_run_folder(dir, "llama", 64);
  std::ofstream(dir / "cfg.toml")
      << "[model]\npath = \"model.gguf\"\nthreads = 1\nweights = \"f32\"\n"
         "[data.calibration]\nfiles = [\"cal.txt\"]\nexamples = 2\nprefix_tokens = 32\nwindow_tokens = 8\n"
         "[data.eval]\nfiles = [\"eval.txt\"]\nexamples = 2\nprefix_tokens = 32\n"
         "[scorer]\nplugin = \"streamingllm\"\n[allocator]\nplugin = \"uniform\"\n[budget]\nbytes_fraction = 0.1\n"
         "[compression.joint]\nfractions = [1.0, 0.5, 0.25]\nbits = [32, 4]\nshare = true\ngroup = 32\n"
         "[tasks.lm_fidelity]\ncontinuation_tokens = 8\n[output]\nbootstrap_resamples = 100\n";
  rkv::RunPlan plan = rkv::load_run_plan((dir / "cfg.toml").string());
  rkv::RunOptions o;
  o.quiet = true;
  for (const char* kind : {"cpu", "cuda"}) {
    plan.backend = kind;
    o.out_dir = (dir / kind).string();
    rkv::run_ablation(plan, o);
  }
  const auto cpu = cells_of(dir / "cpu"), dev = cells_of(dir / "cuda");
  ASSERT_EQ(cpu.size(), 2u);
  ASSERT_EQ(dev.size(), 2u);
  bool joint = false;
  for (const auto& [id, a] : cpu) {
    const nlohmann::json& b = dev.at(id);
    joint = joint || a.contains("joint");
    for (size_t i = 0; i < a["examples"].size(); ++i) {
      const nlohmann::json &ea = a["examples"][i], &eb = b["examples"][i];
      for (const char* field : {"budgets", "layer_bits", "joint_plan", "share_sources", "kv_bytes"})
        EXPECT_EQ(eb.value(field, nlohmann::json()), ea.value(field, nlohmann::json())) << field;
      for (const auto& [metric, va] : ea["values"].items())
        EXPECT_LE(std::fabs(eb["values"][metric].get<double>() - va.get<double>()),
                  1e-3 * std::max(std::fabs(va.get<double>()), 1e-6))
            << metric;
    }
  }
  EXPECT_TRUE(joint);
  rkv::register_backend("cuda", nullptr);
  fs::remove_all(dir);
}

}  // namespace
