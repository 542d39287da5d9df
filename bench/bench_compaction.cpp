// Cost of compressing one layer after prefill (statistics + scorer plugin + top-k + compaction) relative to that
// layer's prefill, at T = 2048 with SmolLM2-135M shapes (d_model 576, H 9, H_kv 3, d 64, MLP 1536), on random data.
// Goal: under 5% of the layer's prefill.
//
//   BM_LayerPrefill_Matmuls     q/k/v/o projections (576x576, 576x192 x2, 576x576) and the MLP (576x1536 x2,
//                               1536x576) as sgemms over T rows
//   BM_LayerPrefill_Attention   causal attention of 9 heads the way a blocked forward does it: per block of 64
//                               queries, S = Q K^T over the visible keys, softmax, O = P V
//   BM_Compress/<scorer>        compute_attention_stats (what the scorer asks for) + compress_layer (run the real .so
//                               scorer, select_positions, compact_layer) at budget 20% of T
//   BM_Stats/<scorer>           the statistics part alone
//   BM_H2OFusedAccumulate       H2O's cumulative sums when a forward adds its own softmax rows (accumulator only)
//   BM_BackendPrefill/<what>    the CPU backend's whole prefill (backend/backend.hpp) of a 2-layer synthetic model with
//                               SmolLM2's shapes at T = 2048: plain, and with H2O's cumulative statistics (+ query
//                               counts) fused into the same pass, as a run computes them. Ratio h2o / plain - 1 = what
//                               h2o's statistics cost in the shared prefill (goal < 5%); the argument is the thread
//                               count.
//   BM_ValueOutputNorms         Backend::value_output_norms of one layer of that prefill (||W_o v||_1 [H, T], what
//                               RKV_STAT_VALUE_OUTPUT_NORMS costs per layer; the argument is the thread count).
//                               Ratio 2 x this / BM_BackendPrefill/plain = its cost against a layer's prefill.
//
// Run: OPENBLAS_NUM_THREADS=1 build/bin/bench_compaction (the plugins must be built: they are loaded from
// build/lib/ripplekv/plugins). Ratio = BM_Compress / (Matmuls + Attention).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "cache/attention_stats.hpp"
#include "cache/layer_compression.hpp"
#include "plugin/params.hpp"
#include "plugin/registry.hpp"
#include "plugin/scorer_call.hpp"
#include "model/synthetic_model.hpp"

namespace {

constexpr int64_t kT = 2048, kDModel = 576, kH = 9, kHkv = 3, kD = 64, kFF = 1536;
constexpr int64_t kBudget = kT / 5;

std::vector<float> random_vec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

void sgemm(int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(n), int(k), 1.0f, a, int(k), b, int(n), 0.0f, c,
              int(n));
}

void BM_LayerPrefill_Matmuls(benchmark::State& state) {
  const auto x = random_vec(size_t(kT * kFF), 1);
  const auto w = random_vec(size_t(kDModel * kFF), 2);
  std::vector<float> y(size_t(kT * kFF));
  for (auto _ : state) {
    sgemm(kT, kDModel, kDModel, x.data(), w.data(), y.data());           // q
    sgemm(kT, kHkv * kD, kDModel, x.data(), w.data(), y.data());         // k
    sgemm(kT, kHkv * kD, kDModel, x.data(), w.data(), y.data());         // v
    sgemm(kT, kDModel, kDModel, x.data(), w.data(), y.data());           // o
    sgemm(kT, kFF, kDModel, x.data(), w.data(), y.data());               // gate
    sgemm(kT, kFF, kDModel, x.data(), w.data(), y.data());               // up
    sgemm(kT, kDModel, kFF, x.data(), w.data(), y.data());               // down
    benchmark::DoNotOptimize(y.data());
  }
}
BENCHMARK(BM_LayerPrefill_Matmuls)->Unit(benchmark::kMillisecond);

