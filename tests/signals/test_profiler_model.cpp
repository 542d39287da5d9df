// The profiler and `ripplekv profile` on SmolLM2-135M-Instruct and Austen text with small settings (ctest label model:
// P 256, N <= 2, n_w 16), through the real plugins.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include "backend/cpu/threads.hpp"
#include "common/assets.hpp"
#include "core/atomic_file.hpp"
#include "core/subprocess.hpp"
#include "model/model.hpp"
#include "profiler_helpers.hpp"
#include "runner/profile/profile.hpp"
#include "runner/plan/profile_file.hpp"
#include "runner/profile/profiler.hpp"
#include "runner/tasks/text_windows.hpp"
#include "tokenizer/tokenizer.hpp"

namespace fs = std::filesystem;

namespace {

constexpr int64_t kP = 256, kW = 16;
const rkv::ProtectedSpec kProtect{4, 32};

struct Assets {
  rkv::Model model;
  rkv::Tokenizer tokenizer;
};

/// SmolLM2 and its tokenizer, loaded once per process.
const Assets& assets() {
  static const Assets a = [] {
    rkv::Model m = rkv::load_model(rkv_test::smollm2_gguf().string());
    rkv::Tokenizer t = rkv::Tokenizer::from_gguf(*m.gguf);
    return Assets{std::move(m), std::move(t)};
  }();
  return a;
}

std::string persuasion() { return (rkv_test::austen_dir() / "persuasion.txt").string(); }

/// n calibration examples of P + n_w tokens from Persuasion.
std::vector<std::vector<int32_t>> examples(int64_t n) {
  std::vector<std::vector<int32_t>> out;
  for (auto& w : rkv::draw_text_windows(assets().tokenizer, {persuasion()}, n, kP + kW, 0)) out.push_back(w.tokens);
  return out;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

// RKV_REQUIRE_ASSET's parameter is named `path`, which also rewrites the `std::filesystem::path` inside it, so it
// only expands correctly for an argument spelled `path`.
#define REQUIRE_SMOLLM2()                                                      \
  do {                                                                         \
    const std::filesystem::path path = rkv_test::smollm2_gguf();               \
    RKV_REQUIRE_ASSET(path);                                                   \
  } while (0);                                                                 \
  do {                                                                         \
    const std::filesystem::path path = rkv_test::austen_dir() / "persuasion.txt"; \
    RKV_REQUIRE_ASSET(path);                                                   \
  } while (0)

TEST(SmolLM2Profiler, WindowOnlyRecomputeEqualsTheNaiveMethod) {
  REQUIRE_SMOLLM2();
  rkv::cpu::set_num_threads(2);
  const rkv::Model& m = assets().model;
  const auto ex = examples(1);
  rkv::Profiler p(m, ex, kP, kW, kProtect);
  p.prepare_example(0);
  const std::vector<float> ref = rkv_test::naive_window_logits(m, ex[0], kP, -1, 0, 0, 0, 0, 0);
  for (int64_t l : {0, 13, 29}) {
    p.perturb_values(l, 0.0, 0, 0);
    for (double kl : p.window_kl(l)) EXPECT_EQ(kl, 0.0) << "alpha 0, layer " << l;
    p.perturb_values(l, 0.02, 0, 0);
    const std::vector<double> fast = p.window_kl(l);
    p.restore(l);
    const std::vector<double> naive = rkv_test::plain_kl_rows(
        ref, rkv_test::naive_window_logits(m, ex[0], kP, l, 0.02, 0, 0, kProtect.sinks, kProtect.recent),
        m.config.vocab_size);
    for (int64_t t = 0; t < kW; ++t) {
      EXPECT_GT(naive[static_cast<size_t>(t)], 0.0);
      EXPECT_LE(rkv_test::rel_diff(fast[static_cast<size_t>(t)], naive[static_cast<size_t>(t)]), 1e-5)
          << "layer " << l << " row " << t << ": " << fast[static_cast<size_t>(t)] << " vs "
          << naive[static_cast<size_t>(t)];
    }
  }
  // Perturbing layer 13 leaves the input of every layer up to 13 bit-identical and changes the ones above.
  p.perturb_values(13, 0.02, 0, 0);
  rkv::KVCache cache = rkv_test::cpu_session(p).cache();
  rkv::cpu::Workspace ws;
  std::vector<float> x = rkv::cpu::embed(m, std::vector<int32_t>(ex[0].begin() + kP, ex[0].end()));
  std::vector<int64_t> pos;
  for (int64_t t = 0; t < kW; ++t) pos.push_back(kP + t);
  for (int64_t l = 0; l <= 30; ++l) {
    const bool same = std::equal(x.begin(), x.end(), rkv_test::cpu_session(p).reference_hidden(l));
    EXPECT_EQ(same, l <= 13) << "input of layer " << l;
    if (l < 30) rkv::cpu::forward_layer(m, l, x.data(), kW, pos.data(), cache.layers[static_cast<size_t>(l)], ws);
  }
}

TEST(SmolLM2Profiler, KLIsQuadraticInAlphaOnEveryLayer) {
  REQUIRE_SMOLLM2();
  rkv::cpu::set_num_threads(2);
  rkv::Profiler p(assets().model, examples(1), kP, kW, kProtect);
  p.prepare_example(0);
  for (int64_t l = 0; l < p.n_layers(); ++l) {
    p.perturb_values(l, 0.01, 0, 0);
    const double s1 = mean(p.window_kl(l));
    p.restore(l);
    p.perturb_values(l, 0.02, 0, 0);
    const double s2 = mean(p.window_kl(l));
    p.restore(l);
    EXPECT_GT(s1, 0.0) << "layer " << l;
    EXPECT_GE(s2 / s1, 3.6) << "layer " << l;
    EXPECT_LE(s2 / s1, 4.4) << "layer " << l;
  }
}

TEST(SmolLM2Profiler, BitwiseReproducibleAndOneVersusTwoThreads) {
  REQUIRE_SMOLLM2();
  const auto ex = examples(1);
  auto run = [&](int threads) {
    rkv::cpu::set_num_threads(threads);
    rkv::Profiler p(assets().model, ex, kP, kW, kProtect);
    p.prepare_example(0);
    std::vector<double> s;
    for (int64_t l : {0, 29}) {
      p.perturb_values(l, 0.02, 0, 0);
      s.push_back(mean(p.window_kl(l)));
      p.restore(l);
    }
    return s;
  };
  const auto a = run(2), b = run(2), c = run(1);
  EXPECT_EQ(a, b);
  // Across thread counts the BLAS reductions differ, so the float32 logits differ by about 1e-6 of their size
  // (~1e-5 logits). At alpha = 0.02 the perturbation moves the logits by only ~3e-3 (these KLs are ~1e-5 nats), so the
  // rounding changes a KL by up to ~1e-5 / 3e-3 of itself: measured 5e-4 on AMD EPYC's ZEN kernels (layer 29,
  // 6.4092e-6 vs 6.4125e-6), below 1e-4 on the machines this test passed on before. docs/ARCHITECTURE.md "perturbation_kl"'s 1e-4 holds
  // where the perturbation dominates the rounding; here the bound is 2e-3.
  for (size_t k = 0; k < a.size(); ++k) EXPECT_LE(rkv_test::rel_diff(a[k], c[k]), 2e-3) << a[k] << " vs " << c[k];
}

/// A temporary config for SmolLM2 and Austen with the given [signal] section.
fs::path write_config(const fs::path& dir, const std::string& signal_section) {
  fs::create_directories(dir);
  const fs::path cfg = dir / "profile.toml";
  std::ofstream(cfg) << "[model]\npath = \"" << rkv_test::smollm2_gguf().string() << "\"\nthreads = 2\n"
                     << "[data.calibration]\nfiles = [\"" << persuasion() << "\"]\nexamples = 2\n"
                     << "prefix_tokens = " << kP << "\nwindow_tokens = " << kW << "\n"
                     << "[data.eval]\nfiles = [\"" << (rkv_test::austen_dir() / "emma.txt").string() << "\"]\n"
                     << signal_section << "[scorer]\nplugin = \"snapkv\"\n[allocator]\nplugin = \""
                     << (signal_section.empty() ? "uniform" : "ripplekv") << "\"\n"
                     << "[budget]\nfraction = 0.2\n";
  return cfg;
}

TEST(SmolLM2Profile, ThirtyLayersThenTheCacheIsReused) {
  REQUIRE_SMOLLM2();
  const fs::path dir = fs::temp_directory_path() / ("rkv_profile_model_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const rkv::RunPlan plan = rkv::load_run_plan(write_config(dir, "[signal]\nplugin = \"perturbation_kl\"\n").string());
  const rkv::CellConfig* cell = nullptr;
  for (const auto& c : plan.cells)
    if (c.config.signal) cell = cell ? cell : &c.config;
  ASSERT_NE(cell, nullptr);
  rkv::ProfileRequest r = rkv::make_profile_request(plan, *cell, assets().model, assets().tokenizer);
  EXPECT_EQ(r.protect.sinks, 0);   // snapkv protects its observation window (32) only
  EXPECT_EQ(r.protect.recent, 32);
  ASSERT_EQ(r.examples.size(), 2u);
  const auto tokens = rkv::tokenize_files(assets().tokenizer, {persuasion()})[0].tokens;
  for (const auto& w : r.examples)
    EXPECT_TRUE(std::equal(w.tokens.begin(), w.tokens.end(), tokens.begin() + w.offset)) << w.offset;
  r.cache_dir = (dir / "profiles").string();

  const auto t0 = std::chrono::steady_clock::now();
  const rkv::SensitivityProfile first = rkv::compute_profile(r);
  const double t_first = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(first.s.size(), 30u);
  for (size_t l = 0; l < 30; ++l) {
    EXPECT_TRUE(std::isfinite(first.s[l]) && first.s[l] > 0.0) << l;
    EXPECT_LE(first.ci_low[l], first.ci_high[l]);
  }
  EXPECT_TRUE(std::isfinite(first.split_half_spearman));
  EXPECT_FALSE(first.from_cache);

  const auto t1 = std::chrono::steady_clock::now();
  const rkv::SensitivityProfile second = rkv::compute_profile(r);
  const double t_second = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.s, first.s);
  EXPECT_EQ(second.per_example, first.per_example);
  EXPECT_LT(t_second * 20, t_first) << t_second << " s vs " << t_first << " s";
  fs::remove_all(dir);
}

