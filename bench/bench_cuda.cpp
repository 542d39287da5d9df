// CUDA backend benchmarks: prefill and decode speed, decode step time against the memory-bandwidth bound,
// and peak device memory with the full and the compressed cache, on synthetic models (random weights, generated on the
// device) with SmolLM2-135M's shapes and with Llama-3.1-8B's shapes, in BF16.
//
// For each model and context length T (default 8192 and 32768), in this order:
//   prefill/<model>/T            T prompt tokens from an empty cache (chunks of 8192): tokens/s, peak memory
//   decode_full/<model>/T        `decode_steps` single-token steps on the full cache (token in, logits out, timed
//                                end to end with CUDA events): tokens/s, ms per step, the bandwidth bound, peak memory
//   decode_compressed/<model>/T  the same after compressing every layer to `budget` * T positions (device top-k on
//                                random scores, device compaction: the cache is reallocated at its compressed size);
//                                compress_ms = the selection and compaction of all layers
//   profile/<model>/T            the perturbation-KL profile of one calibration example of T tokens (prefix T - 32,
//                                window 32; DeviceProfiler): prepare_example, then per layer perturb (alpha 0.02),
//                                window_kl from that layer, restore. over_prefill = its time / prefill/<model>/T's
//                                (docs/ARCHITECTURE.md "perturbation_kl" work floor: about 1 + the window reruns)
// The bandwidth bound of one decode step = (bytes of all weights + bytes of the K and V cache read) / the bandwidth
// a device-to-device copy reaches on the same GPU (read + write bytes / time).
//
// Flags (after Google Benchmark's own): --models=smollm2,llama8b  --contexts=8192,32768  --decode_steps=32
// --budget=0.1. Without a CUDA device (or without the CUDA backend) the program says so and exits 0.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#if RKV_HAVE_CUDA

#include <map>
#include <memory>

#include "backend/cuda/compression.hpp"
#include "backend/cuda/forward.hpp"
#include "backend/cuda/profiler.hpp"
#include "model/model.hpp"

namespace {

namespace rc = rkv::cuda;

struct Options {
  std::vector<std::string> models = {"smollm2", "llama8b"};
  std::vector<int64_t> contexts = {8192, 32768};
  int64_t decode_steps = 32;
  double budget = 0.1;
};

rkv::ModelConfig model_config(const std::string& name) {
  rkv::ModelConfig c;
  c.architecture = "llama";
  if (name == "smollm2") {  // SmolLM2-135M
    c.n_layers = 30;
    c.d_model = 576;
    c.n_heads = 9;
    c.n_kv_heads = 3;
    c.head_dim = 64;
    c.d_ff = 1536;
    c.vocab_size = 49152;
    c.rope_theta = 100000.0;
    c.tied_embeddings = true;
  } else if (name == "llama8b") {  // Llama-3.1-8B
    c.n_layers = 32;
    c.d_model = 4096;
    c.n_heads = 32;
    c.n_kv_heads = 8;
    c.head_dim = 128;
    c.d_ff = 14336;
    c.vocab_size = 128256;
    c.rope_theta = 500000.0;
    c.rope_scaling.type = "llama3";
    c.rope_scaling.factor = 8.0;
    c.rope_scaling.low_freq_factor = 1.0;
    c.rope_scaling.high_freq_factor = 4.0;
    c.rope_scaling.original_context_length = 8192.0;
    c.tied_embeddings = false;
  } else {
    std::fprintf(stderr, "bench_cuda: unknown model '%s' (expected smollm2 or llama8b)\n", name.c_str());
    std::exit(2);
  }
  c.context_length = 131072;
  c.rms_eps = 1e-5f;
  return c;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

/// Device-to-device copy bandwidth in bytes/s (read + write), best of 5 copies of 1 GiB.
double measure_bandwidth(rc::Context& ctx) {
  const size_t bytes = size_t(1) << 30;
  rc::DeviceBuffer a(ctx, bytes), b(ctx, bytes);
  RKV_CUDA_CHECK(cudaMemsetAsync(a.data(), 1, bytes, ctx.stream()));
  cudaEvent_t e0, e1;
  RKV_CUDA_CHECK(cudaEventCreate(&e0));
  RKV_CUDA_CHECK(cudaEventCreate(&e1));
  double best = 0.0;
  for (int i = 0; i < 5; ++i) {
    RKV_CUDA_CHECK(cudaEventRecord(e0, ctx.stream()));
    RKV_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, ctx.stream()));
    RKV_CUDA_CHECK(cudaEventRecord(e1, ctx.stream()));
    RKV_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0.0f;
    RKV_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    best = std::max(best, 2.0 * static_cast<double>(bytes) / (ms * 1e-3));
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return best;
}

/// Times work queued on the context's stream with CUDA events.
class StreamTimer {
 public:
  explicit StreamTimer(rc::Context& ctx) : ctx_(ctx) {
    RKV_CUDA_CHECK(cudaEventCreate(&a_));
    RKV_CUDA_CHECK(cudaEventCreate(&b_));
  }
  ~StreamTimer() {
    cudaEventDestroy(a_);
    cudaEventDestroy(b_);
  }
  void start() { RKV_CUDA_CHECK(cudaEventRecord(a_, ctx_.stream())); }
  /// Seconds since start() once the stream has passed this point.
  double stop() {
    RKV_CUDA_CHECK(cudaEventRecord(b_, ctx_.stream()));
    RKV_CUDA_CHECK(cudaEventSynchronize(b_));
    float ms = 0.0f;
    RKV_CUDA_CHECK(cudaEventElapsedTime(&ms, a_, b_));
    return ms * 1e-3;
  }