void BM_LayerPrefill_Attention(benchmark::State& state) {
  const auto q = random_vec(size_t(kH * kT * kD), 3);
  const auto k = random_vec(size_t(kHkv * kT * kD), 4);
  const auto v = random_vec(size_t(kHkv * kT * kD), 5);
  const int64_t block = 64;
  std::vector<float> s(size_t(block * kT)), o(size_t(kH * kT * kD));
  const float scale = 1.0f / std::sqrt(float(kD));
  for (auto _ : state) {
    for (int64_t h = 0; h < kH; ++h) {
      const float* kh = k.data() + (h / 3) * kT * kD;
      const float* vh = v.data() + (h / 3) * kT * kD;
      for (int64_t t0 = 0; t0 < kT; t0 += block) {
        const int64_t cols = t0 + block;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(block), int(cols), int(kD), scale,
                    q.data() + (h * kT + t0) * kD, int(kD), kh, int(kD), 0.0f, s.data(), int(cols));
        for (int64_t r = 0; r < block; ++r) {
          float* row = s.data() + r * cols;
          const int64_t n = t0 + r + 1;
          float m = row[0], z = 0;
          for (int64_t j = 1; j < n; ++j) m = std::max(m, row[j]);
          for (int64_t j = 0; j < n; ++j) z += (row[j] = std::exp(row[j] - m));
          for (int64_t j = 0; j < n; ++j) row[j] /= z;
          std::fill(row + n, row + cols, 0.0f);
        }
        sgemm(block, kD, cols, s.data(), vh, o.data() + (h * kT + t0) * kD);
      }
    }
    benchmark::DoNotOptimize(o.data());
  }
}
BENCHMARK(BM_LayerPrefill_Attention)->Unit(benchmark::kMillisecond);

/// One layer's inputs and a scorer instance, built once per benchmark.
struct Fixture {
  std::vector<float> q;  // [H, T, d]
  rkv::LayerKV kv;
  rkv::HostServices host;
  std::unique_ptr<rkv::PluginInstance> inst;
  rkv::ScorerRequirements req;

  explicit Fixture(const std::string& scorer) {
    q = random_vec(size_t(kH * kT * kD), 6);
    kv.n_kv_heads = kHkv;
    kv.head_dim = kD;
    kv.capacity = kv.length = kT;
    kv.k = random_vec(size_t(kHkv * kT * kD), 7);
    kv.v = random_vec(size_t(kHkv * kT * kD), 8);
    static const rkv::PluginRegistry registry = rkv::PluginRegistry::discover();
    const rkv::PluginInfo& info = registry.resolve(scorer, RKV_KIND_SCORER);
    inst = std::make_unique<rkv::PluginInstance>(
        rkv::PluginInstance::create(info, rkv::ParamSet::validate(*info.descriptor, {}), host));
    req = rkv::query_scorer_requirements(*inst, rkv_attention_shape{sizeof(rkv_attention_shape), 30, kH, kHkv, kD});
  }
  rkv::AttentionStats stats(const rkv::LayerKV& layer) const {
    return rkv::compute_attention_stats(rkv::QueriesView{q.data(), kH, kT, kD},
                                        rkv::KeysView{layer.k.data(), kHkv, kT, kD, layer.capacity * kD},
                                        req.stats_options());
  }
};

void BM_Compress(benchmark::State& state, const char* scorer) {
  Fixture f(scorer);
  size_t bytes_before = 0, bytes_after = 0;
  for (auto _ : state) {
    state.PauseTiming();
    rkv::LayerKV layer = f.kv;
    state.ResumeTiming();
    const rkv::AttentionStats st = f.stats(layer);
    const rkv::LayerCompression r = rkv::compress_layer(*f.inst, f.req, layer, {0, kH, kBudget, -1, &st, nullptr});
    bytes_before = r.compaction.bytes_before;
    bytes_after = r.compaction.bytes_after;
    benchmark::DoNotOptimize(layer.k.data());
  }
  state.counters["kv_bytes_before"] = double(bytes_before);
  state.counters["kv_bytes_after"] = double(bytes_after);
}
BENCHMARK_CAPTURE(BM_Compress, snapkv, "snapkv")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Compress, h2o, "h2o")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Compress, streamingllm, "streamingllm")->Unit(benchmark::kMillisecond);

