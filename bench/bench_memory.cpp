// Memory and speed of one model on the CPU backend: the resident set after loading it and at its peak during a
// prefill of 256 tokens and 8 decode steps, beside the model file's size (with weights kept quantized, RSS
// stays near the GGUF's size instead of ~4-8x it).
//
// Run: build/bin/bench_memory   (RKV_BENCH_MODEL=path.gguf, default the SmolLM2 GGUF of scripts/fetch-assets;
//      RKV_BENCH_WEIGHTS=quantized|f32, default quantized; RKV_BENCH_THREADS=n, default 2)
// An 8B-shaped model: scripts/make-synthetic-gguf.py /tmp/llama8b-q4_0.gguf, then RKV_BENCH_MODEL=/tmp/llama8b-q4_0.gguf.
// Each figure is one process's own: run one benchmark per process (the peak is per process), e.g. with
// --benchmark_filter. Counters: file_MB, rss_loaded_MB (VmRSS after load_model), rss_peak_MB (VmHWM at the end),
// prefill tok/s, decode tok/s.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "backend/cpu/forward.hpp"
#include "backend/cpu/threads.hpp"
#include "model/model.hpp"

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::filesystem::path model_path() {
  const std::filesystem::path cache = env_or("RIPPLEKV_CACHE", env_or("HOME", "/root") + "/.cache/ripplekv");
  return env_or("RKV_BENCH_MODEL", (cache / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf").string());
}

/// A field of /proc/self/status ("VmRSS", "VmHWM") in MB (kB / 1024), or -1 when it cannot be read.
double status_mb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024.0;
  return -1;
}

void BM_PrefillThenDecode(benchmark::State& state) {
  const std::filesystem::path p = model_path();
  if (!std::filesystem::exists(p)) return state.SkipWithError(("missing model " + p.string()).c_str());
  rkv::cpu::set_num_threads(std::atoi(env_or("RKV_BENCH_THREADS", "2").c_str()));
  const rkv::WeightStorage w = env_or("RKV_BENCH_WEIGHTS", "quantized") == "f32" ? rkv::WeightStorage::f32
                                                                                  : rkv::WeightStorage::quantized;
  const rkv::Model m = rkv::load_model(p.string(), w);
  const double loaded = status_mb("VmRSS");
  const int64_t P = state.range(0), steps = state.range(1);
  std::mt19937 rng(1);
  std::vector<int32_t> ids(static_cast<size_t>(P));
  for (auto& t : ids) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(m.config.vocab_size));
  double prefill_s = 0, decode_s = 0;
  for (auto _ : state) {
    rkv::cpu::Workspace ws;
    rkv::KVCache cache = rkv::cpu::make_cache(m, P + steps);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<float> logits = rkv::cpu::prefill(m, ids, 0, cache, ws, rkv::cpu::LogitsFor::Last, 256);
    const auto t1 = std::chrono::steady_clock::now();
    for (int64_t s = 0; s < steps; ++s) logits = rkv::cpu::decode_step(m, 1 + static_cast<int32_t>(s), P + s, cache, ws);
    const auto t2 = std::chrono::steady_clock::now();
    prefill_s += std::chrono::duration<double>(t1 - t0).count();
    decode_s += std::chrono::duration<double>(t2 - t1).count();
    for (float x : logits)
      if (!std::isfinite(x)) return state.SkipWithError("non-finite logits");
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["file_MB"] = static_cast<double>(std::filesystem::file_size(p)) / (1024.0 * 1024.0);
  state.counters["rss_loaded_MB"] = loaded;
  state.counters["rss_peak_MB"] = status_mb("VmHWM");
  state.counters["prefill_tok/s"] = static_cast<double>(P) * n / prefill_s;
  state.counters["decode_tok/s"] = static_cast<double>(steps) * n / decode_s;
}

}  // namespace

BENCHMARK(BM_PrefillThenDecode)->Args({256, 8})->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK_MAIN();
