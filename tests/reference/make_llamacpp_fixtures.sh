#!/usr/bin/env bash
# Regenerates the committed llama.cpp fixtures (tests/fixtures/llamacpp/) with tests/reference/make_llamacpp_fixtures.py
# (SmolLM2) and tests/reference/make_llamacpp_gemma3_fixture.py (Gemma 3 270M).
# Makes <cache>/venv-llamacpp with scripts/requirements-llamacpp.txt first (pip builds llama-cpp-python from source
# with cmake: about 20 minutes on 2 cores, once). Needs the assets of scripts/fetch-assets (model and Austen texts).
# Usage: tests/reference/make_llamacpp_fixtures.sh [--out DIR]   (cache: $RIPPLEKV_CACHE, default ~/.cache/ripplekv)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cache=${RIPPLEKV_CACHE:-$HOME/.cache/ripplekv}
python=${PYTHON:-python3}
venv=$cache/venv-llamacpp
requirements=$repo/scripts/requirements-llamacpp.txt
model=$cache/models/SmolLM2-135M-Instruct.Q4_1.gguf

for asset in "$model" "$cache/models/gemma-3-270m-q4_k_m.gguf" "$cache/austen/persuasion.txt"; do
  [ -f "$asset" ] || { echo "make_llamacpp_fixtures: missing $asset; run scripts/fetch-assets first" >&2; exit 1; }
done

want="$(sha256sum "$requirements" | cut -d' ' -f1) $("$python" -c 'import sys; print(sys.version.split()[0])')"
if ! { [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.ripplekv-stamp" 2>/dev/null)" = "$want" ]; }; then
  echo "make_llamacpp_fixtures: building $venv from scripts/requirements-llamacpp.txt (compiles llama.cpp; slow)"
  "$python" -m venv --clear "$venv"
  CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "$venv/bin/pip" install --disable-pip-version-check -r "$requirements"
  echo "$want" >"$venv/.ripplekv-stamp"
fi
"$venv/bin/python" "$repo/tests/reference/make_llamacpp_fixtures.py" --model "$model" --austen "$cache/austen" "$@"
# Gemma 3 270M: BOS + 1,100 tokens of Austen, logits at positions on both sides of its 512-token window.
exec "$venv/bin/python" "$repo/tests/reference/make_llamacpp_gemma3_fixture.py" \
  --model "$cache/models/gemma-3-270m-q4_k_m.gguf" --austen "$cache/austen" "$@"