void BM_Stats(benchmark::State& state, const char* scorer) {
  Fixture f(scorer);
  for (auto _ : state) {
    const rkv::AttentionStats st = f.stats(f.kv);
    benchmark::DoNotOptimize(st.cumulative_attention.data());
  }
}
BENCHMARK_CAPTURE(BM_Stats, snapkv, "snapkv")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Stats, h2o, "h2o")->Unit(benchmark::kMillisecond);

void BM_H2OFusedAccumulate(benchmark::State& state) {
  // One head's softmax rows, added for all 9 heads (what a forward that keeps its probabilities pays extra).
  std::vector<float> p(size_t(kT * kT), 1.0f / float(kT));
  rkv::AttentionStatsOptions opt;
  opt.cumulative_attention = true;
  for (auto _ : state) {
    rkv::AttentionStatsAccumulator acc(kH, kT, kT, opt);
    for (int64_t h = 0; h < kH; ++h) acc.add_rows(h, 0, kT, p.data(), kT);
    const rkv::AttentionStats st = acc.finish();
    benchmark::DoNotOptimize(st.cumulative_attention.data());
  }
}
BENCHMARK(BM_H2OFusedAccumulate)->Unit(benchmark::kMillisecond);

/// A 2-layer synthetic model with SmolLM2's shapes (float32 weights).
const rkv::Model& two_layer_model() {
  static const rkv::Model model = [] {
    rkv::ModelConfig c = rkv::synthetic_config("llama", kH, kHkv, kD, 2);
    c.d_model = kDModel;
    c.d_ff = kFF;
    c.vocab_size = 4096;
    c.context_length = 8192;
    return rkv::synthetic_model(c, 3);
  }();
  return model;
}

std::vector<int32_t> bench_tokens() {
  std::vector<int32_t> tokens(static_cast<size_t>(kT));
  for (int64_t i = 0; i < kT; ++i) tokens[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919) % 4096);
  return tokens;
}

void BM_BackendPrefill(benchmark::State& state, bool h2o) {
  const rkv::Model& model = two_layer_model();
  rkv::BackendOptions o;
  o.threads = static_cast<int>(state.range(0));
  const auto backend = rkv::make_backend("cpu", model, o);
  const std::vector<int32_t> tokens = bench_tokens();
  rkv::PrefillRequest req;
  req.logits = rkv::LogitsFor::None;
  if (h2o) {
    rkv::AttentionStatsOptions o;
    o.cumulative_attention = true;
    o.query_counts = true;
    req.stats.push_back(o);
  }
  for (auto _ : state) {
    const rkv::PrefillResult r = backend->prefill(tokens, req);
    benchmark::DoNotOptimize(r.cache.get());
  }
}
// Argument: CPU threads. Run with --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true on a shared
// machine: the two variants differ by a few percent, less than a noisy VM's drift between runs.
BENCHMARK_CAPTURE(BM_BackendPrefill, plain, false)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(BM_BackendPrefill, h2o_fused, true)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->MinTime(2.0);

void BM_ValueOutputNorms(benchmark::State& state) {
  rkv::BackendOptions o;
  o.threads = static_cast<int>(state.range(0));
  const auto backend = rkv::make_backend("cpu", two_layer_model(), o);
  const rkv::PrefillResult r = backend->prefill(bench_tokens(), {});
  for (auto _ : state) benchmark::DoNotOptimize(backend->value_output_norms(*r.cache, 0).data());
}
BENCHMARK(BM_ValueOutputNorms)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
