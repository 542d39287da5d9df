#!/usr/bin/env bash
# One bounded GPU check of the CUDA backend, for a machine with an NVIDIA GPU (made for a short borrowed session):
# builds what is missing, runs the `gpu`-labelled tests and the CUDA benchmarks, and writes everything into OUT_DIR.
#
#   scripts/gpu-check.sh OUT_DIR
#
# Environment (all optional):
#   BUILD_DIR            build folder (default build-gpu); reused when it already holds test_gpu and bench_cuda
#   CUDA_ARCHS           CMAKE_CUDA_ARCHITECTURES for a fresh configure (default 90: an H100/H200 builds in half the time)
#   GPU_CHECK_MODELS     bench_cuda --models   (default smollm2,llama8b)
#   GPU_CHECK_CONTEXTS   bench_cuda --contexts (default 8192,32768)
#   GPU_CHECK_STEPS      bench_cuda --decode_steps (default 16)
#   TEST_TIMEOUT, BENCH_TIMEOUT  seconds (default 200 and 240)
# Files written: device.txt, build.log, ctest-gpu.log, gtest-xml/ (one file per test case), bench_cuda.txt, bench_cuda.json,
#   ci-tiny-compare.txt (ripplekv run configs/ci-tiny.toml --backend cuda vs --backend cpu, when the SmolLM2 asset is
#   present under $RIPPLEKV_CACHE), summary.txt.
# Exit status: 0 when the build succeeded and every gpu test passed (benchmark failures are reported in summary.txt).
set -uo pipefail
if [ $# -ne 1 ]; then
  sed -n '2,16p' "$0"
  exit 2
fi
out=$1
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-gpu}
jobs=$(nproc)
start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - start ))s] $*" | tee -a "$out/summary.txt"; }
: > "$out/summary.txt"

{ nvidia-smi 2>&1 || echo "nvidia-smi not available"; } > "$out/device.txt"
stamp "device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo unknown)"

if [ ! -x "$build/bin/test_gpu" ] || [ ! -x "$build/bin/bench_cuda" ]; then
  stamp "configuring $build (CUDA archs ${CUDA_ARCHS:-90})"
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DRIPPLEKV_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" > "$out/build.log" 2>&1 || { stamp "configure FAILED (build.log)"; exit 1; }
fi
stamp "building test_gpu bench_cuda ripplekv_cli and the plugins with $jobs jobs"
if ! cmake --build "$build" --target test_gpu bench_cuda ripplekv_cli -j "$jobs" >> "$out/build.log" 2>&1 ||
   ! cmake --build "$build" -j "$jobs" >> "$out/build.log" 2>&1; then
  stamp "build FAILED (tail of build.log follows)"
  tail -40 "$out/build.log" | tee -a "$out/summary.txt"
  exit 1
fi
stamp "build done"

# Tests: one ctest entry per GoogleTest case; a few in parallel (each holds its own CUDA context).
GTEST_OUTPUT="xml:$out/gtest-xml/" timeout "${TEST_TIMEOUT:-200}" \
  ctest --test-dir "$build" -L gpu -V -j 4 --timeout 180 > "$out/ctest-gpu.log" 2>&1
test_rc=$?
stamp "ctest -L gpu exit $test_rc: $(grep -E 'tests passed|tests failed' "$out/ctest-gpu.log" | tail -1)"
# The measured accuracies, then any failed or skipped case.
grep -E '\[ (fp32|bf16|qwen2 fp32|profile|SmolLM2 fp32|SmolLM2 bf16) \]' "$out/ctest-gpu.log" | sed 's/^[0-9]*: //' \
  >> "$out/summary.txt"
sed -n '/The following tests/,$p' "$out/ctest-gpu.log" | head -40 >> "$out/summary.txt"

# The real model end to end on both backends (fp32): every cell's budgets and KV bytes equal, metrics close.
model="${RIPPLEKV_CACHE:-$HOME/.cache/ripplekv}/models/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ -f "$model" ]; then
  for b in cpu cuda; do
    timeout "${RUN_TIMEOUT:-240}" "$build/bin/ripplekv" run configs/ci-tiny.toml --backend "$b" --dtype f32 \
      --out "$out/ci-tiny-$b" --quiet > "$out/ci-tiny-$b.log" 2>&1 || stamp "ci-tiny on $b FAILED (ci-tiny-$b.log)"
  done
  python3 scripts/compare_runs.py "$out/ci-tiny-cpu" "$out/ci-tiny-cuda" > "$out/ci-tiny-compare.txt" 2>&1
  stamp "ci-tiny cuda vs cpu: exit $? ($(tail -1 "$out/ci-tiny-compare.txt"))"
else
  stamp "ci-tiny cuda vs cpu: skipped, $model is absent (the device machine cannot fetch it)"
fi

# Benchmarks (bounded): prefill, decode full and at a 10% budget, bandwidth bound, memory.
timeout "${BENCH_TIMEOUT:-240}" "$build/bin/bench_cuda" --models="${GPU_CHECK_MODELS:-smollm2,llama8b}" \
  --contexts="${GPU_CHECK_CONTEXTS:-8192,32768}" --decode_steps="${GPU_CHECK_STEPS:-16}" \
  --benchmark_out="$out/bench_cuda.json" --benchmark_out_format=json > "$out/bench_cuda.txt" 2>&1
bench_rc=$?
stamp "bench_cuda exit $bench_rc"
grep -E 'bench_cuda:|^(prefill|decode|profile)' "$out/bench_cuda.txt" >> "$out/summary.txt"
stamp "done"
exit $test_rc
