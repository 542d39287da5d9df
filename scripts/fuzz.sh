#!/usr/bin/env bash
# Builds one libFuzzer target of fuzz/ (clang, ASan + UBSan) into build-fuzz/ and runs it for SECONDS.
set -euo pipefail
cd "$(dirname "$0")/.."

targets=(gguf safetensors tokenizer config run_folder)

usage() {
  cat <<EOF
usage: scripts/fuzz.sh TARGET SECONDS [libFuzzer args...]

Builds build-fuzz/bin/fuzz_TARGET (clang, -fsanitize=fuzzer,address,undefined; installs clang, libclang-rt-14-dev
and llvm through scripts/install-deps.sh --fuzz when missing) and runs it for SECONDS seconds on
  build-fuzz/corpus/TARGET   the working corpus (new inputs go here; starts empty)
  fuzz/corpus/TARGET         the checked-in seeds (read only)
  fuzz/regressions/TARGET    inputs that once crashed it (read only; also replayed by tests/fuzz)
with the dictionary fuzz/TARGET.dict. Crashing, leaking, hanging (-timeout, default 10 s per input) or
out-of-memory inputs are written to build-fuzz/crashes/TARGET/; the script then exits non-zero.

targets:
  gguf          GGUF reader, metadata getters, dequantization, tokenizer from GGUF, GGUF model loader
  safetensors   safetensors reader and the Hugging Face model loader (fixed tiny config.json)
  tokenizer     encode/decode round trips on real vocabularies: the SmolLM2 GGUF of the asset cache, plus
                ../shared/tokenizer-vectors/ggml-vocab-llama-spm.gguf when present; RIPPLEKV_FUZZ_VOCABS
                (':'-separated GGUF paths) overrides
  config        ablation-config validation, as 'ripplekv validate'
  run_folder    a run's output folder (cells/*.json, run.json, results.jsonl) as --resume, merge and
                rkv_results_json read it back

environment: FUZZ_BUILD_DIR (default build-fuzz), FUZZ_JOBS (build jobs, default nproc), FUZZ_TIMEOUT (seconds
per input, default 10), RIPPLEKV_CACHE (asset cache, default ~/.cache/ripplekv).
Reproduce a crash: build-fuzz/bin/fuzz_TARGET build-fuzz/crashes/TARGET/crash-...
EOF
}

case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  "") usage >&2; exit 2 ;;
esac
target=$1
if [[ ! " ${targets[*]} " == *" $target "* ]]; then
  echo "fuzz.sh: unknown target '$target'; targets: ${targets[*]}" >&2
  exit 2
fi
seconds=${2:-}
if [[ ! "$seconds" =~ ^[0-9]+$ ]] || ((seconds < 1)); then
  echo "fuzz.sh: SECONDS must be a positive integer (got '${seconds}'); see scripts/fuzz.sh --help" >&2
  exit 2
fi
shift 2

scripts/install-deps.sh --fuzz
build_dir=${FUZZ_BUILD_DIR:-build-fuzz}
CC=clang CXX=clang++ cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRIPPLEKV_FUZZ=ON \
  -DRIPPLEKV_CUDA=OFF -DRIPPLEKV_BUILD_TESTS=OFF -DRIPPLEKV_BUILD_BENCH=OFF >/dev/null
cmake --build "$build_dir" --target "fuzz_$target" -j "${FUZZ_JOBS:-$(nproc)}"

work="$build_dir/corpus/$target"
crashes="$build_dir/crashes/$target"
mkdir -p "$work" "$crashes"
dirs=("$work" "fuzz/corpus/$target")
[ -d "fuzz/regressions/$target" ] && dirs+=("fuzz/regressions/$target")

if [ "$target" = tokenizer ] && [ -z "${RIPPLEKV_FUZZ_VOCABS:-}" ]; then
  vocabs="${RIPPLEKV_CACHE:-$HOME/.cache/ripplekv}/models/SmolLM2-135M-Instruct.Q4_1.gguf"
  spm="$(pwd)/../shared/tokenizer-vectors/ggml-vocab-llama-spm.gguf"
  [ -f "$spm" ] && vocabs="$vocabs:$spm"
  export RIPPLEKV_FUZZ_VOCABS="$vocabs"
fi
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
if command -v llvm-symbolizer >/dev/null; then export ASAN_SYMBOLIZER_PATH="$(command -v llvm-symbolizer)"; fi

before=$(find "$crashes" -type f | wc -l)
set +e
"$build_dir/bin/fuzz_$target" -max_total_time="$seconds" -timeout="${FUZZ_TIMEOUT:-10}" -rss_limit_mb=2048 \
  -print_final_stats=1 -dict="fuzz/$target.dict" -artifact_prefix="$crashes/" "$@" "${dirs[@]}"
rc=$?
set -e
after=$(find "$crashes" -type f | wc -l)
if ((rc != 0 || after > before)); then
  echo "fuzz.sh: fuzz_$target found a problem (exit $rc); inputs in $crashes/" >&2
  exit $((rc != 0 ? rc : 1))
fi
echo "fuzz.sh: fuzz_$target ran ${seconds} s without a finding; corpus: $(find "$work" -type f | wc -l) files in $work"
