// Speed at long context, the shapes of llama-bench (issue 36 steps 2 and 3), quantized weights (model.weights =
// "quantized", the default), random token ids (mt19937(1) % vocab):
//   BM_PrefillLong/T      one prefill of T tokens from an empty cache, the whole prompt in one pass, as
//                         `llama-bench -p T -n 0 -fa on` (its -ub 512 micro-batch is llama.cpp's own scheduling;
//                         ripplekv's blocks of 64 queries are its own). T = 4K, 16K, 32K.
//   BM_DecodeAtDepth/depth/codec
//                         32 tokens decoded one by one after a prompt of `depth` tokens (the prompt's prefill is not
//                         timed), the cache float32 (codec 0) or every layer packed as q8_0 (codec 1, residual 0:
//                         decode's entries are packed as they come, as llama.cpp's -ctk q8_0 -ctv q8_0 cache), with
//                         room for the 32 entries reserved before the timing (llama-bench sizes its cache up front), as
//                         `llama-bench -p 0 -n 32 -d depth -fa on [-ctk q8_0 -ctv q8_0]`. depth = 16K.
// One iteration each: a 32K prefill is minutes on 2 cores.
//
// Run: RKV_BENCH_GGUF=<path> build/bin/bench_long_context [--benchmark_filter=T:4096/]   (default model: Gemma 3 270M
// from scripts/fetch-assets, trained context 32K; RKV_BENCH_THREADS=n, default 2). Counter: tok/s.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>

#include "backend/backend.hpp"
#include "backend/cpu/blas.hpp"
#include "cpu_bench.hpp"
#include "backend/cpu/forward.hpp"
#include "backend/cpu/threads.hpp"
#include "cache/codec.hpp"
#include "model/model.hpp"

namespace {

using rkv_bench::bench_threads;

std::filesystem::path gguf() {
  if (const char* p = std::getenv("RKV_BENCH_GGUF"); p && *p) return p;
  const char* c = std::getenv("RIPPLEKV_CACHE");
  const char* home = std::getenv("HOME");
  const std::filesystem::path cache = c && *c ? std::filesystem::path(c)
                                              : std::filesystem::path(home ? home : "/root") / ".cache" / "ripplekv";
  return cache / "models" / "gemma-3-270m-q4_k_m.gguf";
}

const rkv::Model* model() {
  static std::unique_ptr<rkv::Model> m;
  static bool tried = false;
  if (!tried) {
    tried = true;
    if (std::filesystem::exists(gguf()))
      m = std::make_unique<rkv::Model>(rkv::load_model(gguf().string(), rkv::WeightStorage::quantized));
  }
  return m.get();
}

void BM_PrefillLong(benchmark::State& state) {
  const rkv::Model* m = model();
  if (!m) return state.SkipWithError("model GGUF missing (RKV_BENCH_GGUF, or scripts/fetch-assets for Gemma 3)");
  const int64_t T = state.range(0);
  if (T > m->config.context_length) {
    const std::string why = "T exceeds the model's trained context " + std::to_string(m->config.context_length);
    return state.SkipWithError(why.c_str());
  }
  rkv::cpu::set_num_threads(bench_threads());
  std::mt19937 rng(1);
  std::vector<int32_t> ids(static_cast<size_t>(T));
  for (auto& x : ids) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(m->config.vocab_size));
  rkv::cpu::Workspace ws;
  for (auto _ : state) {
    state.PauseTiming();
    rkv::KVCache cache = rkv::cpu::make_cache(*m, T);  // allocation and zeroing are not the forward's
    state.ResumeTiming();
    benchmark::DoNotOptimize(rkv::cpu::prefill(*m, ids, 0, cache, ws, rkv::cpu::LogitsFor::Last));
  }
  state.SetLabel(gguf().filename().string());
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(T), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_DecodeAtDepth(benchmark::State& state) {
  const rkv::Model* m = model();
  if (!m) return state.SkipWithError("model GGUF missing (RKV_BENCH_GGUF, or scripts/fetch-assets for Gemma 3)");
  const int64_t depth = state.range(0), steps = 32;
  if (depth + steps > m->config.context_length) {
    const std::string why = "depth exceeds the model's trained context " + std::to_string(m->config.context_length);
    return state.SkipWithError(why.c_str());
  }
  rkv::BackendOptions o;
  o.threads = bench_threads();
  const std::unique_ptr<rkv::Backend> backend = rkv::make_backend("cpu", *m, o);
  std::mt19937 rng(1);
  std::vector<int32_t> ids(static_cast<size_t>(depth + steps));
  for (auto& x : ids) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(m->config.vocab_size));
  rkv::PrefillRequest request;
  request.logits = rkv::LogitsFor::None;
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + depth);
  rkv::PrefillResult prefilled = backend->prefill(prompt, request);
  rkv::CodecSpec q8;
  q8.format = rkv::CodecFormat::q8_0;
  if (state.range(1) == 1)
    for (int64_t l = 0; l < m->config.n_layers; ++l) backend->encode_layer(*prefilled.cache, l, q8);
  // Room for the 32 tokens, as llama-bench allocates its cache for depth + n up front: without it the first step
  // would copy the exactly sized float cache (600 MB at 16K on Gemma 3) to grow it, inside the timing.
  backend->reserve(*prefilled.cache, steps);
  for (auto _ : state) {
    for (int64_t t = 0; t < steps; ++t)
      benchmark::DoNotOptimize(backend->extend(*prefilled.cache, {ids[static_cast<size_t>(depth + t)]}, depth + t,
                                               rkv::LogitsFor::Last));
  }
  state.SetLabel(gguf().filename().string() + (state.range(1) == 1 ? " q8_0" : " f32"));
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(steps), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["kv_MB"] = static_cast<double>(prefilled.cache->bytes_in_use()) / 1e6;
}

}  // namespace

BENCHMARK(BM_DecodeAtDepth)->ArgNames({"depth", "codec"})->Args({16384, 0})->Args({16384, 1})
    ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
BENCHMARK(BM_PrefillLong)->ArgName("T")->Arg(4096)->Arg(16384)->Arg(32768)->Unit(benchmark::kMillisecond)
    ->UseRealTime()->Iterations(1);

int main(int argc, char** argv) { return rkv_bench::cpu_bench_main(argc, argv); }
