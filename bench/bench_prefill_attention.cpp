// The attention of a one-shot prefill at long T (backend/cpu/attention.hpp) -- the part of a prefill whose cost is
// quadratic in T -- on the geometries of SmolLM2-135M (9 query heads, 3 KV heads, head dim 64) and
// Qwen2.5-Coder-1.5B (12 / 2, head dim 128): T new rows over the T entries they appended, causal, no observer (what
// a plain prefill, llama-bench -p T, runs). Work: H T^2 d multiply-adds for Q K^T and as many for P V (causal half of
// 2 H T^2 d each); the counter flop/s counts 2 H T (T + 1) d flops.
//
// Run: build/bin/bench_prefill_attention [--benchmark_repetitions=3]   (RKV_BENCH_THREADS=n, default 2). No asset.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/attention.hpp"
#include "backend/cpu/blas.hpp"
#include "cpu_bench.hpp"
#include "backend/cpu/threads.hpp"
#include "model/synthetic_model.hpp"

namespace {

using rkv_bench::bench_threads;

/// Args: model (0: SmolLM2 geometry, 1: Qwen2.5-1.5B geometry), T.
void BM_PrefillAttention(benchmark::State& state) {
  const bool qwen = state.range(0) == 1;
  const int64_t T = state.range(1);
  const int64_t H = qwen ? 12 : 9, Hkv = qwen ? 2 : 3, d = qwen ? 128 : 64;
  rkv::cpu::set_num_threads(bench_threads());
  const rkv::ModelConfig c = rkv::synthetic_config("llama", H, Hkv, d, 1);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  rkv::LayerKV kv = rkv::build_exact_layer(Hkv, d, T, {}, true);
  for (float& x : kv.k) x = normal(rng);
  for (float& x : kv.v) x = normal(rng);
  for (int64_t h = 0; h < Hkv; ++h)
    for (int64_t i = 0; i < T; ++i) *kv.pos_at(h, i) = static_cast<int32_t>(i);
  std::vector<float> qg(static_cast<size_t>(T * H * d)), out(qg.size());
  for (float& q : qg) q = normal(rng);
  rkv::cpu::Workspace ws;
  for (auto _ : state) {
    rkv::cpu::attention(c, qg.data(), T, kv, {}, out.data(), ws, nullptr);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(qwen ? "qwen2.5-1.5b" : "smollm2-135m");
  state.counters["flop/s"] = benchmark::Counter(2.0 * static_cast<double>(H * T * (T + 1) * d),
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.counters["scratch_MB"] = static_cast<double>(ws.scores.capacity() * sizeof(float)) / 1e6;
}

}  // namespace

BENCHMARK(BM_PrefillAttention)->ArgsProduct({{0, 1}, {4096, 16384}})->ArgNames({"model", "T"})
    ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

int main(int argc, char** argv) { return rkv_bench::cpu_bench_main(argc, argv); }