 private:
  rc::Context& ctx_;
  cudaEvent_t a_, b_;
};

/// State shared by the three benchmarks of one (model, T): the model, and the cache the prefill leaves behind.
struct Scenario {
  std::string model_name;
  int64_t T = 0;
  std::unique_ptr<rc::DeviceModel> model;
  std::unique_ptr<rc::DeviceWorkspace> ws;
  rc::DeviceKVCache cache;
  bool prefilled = false;
};

Options g_opt;
std::map<std::string, double> g_prefill_seconds;  ///< per "<model>/T", from BM_Prefill
std::unique_ptr<rc::Context> g_ctx;
double g_bandwidth = 0.0;
std::unique_ptr<Scenario> g_scn;

/// The scenario for (model, T): reuses the current model when only T changes.
Scenario& scenario(const std::string& model_name, int64_t T) {
  if (!g_scn || g_scn->model_name != model_name) {
    g_scn.reset();  // frees the previous model first
    g_scn = std::make_unique<Scenario>();
    g_scn->model_name = model_name;
    g_scn->model = std::make_unique<rc::DeviceModel>(
        rc::DeviceModel::random(*g_ctx, model_config(model_name), rc::Precision::BF16, 1));
  }
  if (g_scn->T != T) {
    g_scn->cache = rc::DeviceKVCache();
    g_scn->ws.reset();
    g_scn->prefilled = false;
    g_scn->T = T;
  }
  if (!g_scn->ws) g_scn->ws = std::make_unique<rc::DeviceWorkspace>(*g_ctx);
  return *g_scn;
}

std::vector<int32_t> prompt_tokens(int64_t n, int64_t vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  uint64_t s = 0x9E3779B97F4A7C15ull;
  for (auto& x : t) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(vocab));
  }
  return t;
}

/// Bytes one decode step reads at least: every weight once plus the K and V rows of every layer.
double step_bytes(const rc::DeviceModel& m, const rc::DeviceKVCache& cache) {
  double b = static_cast<double>(m.weight_bytes());
  for (const auto& l : cache.layers)
    b += 2.0 * static_cast<double>(l.n_kv_heads * l.length * l.head_dim) * static_cast<double>(l.elem_bytes());
  return b;
}

void set_memory_counters(benchmark::State& state, const rc::PhaseMemory& p) {
  state.counters["peak_GiB"] = static_cast<double>(p.peak_bytes) / kGiB;
  state.counters["device_used_GiB"] = static_cast<double>(p.device_used_bytes) / kGiB;
}

void BM_Prefill(benchmark::State& state, const std::string& model_name, int64_t T) {
  Scenario& sc = scenario(model_name, T);
  const rkv::ModelConfig& c = sc.model->config();
  const std::vector<int32_t> tokens = prompt_tokens(T, c.vocab_size);
  StreamTimer timer(*g_ctx);
  double seconds = 0.0;
  for (auto _ : state) {
    sc.cache = rc::DeviceKVCache();
    g_ctx->begin_phase("prefill");
    sc.cache = rc::make_cache(*sc.model, T + g_opt.decode_steps);
    timer.start();
    rc::prefill(*sc.model, tokens, 0, sc.cache, *sc.ws, rc::LogitsFor::Last, 8192);
    seconds = timer.stop();
    state.SetIterationTime(seconds);
    set_memory_counters(state, g_ctx->end_phase());
  }
  sc.prefilled = true;
  g_prefill_seconds[model_name + "/" + std::to_string(T)] = seconds;
  state.counters["tokens_per_s"] = static_cast<double>(T) / seconds;
  state.counters["cache_GiB"] = static_cast<double>(sc.cache.bytes()) / kGiB;
  state.counters["weights_GiB"] = static_cast<double>(sc.model->weight_bytes()) / kGiB;
}

