// Decode speed on a compressed cache (a decode step on a compressed cache reads only the b_l entries each layer keeps).
// SmolLM2-135M with quantized weights (model.weights = "quantized"), the synthetic 2048-token prompt bench_forward
// prefills (ids mt19937(1) % 49152), then every layer compacted to b = round(keep_pct / 100 * 2048) entries per KV head
// with StreamingLLM's selection (4 sinks + the most recent positions; scores = position, cache/selection.hpp,
// cache/compaction.hpp: the cache the runner decodes on after compress_prompt); keep_pct = 100 is the full cache.
//
//   BM_DecodeAtBudget     one decode step (token at position 2048) over b entries in every layer; the lengths are put
//                         back to b after each step, so every step sees the same cache (as bench_forward's BM_Decode)
//   BM_DecodeRunAtBudget  64 tokens decoded one after another from a fresh copy of the compressed prompt's cache (the
//                         copy is not timed; the growth of the exactly sized cache on the first append is)
//   BM_AttentionAtBudget  the attention of one decode step alone (backend/cpu/attention.hpp) over the b + 1 entries of
//                         every layer: what a decode step spends on the cache; the ratio of the keep_pct 100 and 10
//                         times is the ratio of attention times
//
// Run: build/bin/bench_decode_budget [--benchmark_repetitions=3]   (RKV_BENCH_THREADS=n, default 2; needs the
// SmolLM2 GGUF from scripts/fetch-assets). Counters: tok/s, entries (b per KV head per layer).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>

#include "backend/cpu/attention.hpp"
#include "backend/cpu/blas.hpp"
#include "cpu_bench.hpp"
#include "backend/cpu/forward.hpp"
#include "backend/cpu/threads.hpp"
#include "cache/compaction.hpp"
#include "cache/selection.hpp"
#ifndef RKV_TEST_SHARED_DIR
#define RKV_TEST_SHARED_DIR "../shared"  // assets.hpp names it; unused here
#endif
#include "common/assets.hpp"
#include "model/model.hpp"

namespace {

using rkv_bench::bench_threads;

constexpr int64_t kPrompt = 2048;  // prompt length T (llama-bench's decode depth in bench_forward)
constexpr int64_t kSinks = 4;      // StreamingLLM's attention sinks
constexpr int64_t kRunTokens = 64;

/// SmolLM2 with quantized weights and its full 2048-token prompt cache, built at first use; null model when the GGUF
/// is missing.
struct Prompt {
  std::unique_ptr<rkv::Model> model;
  rkv::KVCache full;
};

const Prompt& prompt() {
  static Prompt p = [] {
    Prompt x;
    const auto path = rkv_test::smollm2_gguf();
    if (!std::filesystem::exists(path)) return x;
    x.model = std::make_unique<rkv::Model>(rkv::load_model(path.string(), rkv::WeightStorage::quantized));
    std::mt19937 rng(1);
    std::vector<int32_t> ids(static_cast<size_t>(kPrompt));
    for (auto& t : ids) t = static_cast<int32_t>(rng() % 49152);
    rkv::cpu::set_num_threads(bench_threads());
    rkv::cpu::Workspace ws;
    x.full = rkv::cpu::make_cache(*x.model, kPrompt);
    rkv::cpu::prefill(*x.model, ids, 0, x.full, ws, rkv::cpu::LogitsFor::None);
    return x;
  }();
  return p;
}

/// b = round(keep_pct / 100 * T) entries per KV head.
int64_t budget_of(int64_t keep_pct) { return std::llround(static_cast<double>(keep_pct) * kPrompt / 100.0); }

/// A copy of the full prompt cache with every layer compacted to `budget` entries per KV head: the 4 sinks and the
/// budget - 4 most recent positions (StreamingLLM: score = position, protected sinks first). budget >= T copies.
rkv::KVCache compressed_cache(const Prompt& p, int64_t budget) {
  rkv::KVCache cache = p.full;
  if (budget >= kPrompt) return cache;
  const int64_t Hkv = p.model->config.n_kv_heads;
  std::vector<float> scores(static_cast<size_t>(Hkv * kPrompt));
  for (int64_t h = 0; h < Hkv; ++h)
    for (int64_t t = 0; t < kPrompt; ++t) scores[static_cast<size_t>(h * kPrompt + t)] = static_cast<float>(t);
  for (size_t l = 0; l < cache.layers.size(); ++l) {
    const rkv::Selection sel = rkv::select_positions(scores.data(), Hkv, kPrompt, budget, rkv::ProtectedSpec{kSinks, 0},
                                                     static_cast<int64_t>(l));
    rkv::compact_layer(cache.layers[l], sel);
  }
  return cache;
}

void count(benchmark::State& state, int64_t tokens_per_iter, int64_t budget) {
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(tokens_per_iter),
                                               benchmark::Counter::kIsIterationInvariantRate);
  state.counters["entries"] = static_cast<double>(std::min(budget, kPrompt));
}

