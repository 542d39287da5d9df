// What every CPU benchmark program shares: its thread count and its main().
// Thread rules: called from the benchmark's own thread.
#pragma once
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>

#include "backend/cpu/blas.hpp"

namespace rkv_bench {

/// Threads for every benchmark: 2 (the 2-core machine the figures are measured on), or $RKV_BENCH_THREADS (> 0).
inline int bench_threads() {
  const char* t = std::getenv("RKV_BENCH_THREADS");
  return t && std::atoi(t) > 0 ? std::atoi(t) : 2;
}

/// Google Benchmark's main with the OpenBLAS core and the thread count recorded in the JSON context; an unknown
/// argument is an error (exit 1).
inline int cpu_bench_main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("openblas_core", rkv::cpu::blas_core_name());
  benchmark::AddCustomContext("threads", std::to_string(bench_threads()));
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace rkv_bench