/// Decode steps on the scenario's cache (full or compressed), each timed end to end.
void run_decode(benchmark::State& state, Scenario& sc, const char* phase) {
  const rkv::ModelConfig& c = sc.model->config();
  StreamTimer timer(*g_ctx);
  int64_t pos = sc.T;
  const double bytes = step_bytes(*sc.model, sc.cache);
  g_ctx->begin_phase(phase);
  double total = 0.0;
  for (auto _ : state) {
    timer.start();
    const std::vector<float> logits = rc::decode_step(*sc.model, static_cast<int32_t>(pos % c.vocab_size), pos, sc.cache,
                                                      *sc.ws);
    const double s = timer.stop();
    benchmark::DoNotOptimize(logits.data());
    state.SetIterationTime(s);
    total += s;
    ++pos;
  }
  set_memory_counters(state, g_ctx->end_phase());
  const double step = total / static_cast<double>(state.iterations());
  state.counters["tokens_per_s"] = 1.0 / step;
  state.counters["step_ms"] = step * 1e3;
  state.counters["bw_bound_ms"] = bytes / g_bandwidth * 1e3;
  state.counters["bw_efficiency"] = bytes / g_bandwidth / step;
  state.counters["cache_GiB"] = static_cast<double>(sc.cache.bytes()) / kGiB;
}

void BM_DecodeFull(benchmark::State& state, const std::string& model_name, int64_t T) {
  Scenario& sc = scenario(model_name, T);
  if (!sc.prefilled) {
    state.SkipWithError("needs the prefill benchmark of the same model and context first");
    return;
  }
  for (auto& l : sc.cache.layers) l.length = T;
  run_decode(state, sc, "decode_full");
}

void BM_DecodeCompressed(benchmark::State& state, const std::string& model_name, int64_t T) {
  Scenario& sc = scenario(model_name, T);
  if (!sc.prefilled) {
    state.SkipWithError("needs the prefill benchmark of the same model and context first");
    return;
  }
  const rkv::ModelConfig& c = sc.model->config();
  const int64_t budget = std::max<int64_t>(1, static_cast<int64_t>(g_opt.budget * static_cast<double>(T) + 0.5));
  double compress_seconds = 0.0;
  {
    // Random scores on the device, top-k with 4 sinks and a recent window of 32, compaction to [H_kv, b, d].
    rc::DeviceBuffer scores(*g_ctx, static_cast<size_t>(c.n_kv_heads * T) * sizeof(float));
    StreamTimer timer(*g_ctx);
    for (int64_t l = 0; l < c.n_layers; ++l) {
      rc::DeviceLayerKV& kv = sc.cache.layers[static_cast<size_t>(l)];
      kv.length = T;  // drop the tokens the full-cache decode appended
      RKV_CUDA_CHECK(rc::kernels::fill_uniform(rc::DType::F32, scores.data(), c.n_kv_heads * T, 1.0f, 0.0f,
                                               static_cast<uint64_t>(l), g_ctx->stream()));
      timer.start();
      const rkv::Selection sel =
          rc::select_positions(*g_ctx, scores.as<float>(), c.n_kv_heads, T, budget, rkv::ProtectedSpec{4, 32}, l);
      rc::compact_layer(*g_ctx, kv, sel);
      compress_seconds += timer.stop();
      rc::reserve_layer(*g_ctx, kv, budget + g_opt.decode_steps);  // decode room, as a runner would reserve
    }
  }
  sc.T = T;
  run_decode(state, sc, "decode_compressed");
  sc.prefilled = false;  // the full cache is gone
  state.counters["budget_positions"] = static_cast<double>(budget);
  state.counters["compress_ms"] = compress_seconds * 1e3;
}

