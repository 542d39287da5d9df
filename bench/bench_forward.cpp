// Speed of the CPU forward on SmolLM2-135M (2 threads), with the weights kept quantized (`/f32:0`, model.weights =
// "quantized", the default) and dequantized at load (`/f32:1`): the shapes of `llama-bench -p 512,2048 -n 128` --
// prefill tokens/s at 512 and 2048 tokens (BM_Prefill), 128 tokens decoded one by one from an empty context
// (BM_DecodeRun) -- and decode tokens/s at depth 2048 (BM_Decode); beside them the time the same matrix products take
// as plain OpenBLAS sgemm/sgemv calls on the f32 weights (the ceiling of the f32 design).
//
// Run: build/bin/bench_forward [--benchmark_filter=...]   (RKV_BENCH_THREADS=n to change the thread count)   (needs the SmolLM2 GGUF from scripts/fetch-assets)
// Counters: tok/s (tokens per second), GFLOP/s (matrix-product flops per second).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>

#include "backend/cpu/blas.hpp"
#include "cpu_bench.hpp"
#include "backend/cpu/forward.hpp"
#include "backend/cpu/threads.hpp"
#include "model/model.hpp"

namespace {

using rkv_bench::bench_threads;

constexpr int64_t kQueryBlock = 64;  // as backend/cpu/attention.cpp

/// <cache>/models/SmolLM2-135M-Instruct.Q4_1.gguf, cache = $RIPPLEKV_CACHE or ~/.cache/ripplekv (as tests/common/assets.hpp).
std::filesystem::path smollm2_gguf() {
  const char* c = std::getenv("RIPPLEKV_CACHE");
  const char* home = std::getenv("HOME");
  const std::filesystem::path cache = c && *c ? std::filesystem::path(c)
                                              : std::filesystem::path(home ? home : "/root") / ".cache" / "ripplekv";
  return cache / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf";
}

/// The model with f32 weights (f32 = true) or quantized ones; loaded at first use, null when the file is missing.
const rkv::Model* model(bool f32 = true) {
  static std::unique_ptr<rkv::Model> m[2];
  static bool tried[2] = {false, false};
  if (!tried[f32]) {
    tried[f32] = true;
    const auto p = smollm2_gguf();
    const rkv::WeightStorage w = f32 ? rkv::WeightStorage::f32 : rkv::WeightStorage::quantized;
    if (std::filesystem::exists(p)) m[f32] = std::make_unique<rkv::Model>(rkv::load_model(p.string(), w));
  }
  return m[f32].get();
}

std::vector<int32_t> tokens(int64_t n) {
  std::mt19937 rng(1);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng() % 49152);
  return t;
}

/// Flops of the matrix products of one forward over n new tokens with `ctx` cache entries before them.
double forward_flops(const rkv::ModelConfig& c, int64_t n, int64_t ctx, bool lm_head_last_only) {
  const double D = c.d_model, Hd = c.n_heads * c.head_dim, Kd = c.n_kv_heads * c.head_dim, F = c.d_ff;
  double per_layer = 2.0 * n * (D * Hd + 2 * D * Kd + Hd * D + 3 * D * F);
  for (int64_t i0 = 0; i0 < n; i0 += kQueryBlock) {  // blocked causal attention: scores and P.V
    const double M = static_cast<double>(std::min(n, i0 + kQueryBlock) - i0) * c.group_size();
    const double N = static_cast<double>(ctx + std::min(n, i0 + kQueryBlock));
    per_layer += c.n_kv_heads * 2.0 * (2.0 * M * N * c.head_dim);
  }
  const double head = 2.0 * (lm_head_last_only ? 1 : n) * D * c.vocab_size;
  return c.n_layers * per_layer + head;
}

