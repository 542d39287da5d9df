// Tokenizer speed: loading SmolLM2's tokenizer from its GGUF, encoding and decoding Austen text (64 KiB of Persuasion),
// and the SPM path on the same text (llama-spm vocabulary test file). Counters: bytes/s of text and tokens/s.
//   build/bench/bench_tokenizer   (needs scripts/fetch-assets; absent assets are reported as errors)
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "model/gguf.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

constexpr std::size_t kTextBytes = 64 * 1024;

// Asset locations as in tests/common/assets.hpp (which needs the test-only compile definitions).
std::filesystem::path cache_dir() {
  if (const char* c = std::getenv("RIPPLEKV_CACHE"); c && *c) return c;
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home ? home : "/root") / ".cache" / "ripplekv";
}
std::filesystem::path smollm2_gguf() { return cache_dir() / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"; }
std::filesystem::path llama_spm_vocab() {
  return std::filesystem::path(__FILE__).parent_path().parent_path() / ".." / "shared" / "tokenizer-vectors" /
         "ggml-vocab-llama-spm.gguf";
}

std::string austen_text() {
  std::ifstream in(cache_dir() / "austen" / "persuasion.txt", std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str().substr(0, kTextBytes);
}

const rkv::Tokenizer* load(const std::filesystem::path& path) {
  static std::map<std::string, rkv::Tokenizer> cache;
  if (!std::filesystem::exists(path)) return nullptr;
  auto it = cache.find(path.string());
  if (it == cache.end()) it = cache.emplace(path.string(), rkv::Tokenizer::from_path(path)).first;
  return &it->second;
}

void BM_LoadSmolLM2(benchmark::State& state) {
  const auto path = smollm2_gguf();
  if (!std::filesystem::exists(path)) return state.SkipWithError("SmolLM2 GGUF missing (scripts/fetch-assets)");
  for (auto _ : state) {
    const rkv::GgufFile file(path.string());
    benchmark::DoNotOptimize(rkv::Tokenizer::from_gguf(file));
  }
}

void encode_bench(benchmark::State& state, const std::filesystem::path& model) {
  const rkv::Tokenizer* tok = load(model);
  const std::string text = austen_text();
  if (!tok || text.empty()) return state.SkipWithError("asset missing (scripts/fetch-assets)");
  std::size_t n_tokens = 0;
  for (auto _ : state) {
    const auto ids = tok->encode(text, false, false);
    n_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(n_tokens), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tokens"] = static_cast<double>(n_tokens);
}

void BM_EncodeSmolLM2(benchmark::State& state) { encode_bench(state, smollm2_gguf()); }
void BM_EncodeLlamaSpm(benchmark::State& state) {
  encode_bench(state, llama_spm_vocab());
}

void BM_DecodeSmolLM2(benchmark::State& state) {
  const rkv::Tokenizer* tok = load(smollm2_gguf());
  const std::string text = austen_text();
  if (!tok || text.empty()) return state.SkipWithError("asset missing (scripts/fetch-assets)");
  const auto ids = tok->encode(text, false, false);
  for (auto _ : state) benchmark::DoNotOptimize(tok->decode(ids));
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(ids.size()), benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

BENCHMARK(BM_LoadSmolLM2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeSmolLM2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeLlamaSpm)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DecodeSmolLM2)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
