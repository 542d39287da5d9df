// The attention of one decode step over one packed layer (backend/cpu/attended_kv.hpp: q.k and the value sum read
// from the codes, a tile at a time) beside the same layer in float32. Issue 36's goal: the time follows the bytes --
// int4 <= 0.4x and int8 <= 0.6x of the f32 time at depth 2048 and 16K.
//
// Geometry of SmolLM2-135M (9 query heads, 3 KV heads, head dim 64): a layer of `depth` entries per KV head with
// normal keys and values (the values do not change the work), packed whole by the codec (residual 0) plus the decode
// step's own entry in the float tail; one query row. BM_PackedAttention/<codec>/<depth>; codec index into codecs().
// BM_UnpackThenAttend is the path before (until 123d124): unpack_layer writes the whole layer as float32 into scratch
// and the float attention reads that copy.
//
// Run: build/bin/bench_packed_attention [--benchmark_repetitions=3]   (RKV_BENCH_THREADS=n, default 2). Counters:
// bytes (the layer's packed + tail bytes), entries/s. No model or asset needed.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/attended_kv.hpp"
#include "backend/cpu/attention.hpp"
#include "backend/cpu/blas.hpp"
#include "cpu_bench.hpp"
#include "backend/cpu/threads.hpp"
#include "cache/codec.hpp"
#include "cache/packed_kv.hpp"
#include "model/synthetic_model.hpp"

namespace {

using rkv_bench::bench_threads;

constexpr int64_t kHeads = 9, kKvHeads = 3, kHeadDim = 64;

rkv::CodecSpec codec(rkv::CodecFormat f, int bits, int64_t group, bool symmetric) {
  rkv::CodecSpec s;
  s.format = f;
  s.bits = bits;
  s.group = group;
  s.symmetric = symmetric;
  return s;
}

/// The codecs timed; index 0 is the float32 layer itself.
const std::vector<rkv::CodecSpec>& codecs() {
  static const std::vector<rkv::CodecSpec> c = {
      codec(rkv::CodecFormat::none, 0, 0, false),     codec(rkv::CodecFormat::f16, 0, 0, false),
      codec(rkv::CodecFormat::q8_0, 0, 0, false),     codec(rkv::CodecFormat::integer, 8, 32, true),
      codec(rkv::CodecFormat::q4_0, 0, 0, false),     codec(rkv::CodecFormat::integer, 4, 32, false),
      codec(rkv::CodecFormat::kivi, 4, 32, false),    codec(rkv::CodecFormat::integer, 2, 32, false),
      codec(rkv::CodecFormat::kivi, 2, 32, false),
  };
  return c;
}

/// One packed layer of `depth` entries per KV head plus the decode step's entry in the tail, and a query row.
struct Layer {
  rkv::ModelConfig config = rkv::synthetic_config("llama", kHeads, kKvHeads, kHeadDim, 1);
  rkv::LayerKV tail;
  rkv::PackedLayer packed;
  std::vector<float> qg;
};

Layer packed_layer(const rkv::CodecSpec& spec, int64_t depth) {
  Layer l;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  l.tail = rkv::build_exact_layer(kKvHeads, kHeadDim, depth, {}, true);
  for (float& x : l.tail.k) x = normal(rng);
  for (float& x : l.tail.v) x = normal(rng);
  for (int64_t h = 0; h < kKvHeads; ++h)
    for (int64_t i = 0; i < depth; ++i) *l.tail.pos_at(h, i) = static_cast<int32_t>(i);
  if (!spec.none()) {
    l.packed = rkv::build_packed_layer(spec, kKvHeads, kHeadDim);
    rkv::pack_oldest(l.packed, l.tail);
  }
  rkv::LayerKV step = rkv::build_exact_layer(kKvHeads, kHeadDim, 1, {}, true);  // the decode step's own entry
  for (int64_t h = 0; h < kKvHeads; ++h) *step.pos_at(h, 0) = static_cast<int32_t>(depth);
  rkv::append_entries(l.tail, step, std::vector<int64_t>(kKvHeads, 0), 1);
  l.qg.resize(static_cast<size_t>(kHeads * kHeadDim));
  for (float& q : l.qg) q = normal(rng);
  return l;
}

void BM_PackedAttention(benchmark::State& state) {
  const rkv::CodecSpec& spec = codecs()[static_cast<size_t>(state.range(0))];
  rkv::cpu::set_num_threads(bench_threads());
  const Layer l = packed_layer(spec, state.range(1));
  const rkv::cpu::AttendedKV kv(l.tail, spec.none() ? nullptr : &l.packed);
  std::vector<float> out(l.qg.size());
  rkv::cpu::Workspace ws;
  rkv::cpu::attention(l.config, l.qg.data(), 1, kv, {}, out.data(), ws, nullptr);  // warm-up: sizes the workspace
  for (auto _ : state) {
    rkv::cpu::attention(l.config, l.qg.data(), 1, kv, {}, out.data(), ws, nullptr);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(spec.none() ? "f32" : spec.label());
  state.counters["bytes"] = static_cast<double>(l.packed.bytes_in_use() + l.tail.bytes_in_use());
  state.counters["entries/s"] =
      benchmark::Counter(static_cast<double>(kv.entries()), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_UnpackThenAttend(benchmark::State& state) {
  const rkv::CodecSpec& spec = codecs()[static_cast<size_t>(state.range(0))];
  rkv::cpu::set_num_threads(bench_threads());
  const Layer l = packed_layer(spec, state.range(1));
  rkv::LayerKV scratch;
  std::vector<float> out(l.qg.size());
  rkv::cpu::Workspace ws;
  auto step = [&] {
    rkv::unpack_layer(l.packed, l.tail, 0, scratch);
    rkv::cpu::attention(l.config, l.qg.data(), 1, scratch, {}, out.data(), ws, nullptr);
  };
  step();  // warm-up: sizes the scratch and the workspace
  for (auto _ : state) {
    step();
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(spec.label());
}

void codec_and_depth(benchmark::internal::Benchmark* b) {
  for (int64_t depth : {2048, 16384})
    for (int64_t i = 0; i < static_cast<int64_t>(codecs().size()); ++i) b->Args({i, depth});
}

void packed_codec_and_depth(benchmark::internal::Benchmark* b) {
  for (int64_t depth : {2048, 16384})
    for (int64_t i = 1; i < static_cast<int64_t>(codecs().size()); ++i) b->Args({i, depth});
}

}  // namespace

BENCHMARK(BM_PackedAttention)->Apply(codec_and_depth)->ArgNames({"codec", "depth"})->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_UnpackThenAttend)->Apply(packed_codec_and_depth)->ArgNames({"codec", "depth"})->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

int main(int argc, char** argv) { return rkv_bench::cpu_bench_main(argc, argv); }