void report(benchmark::State& state, int64_t tokens_per_iter, double flops_per_iter) {
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(tokens_per_iter), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] = benchmark::Counter(flops_per_iter / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Prefill(benchmark::State& state) {
  const rkv::Model* m = model(state.range(1) != 0);
  if (!m) return state.SkipWithError("SmolLM2 GGUF missing; run scripts/fetch-assets");
  rkv::cpu::set_num_threads(bench_threads());
  const int64_t n = state.range(0);
  const auto ids = tokens(n);
  rkv::cpu::Workspace ws;
  {  // warm-up: sizes the workspace (its first use would otherwise be timed with its page faults)
    rkv::KVCache cache = rkv::cpu::make_cache(*m, n);
    rkv::cpu::prefill(*m, ids, 0, cache, ws, rkv::cpu::LogitsFor::Last);
  }
  for (auto _ : state) {
    state.PauseTiming();  // the cache allocation (94 MB zeroed at 2048 tokens) is not part of the forward
    rkv::KVCache cache = rkv::cpu::make_cache(*m, n);
    state.ResumeTiming();
    benchmark::DoNotOptimize(rkv::cpu::prefill(*m, ids, 0, cache, ws, rkv::cpu::LogitsFor::Last));
  }
  report(state, n, forward_flops(m->config, n, 0, true));
}

void BM_Decode(benchmark::State& state) {
  const rkv::Model* m = model(state.range(1) != 0);
  if (!m) return state.SkipWithError("SmolLM2 GGUF missing; run scripts/fetch-assets");
  rkv::cpu::set_num_threads(bench_threads());
  const int64_t ctx = state.range(0);
  rkv::cpu::Workspace ws;
  rkv::KVCache cache = rkv::cpu::make_cache(*m, ctx + 1);
  rkv::cpu::prefill(*m, tokens(ctx), 0, cache, ws, rkv::cpu::LogitsFor::None);
  for (auto _ : state) {
    benchmark::DoNotOptimize(rkv::cpu::decode_step(*m, 42, ctx, cache, ws));
    for (auto& l : cache.layers) l.length = ctx;  // every step sees exactly ctx earlier entries
  }
  report(state, 1, forward_flops(m->config, 1, ctx, true));
}

/// llama-bench's `-n 128`: 128 tokens decoded one after the other from an empty cache (the context grows 0..127).
void BM_DecodeRun(benchmark::State& state) {
  const rkv::Model* m = model(state.range(1) != 0);
  if (!m) return state.SkipWithError("SmolLM2 GGUF missing; run scripts/fetch-assets");
  rkv::cpu::set_num_threads(bench_threads());
  const int64_t n = state.range(0);
  const auto ids = tokens(n);
  rkv::cpu::Workspace ws;
  rkv::KVCache cache = rkv::cpu::make_cache(*m, n);
  for (auto _ : state) {
    for (auto& l : cache.layers) l.length = 0;
    for (auto& l : cache.layers)
      for (int64_t& len : l.head_lengths) len = 0;
    for (int64_t t = 0; t < n; ++t)
      benchmark::DoNotOptimize(rkv::cpu::decode_step(*m, ids[static_cast<size_t>(t)], t, cache, ws));
  }
  report(state, n, forward_flops(m->config, n, 0, false));  // the flops of a causal prefill of n tokens
}

/// The matrix products of one forward (n new tokens, ctx earlier entries) as bare BLAS calls on the same shapes.
void products(const rkv::Model& m, int64_t n, int64_t ctx, std::vector<float>& a, std::vector<float>& b,
              std::vector<float>& out) {
  const auto& c = m.config;
  const int64_t D = c.d_model, Hd = c.n_heads * c.head_dim, Kd = c.n_kv_heads * c.head_dim, F = c.d_ff,
                G = c.group_size(), d = c.head_dim;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const auto& w = m.layers[static_cast<size_t>(l)];
    rkv::cpu::linear(a.data(), n, D, w.wq.data(), Hd, out.data());
    rkv::cpu::linear(a.data(), n, D, w.wk.data(), Kd, out.data());
    rkv::cpu::linear(a.data(), n, D, w.wv.data(), Kd, out.data());
    for (int64_t g = 0; g < c.n_kv_heads; ++g) {
      for (int64_t i0 = 0; i0 < n; i0 += kQueryBlock) {
        const int64_t M = (std::min(n, i0 + kQueryBlock) - i0) * G, N = ctx + std::min(n, i0 + kQueryBlock);
        rkv::cpu::gemm_nt(M, N, d, 1.0f, a.data(), d, b.data(), d, 0.0f, out.data(), N);
        rkv::cpu::gemm_nn(M, d, N, 1.0f, out.data(), N, b.data(), d, 0.0f, a.data() + M * N, d);
      }
    }
    rkv::cpu::linear(a.data(), n, Hd, w.wo.data(), D, out.data());
    rkv::cpu::linear(a.data(), n, D, w.w_gate.data(), F, out.data());
    rkv::cpu::linear(a.data(), n, D, w.w_up.data(), F, out.data());
    rkv::cpu::linear(a.data(), n, F, w.w_down.data(), D, out.data());
  }
  rkv::cpu::linear(a.data(), 1, D, m.lm_head_weights(), c.vocab_size, out.data());
}

void BM_BlasCeiling(benchmark::State& state) {
  const rkv::Model* m = model();
  if (!m) return state.SkipWithError("SmolLM2 GGUF missing; run scripts/fetch-assets");
  rkv::cpu::set_num_threads(bench_threads());
  const int64_t n = state.range(0), ctx = state.range(1);
  const int64_t big = std::max<int64_t>(n, 1) * (ctx + n) * m->config.group_size() * 2 + 8 * 1024 * 1024;
  std::vector<float> a(static_cast<size_t>(big), 0.01f), b(static_cast<size_t>((ctx + n) * 64 + 1024), 0.02f),
      out(static_cast<size_t>(big), 0.0f);
  products(*m, n, ctx, a, b, out);  // warm-up
  for (auto _ : state) {
    products(*m, n, ctx, a, b, out);
    benchmark::ClobberMemory();
  }
  report(state, n, forward_flops(m->config, n, ctx, true));
}

}  // namespace

BENCHMARK(BM_Prefill)->ArgsProduct({{512, 2048}, {0, 1}})->ArgNames({"n", "f32"})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_DecodeRun)->ArgsProduct({{128}, {0, 1}})->ArgNames({"n", "f32"})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Decode)->ArgsProduct({{2048}, {0, 1}})->ArgNames({"depth", "f32"})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_BlasCeiling)->Args({512, 0})->Args({2048, 0})->Args({1, 2048})->Unit(benchmark::kMillisecond)->UseRealTime();
int main(int argc, char** argv) { return rkv_bench::cpu_bench_main(argc, argv); }
