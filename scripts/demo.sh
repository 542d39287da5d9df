#!/usr/bin/env bash
# Set-up and the main job on a fresh Debian machine: installs what is missing, fetches the assets, builds, then runs
# the default ablation. Extra arguments are passed to `ripplekv run` (e.g. --out DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
[ -x scripts/fetch-assets ] && scripts/fetch-assets
scripts/build.sh
bin=build/bin/ripplekv
echo "== plugins loaded from their libraries"
$bin plugins list
echo
echo "== one allocation per allocator: T = 1024 prompt positions, 30 layers, 20% budget"
$bin allocate --allocator uniform --layers 30 --prefix-tokens 1024 --budget-fraction 0.2
echo
$bin allocate --allocator pyramid --layers 30 --prefix-tokens 1024 --budget-fraction 0.2
echo
# A depth-shaped example profile (the real one comes from a signal plugin run on the model).
profile=$(python3 -c 'print(",".join(str(round(1 - l / 29, 4)) for l in range(30)))')
$bin allocate --allocator ripplekv --sensitivity "$profile" --prefix-tokens 1024 --budget-fraction 0.2