void BM_DecodeAtBudget(benchmark::State& state) {
  const Prompt& p = prompt();
  if (!p.model) return state.SkipWithError("SmolLM2 GGUF missing; run scripts/fetch-assets");
  rkv::cpu::set_num_threads(bench_threads());
  const int64_t b = std::min(budget_of(state.range(0)), kPrompt);
  rkv::KVCache cache = compressed_cache(p, b);
  rkv::cpu::Workspace ws;
  auto step = [&] {
    benchmark::DoNotOptimize(rkv::cpu::decode_step(*p.model, 42, kPrompt, cache, ws));
    for (auto& l : cache.layers) l.length = b;  // every step sees exactly the b prompt entries
  };
  step();  // warm-up: grows the exactly sized cache and the workspace once
  for (auto _ : state) step();
  count(state, 1, b);
}

void BM_DecodeRunAtBudget(benchmark::State& state) {
  const Prompt& p = prompt();
  if (!p.model) return state.SkipWithError("SmolLM2 GGUF missing; run scripts/fetch-assets");
  rkv::cpu::set_num_threads(bench_threads());
  const int64_t b = std::min(budget_of(state.range(0)), kPrompt);
  const rkv::KVCache compressed = compressed_cache(p, b);
  rkv::cpu::Workspace ws;
  {  // warm-up of the workspace
    rkv::KVCache cache = compressed;
    rkv::cpu::decode_step(*p.model, 42, kPrompt, cache, ws);
  }
  for (auto _ : state) {
    state.PauseTiming();
    rkv::KVCache cache = compressed;
    state.ResumeTiming();
    int32_t token = 42;
    for (int64_t t = 0; t < kRunTokens; ++t) {
      const std::vector<float> logits = rkv::cpu::decode_step(*p.model, token, kPrompt + t, cache, ws);
      token = static_cast<int32_t>((token * 31 + t) % 49152);  // a fixed token stream: no argmax in the timing
      benchmark::DoNotOptimize(logits.data());
    }
  }
  count(state, kRunTokens, b);
}

void BM_AttentionAtBudget(benchmark::State& state) {
  const Prompt& p = prompt();
  if (!p.model) return state.SkipWithError("SmolLM2 GGUF missing; run scripts/fetch-assets");
  rkv::cpu::set_num_threads(bench_threads());
  const rkv::ModelConfig& c = p.model->config;
  const int64_t b = std::min(budget_of(state.range(0)), kPrompt);
  rkv::KVCache cache = compressed_cache(p, b);
  for (auto& l : cache.layers) {  // the decode step's own entry appended (zeros: the values do not change the work)
    rkv::reserve_extra(l, 1);
    l.length += 1;
  }
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> qg(static_cast<size_t>(c.n_heads * c.head_dim)), out(qg.size());
  for (float& q : qg) q = normal(rng);
  rkv::cpu::Workspace ws;
  auto attend_all_layers = [&] {
    for (const rkv::LayerKV& l : cache.layers) rkv::cpu::attention(c, qg.data(), 1, l, {}, out.data(), ws, nullptr);
    benchmark::DoNotOptimize(out.data());
  };
  attend_all_layers();  // warm-up: sizes the workspace
  for (auto _ : state) attend_all_layers();
  count(state, 1, b);
}

}  // namespace

BENCHMARK(BM_DecodeAtBudget)->Arg(100)->Arg(10)->ArgName("keep_pct")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_DecodeRunAtBudget)->Arg(100)->Arg(10)->ArgName("keep_pct")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AttentionAtBudget)->Arg(100)->Arg(10)->ArgName("keep_pct")->Unit(benchmark::kMicrosecond)->UseRealTime();

int main(int argc, char** argv) { return rkv_bench::cpu_bench_main(argc, argv); }