void BM_Profile(benchmark::State& state, const std::string& model_name, int64_t T) {
  Scenario& sc = scenario(model_name, T);
  sc.cache = rc::DeviceKVCache();  // the profiler holds its own prefix cache
  sc.prefilled = false;
  const rkv::ModelConfig& c = sc.model->config();
  const int64_t n_w = 32, P = T - n_w;
  const std::vector<int32_t> tokens = prompt_tokens(T, c.vocab_size);
  StreamTimer timer(*g_ctx);
  double seconds = 0.0;
  for (auto _ : state) {
    g_ctx->begin_phase("profile");
    rc::DeviceProfiler prof(*sc.model, P, n_w, rkv::ProtectedSpec{4, 32});
    timer.start();
    prof.prepare_example(0, tokens);
    double kl = 0.0;
    for (int64_t l = 0; l < c.n_layers; ++l) {
      prof.perturb_values(l, 0.02, 0, 0);
      for (double v : prof.window_kl(l)) kl += v;
      prof.restore(l);
    }
    seconds = timer.stop();
    benchmark::DoNotOptimize(kl);
    state.SetIterationTime(seconds);
    set_memory_counters(state, g_ctx->end_phase());
  }
  state.counters["profile_s"] = seconds;
  const auto it = g_prefill_seconds.find(model_name + "/" + std::to_string(T));
  if (it != g_prefill_seconds.end()) state.counters["over_prefill"] = seconds / it->second;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= s.size()) {
    const size_t e = s.find(',', b);
    const std::string item = s.substr(b, e == std::string::npos ? std::string::npos : e - b);
    if (!item.empty()) out.push_back(item);
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return out;
}

void parse_flags(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* key) -> const char* {
      const size_t n = std::strlen(key);
      return a.compare(0, n, key) == 0 ? argv[i] + n : nullptr;
    };
    if (const char* v = value("--models=")) {
      g_opt.models = split(v);
    } else if (const char* v2 = value("--contexts=")) {
      g_opt.contexts.clear();
      for (const std::string& x : split(v2)) g_opt.contexts.push_back(std::atoll(x.c_str()));
    } else if (const char* v3 = value("--decode_steps=")) {
      g_opt.decode_steps = std::atoll(v3);
    } else if (const char* v4 = value("--budget=")) {
      g_opt.budget = std::atof(v4);
    } else {
      std::fprintf(stderr,
                   "bench_cuda: unknown flag '%s' (own flags: --models=smollm2,llama8b --contexts=8192,32768 "
                   "--decode_steps=32 --budget=0.1)\n",
                   a.c_str());
      std::exit(2);
    }
  }
  for (const auto& m : g_opt.models) (void)model_config(m);
  if (g_opt.decode_steps < 1 || g_opt.budget <= 0.0 || g_opt.budget > 1.0 || g_opt.contexts.empty()) {
    std::fprintf(stderr, "bench_cuda: need --decode_steps >= 1, 0 < --budget <= 1 and at least one context\n");
    std::exit(2);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (rc::device_count() == 0) {
    std::printf("bench_cuda: no CUDA device (%s); skipping\n", rc::device_unavailable_reason().c_str());
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  parse_flags(argc, argv);
  g_ctx = std::make_unique<rc::Context>();
  g_bandwidth = measure_bandwidth(*g_ctx);
  std::printf("bench_cuda: %s, %d SMs, %.1f GiB; device-to-device copy bandwidth %.0f GB/s\n",
              g_ctx->device_name().c_str(), g_ctx->sm_count(), static_cast<double>(g_ctx->total_memory()) / kGiB,
              g_bandwidth / 1e9);
  benchmark::AddCustomContext("device", g_ctx->device_name());
  benchmark::AddCustomContext("d2d_bandwidth_GBps", std::to_string(g_bandwidth / 1e9));
  for (const std::string& m : g_opt.models)
    for (int64_t T : g_opt.contexts) {
      const std::string suffix = "/" + m + "/" + std::to_string(T);
      benchmark::RegisterBenchmark(("prefill" + suffix).c_str(), BM_Prefill, m, T)
          ->Iterations(1)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("decode_full" + suffix).c_str(), BM_DecodeFull, m, T)
          ->Iterations(g_opt.decode_steps)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("decode_compressed" + suffix).c_str(), BM_DecodeCompressed, m, T)
          ->Iterations(g_opt.decode_steps)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("profile" + suffix).c_str(), BM_Profile, m, T)
          ->Iterations(1)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  g_scn.reset();
  g_ctx.reset();
  return 0;
}

#else  // !RKV_HAVE_CUDA

int main() {
  std::printf("bench_cuda: built without the CUDA backend (no nvcc at configure time); nothing to measure\n");
  return 0;
}

#endif
