#!/usr/bin/env bash
# Regenerates the committed llama.cpp fixtures (tests/fixtures/llamacpp/) with tests/reference/make_llamacpp_fixtures.py
# (SmolLM2) and tests/reference/make_llamacpp_gemma3_fixture.py (Gemma 3 270M).
# Makes <cache>/venv-llamacpp with scripts/requirements-llamacpp.txt first (pip builds llama-cpp-python from source
# with cmake: about 20 minutes on 2 cores, once). Needs the assets of scripts/fetch-assets (model and Austen texts).
# Usage: tests/reference/make_llamacpp_fixtures.sh [--out DIR]   (cache: $RIPPLEKV_CACHE, default ~/.cache/ripplekv)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cache=${RIPPLEKV_CACHE:-$HOME/.cache/ripplekv}
venv=$cache/venv-llamacpp
requirements=$repo/scripts/requirements-llamacpp.txt
model=$cache/models/SmolLM2-135M-Instruct.Q4_1.gguf

for asset in "$model" "$cache/models/gemma-3-270m-q4_k_m.gguf" "$cache/austen/persuasion.txt"; do
  [ -f "$asset" ] || { echo "make_llamacpp_fixtures: missing $asset; run scripts/fetch-assets first" >&2; exit 1; }
done

. "$repo/tests/reference/reference_venv.sh"
CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) reference_venv "$venv" "$requirements" make_llamacpp_fixtures \
  "compiles llama.cpp; slow"
"$venv/bin/python" "$repo/tests/reference/make_llamacpp_fixtures.py" --model "$model" --austen "$cache/austen" "$@"
# Gemma 3 270M: BOS + 1,100 tokens of Austen, logits at positions on both sides of its 512-token window.
exec "$venv/bin/python" "$repo/tests/reference/make_llamacpp_gemma3_fixture.py" \
  --model "$cache/models/gemma-3-270m-q4_k_m.gguf" --austen "$cache/austen" "$@"
