// perturbation_kl profiling time on SmolLM2 (docs/ARCHITECTURE.md "perturbation_kl"): N calibration examples of
// a P-token prefix + an n_w-token window (defaults 8, 1024, 32, from Austen's Emma, snapkv's protected window), timed
//   plain_prefill      each example's P + n_w tokens through every layer once, logits at the window positions
//                      (the baseline: what a plain prefill of the same calibration examples costs)
//   perturbation_kl    the whole profile through the real plugin and the profiler service (compute_profile, no cache)
//   naive              the same perturbations, with the window rerun through all L layers for every layer
// and prints the ratios. Goal: perturbation_kl <= 2.0x plain_prefill (work floor about 1.7x).
//
// Usage: bench_profile [--threads=2] [--examples=8] [--prefix=1024] [--window=32] [benchmark flags]
// e.g. --benchmark_repetitions=3 --benchmark_enable_random_interleaving=true on a busy machine (best of 3 is kept).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <cstring>
#include <ctime>
#include <map>
#include <string>

#include "backend/cpu/forward.hpp"
#include "backend/cpu/threads.hpp"
#ifndef RKV_TEST_SHARED_DIR
#define RKV_TEST_SHARED_DIR "../shared"  // assets.hpp names it; unused here
#endif
#include "common/assets.hpp"
#include "model/model.hpp"
#include "plugin/registry.hpp"
#include "runner/profile/profile.hpp"
#include "runner/profile/profiler.hpp"
#include "runner/tasks/text_windows.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

int g_threads = 2;
int64_t g_n = 8, g_p = 1024, g_w = 32;
const rkv::ProtectedSpec kProtect{0, 32};  // snapkv's default observation window
std::map<std::string, double> g_seconds;   // best wall time per benchmark
std::map<std::string, double> g_cpu;       // best process CPU time (all threads) per benchmark

struct Setup {
  rkv::Model model;
  std::vector<rkv::TextWindow> windows;
  std::shared_ptr<rkv::PluginRegistry> registry;
};

