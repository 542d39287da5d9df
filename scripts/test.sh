#!/usr/bin/env bash
# Set-up and tests on a fresh Debian machine: installs what is missing, fetches the assets, builds, runs ctest.
#   scripts/test.sh             unit + model tests (what CI runs; about 20 minutes on 2 cores with the build)
#   scripts/test.sh --all       also the slow, demo-scale tests
#   scripts/test.sh --gpu       only the gpu tests (they skip without a device)
#   scripts/test.sh --sanitize  ASan + UBSan build (build-sanitize/) running the unit, model and sanitize tests
set -euo pipefail
cd "$(dirname "$0")/.."
labels='unit|model'
build_dir=build
cmake_args=()
case "${1:-}" in
  "") ;;
  --all) labels='unit|model|slow' ;;
  --gpu) labels='gpu' ;;
  --sanitize) labels='unit|model|sanitize'; build_dir=build-sanitize
              cmake_args+=(-DRIPPLEKV_SANITIZE=ON -DRIPPLEKV_CUDA=OFF -DRIPPLEKV_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
  -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
  *) echo "test.sh: unknown option '$1' (expected --all, --gpu, --sanitize or nothing)" >&2; exit 2 ;;
esac
scripts/install-deps.sh
[ -x scripts/fetch-assets ] && scripts/fetch-assets
BUILD_DIR=$build_dir scripts/build.sh "${cmake_args[@]}"
ctest --test-dir "$build_dir" -L "$labels" --output-on-failure -j "$(nproc)"