/// Runs the CLI with an argument vector (no shell: core/subprocess.hpp) and RIPPLEKV_CACHE = `cache`,
/// RIPPLEKV_PLUGIN_PATH empty; returns its exit code and stdout + stderr.
std::pair<int, std::string> run_cli(const std::vector<std::string>& args, const fs::path& cache) {
  struct Env {  // the child inherits this process's environment; restored afterwards
    std::string name;
    std::optional<std::string> old;
    Env(const char* n, const std::string& value) : name(n) {
      if (const char* v = std::getenv(n)) old = v;
      ::setenv(n, value.c_str(), 1);
    }
    ~Env() { old ? ::setenv(name.c_str(), old->c_str(), 1) : ::unsetenv(name.c_str()); }
  };
  const Env plugins("RIPPLEKV_PLUGIN_PATH", ""), asset_cache("RIPPLEKV_CACHE", cache.string());
  std::vector<std::string> argv = {RKV_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  fs::create_directories(cache);
  const fs::path log = cache / ("cli_" + std::to_string(::getpid()) + ".log");
  const int status = rkv::run_program(argv, "", log.string());
  std::string out;
  try {
    out = rkv::read_file(log.string());
  } catch (const std::exception&) {
  }
  fs::remove(log);
  return {status, out};
}

TEST(SmolLM2Profile, CommandLine) {
  REQUIRE_SMOLLM2();
  const fs::path dir = fs::temp_directory_path() / ("rkv_profile_cli_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const fs::path cfg = write_config(dir, "");
  const fs::path out = dir / "p.json";
  // The config has no [signal]: a clear error unless --signal names one.
  auto [rc, text] = run_cli({"profile", cfg.string()}, dir / "cache");
  EXPECT_EQ(rc, 2) << text;
  EXPECT_NE(text.find("no [signal] section"), std::string::npos) << text;
  std::tie(rc, text) = run_cli({"profile", cfg.string(), "--signal", "depth", "--out", out.string()}, dir / "cache");
  ASSERT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("split-half Spearman"), std::string::npos) << text;
  const rkv::ProfileFile pf = rkv::read_profile_file(out.string());
  ASSERT_EQ(pf.s.size(), 30u);
  EXPECT_DOUBLE_EQ(pf.s[29], 1.0);
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(out));
  EXPECT_EQ(j["signal"], "org.ripplekv.signal.depth");
  EXPECT_EQ(j["calibration"]["prefix_tokens"], kP);
  EXPECT_TRUE(fs::exists(dir / "cache" / "profiles" / (j["cache_key"].get<std::string>() + ".json")));
  std::tie(rc, text) = run_cli({"allocate", "--allocator", "ripplekv", "--profile", out.string(), "--prefix-tokens", "256",
                                "--budget-fraction", "0.2", "--json"},
                               dir / "cache");
  EXPECT_EQ(rc, 0) << text;
  std::tie(rc, text) = run_cli({"profile", cfg.string(), "--signal", "nosuchsignal"}, dir / "cache");
  EXPECT_EQ(rc, 2) << text;
  std::tie(rc, text) = run_cli({"profile"}, dir / "cache");
  EXPECT_EQ(rc, 2) << text;
  std::tie(rc, text) = run_cli({"profile", "--help"}, dir / "cache");
  EXPECT_EQ(rc, 0) << text;
  fs::remove_all(dir);
}

}  // namespace