Setup& setup() {
  static Setup s = [] {
    Setup x;
    x.model = rkv::load_model(rkv_test::smollm2_gguf().string());
    const rkv::Tokenizer tok = rkv::Tokenizer::from_gguf(*x.model.gguf);
    x.windows = rkv::draw_text_windows(tok, {(rkv_test::austen_dir() / "emma.txt").string()}, g_n, g_p + g_w, 0);
    x.registry = std::make_shared<rkv::PluginRegistry>(rkv::PluginRegistry::discover());
    return x;
  }();
  return s;
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

/// CPU seconds of every thread of this process (CLOCK_PROCESS_CPUTIME_ID).
double cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// Times one iteration: wall time (what the benchmark reports) and process CPU time, keeping the best of each.
struct Timer {
  double wall0 = now(), cpu0 = cpu_now();
  void stop(benchmark::State& state, const std::string& name) {
    const double wall = now() - wall0, cpu = cpu_now() - cpu0;
    state.SetIterationTime(wall);
    state.counters["process_cpu_s"] = cpu;
    if (!g_seconds.count(name) || wall < g_seconds[name]) g_seconds[name] = wall;
    if (!g_cpu.count(name) || cpu < g_cpu[name]) g_cpu[name] = cpu;
  }
};

void BM_plain_prefill(benchmark::State& state) {
  Setup& s = setup();
  rkv::cpu::set_num_threads(g_threads);
  const int64_t L = s.model.config.n_layers, T = g_p + g_w;
  rkv::cpu::Workspace ws;
  rkv::KVCache cache = rkv::cpu::make_cache(s.model, T);
  std::vector<int64_t> positions(static_cast<size_t>(T)), window_rows;
  for (int64_t t = 0; t < T; ++t) positions[static_cast<size_t>(t)] = t;
  for (int64_t t = g_p; t < T; ++t) window_rows.push_back(t);
  for (auto _ : state) {
    Timer timer;
    for (const auto& w : s.windows) {
      for (auto& kv : cache.layers) kv.length = 0;
      std::vector<float> x = rkv::cpu::embed(s.model, w.tokens);
      for (int64_t l = 0; l < L; ++l)
        rkv::cpu::forward_layer(s.model, l, x.data(), T, positions.data(), cache.layers[static_cast<size_t>(l)], ws);
      benchmark::DoNotOptimize(rkv::cpu::final_logits(s.model, x.data(), T, window_rows, ws));
    }
    timer.stop(state, "plain_prefill");
  }
}

void BM_perturbation_kl(benchmark::State& state) {
  Setup& s = setup();
  const rkv::PluginInfo& info = s.registry->resolve("perturbation_kl", RKV_KIND_SIGNAL);
  rkv::ProfileRequest r;
  r.model = &s.model;
  r.signal = rkv::PluginChoice{info.id(), &info, rkv::ParamSet::validate(*info.descriptor, {})};
  r.examples = s.windows;
  r.prefix_tokens = g_p;
  r.window_tokens = g_w;
  r.protect = kProtect;
  r.threads = g_threads;
  r.read_cache = r.write_cache = false;
  for (auto _ : state) {
    Timer timer;
    const rkv::SensitivityProfile p = rkv::compute_profile(r);
    benchmark::DoNotOptimize(p.s.data());
    timer.stop(state, "perturbation_kl");
    state.counters["split_half"] = p.split_half_spearman;
  }
}

void BM_naive(benchmark::State& state) {
  Setup& s = setup();
  rkv::cpu::set_num_threads(g_threads);
  std::vector<std::vector<int32_t>> tokens;
  for (const auto& w : s.windows) tokens.push_back(w.tokens);
  rkv::Profiler prof(s.model, tokens, g_p, g_w, kProtect);
  for (auto _ : state) {
    Timer timer;
    for (int64_t i = 0; i < g_n; ++i) {
      prof.prepare_example(i);
      for (int64_t l = 0; l < prof.n_layers(); ++l) {
        prof.perturb_values(l, 0.02, 0, 0);
        benchmark::DoNotOptimize(prof.window_kl(0).data());  // the window through all L layers
        prof.restore(l);
      }
    }
    timer.stop(state, "naive");
  }
}

BENCHMARK(BM_plain_prefill)->Unit(benchmark::kSecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_perturbation_kl)->Unit(benchmark::kSecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_naive)->Unit(benchmark::kSecond)->UseManualTime()->Iterations(1);

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* flag) { return a.rfind(flag, 0) == 0 ? std::atoll(a.c_str() + std::strlen(flag)) : -1; };
    if (value("--threads=") >= 0) g_threads = static_cast<int>(value("--threads="));
    else if (value("--examples=") >= 0) g_n = value("--examples=");
    else if (value("--prefix=") >= 0) g_p = value("--prefix=");
    else if (value("--window=") >= 0) g_w = value("--window=");
    else rest.push_back(argv[i]);
  }
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  if (!std::filesystem::exists(rkv_test::smollm2_gguf()) || !std::filesystem::exists(rkv_test::austen_dir() / "emma.txt")) {
    std::fprintf(stderr, "bench_profile: needs %s and the Austen texts (scripts/fetch-assets)\n",
                 rkv_test::smollm2_gguf().c_str());
    return 1;
  }
  std::printf("SmolLM2-135M, N %lld, P %lld, n_w %lld, %d threads\n", static_cast<long long>(g_n),
              static_cast<long long>(g_p), static_cast<long long>(g_w), g_threads);
  benchmark::RunSpecifiedBenchmarks();
  if (g_seconds.count("plain_prefill")) {
    const double base = g_seconds["plain_prefill"];
    const double base_cpu = g_cpu["plain_prefill"];
    std::printf("best of the repetitions; wall time, and process CPU time of all threads (steadier on a busy machine)\n");
    std::printf("%-16s %8.2f s wall %8.2f s cpu\n", "plain_prefill", base, base_cpu);
    for (const char* k : {"perturbation_kl", "naive"})
      if (g_seconds.count(k))
        std::printf("%-16s %8.2f s wall %8.2f s cpu  = %.2fx (wall) %.2fx (cpu) plain prefill\n", k, g_seconds[k],
                    g_cpu[k], g_seconds[k] / base, g_cpu[k] / base_cpu);
    if (g_seconds.count("perturbation_kl") && g_seconds.count("naive"))
      std::printf("speedup of the window-only recompute over the naive method: %.2fx (wall) %.2fx (cpu)\n",
                  g_seconds["naive"] / g_seconds["perturbation_kl"], g_cpu["naive"] / g_cpu["perturbation_kl"]);
  }
  benchmark::Shutdown();
  return 0;
}
