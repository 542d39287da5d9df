#!/usr/bin/env bash
# Regenerates tests/fixtures/kvpress/smollm2_e2e.json and smollm2_e2e_kvpress_kept.json with
# tests/reference/compare_kvpress_smollm2.py: ripplekv's snapkv / streamingllm / knorm against kvpress's presses on
# SmolLM2, same prompt ids, same budgets.
# Needs a built ripplekv (RIPPLEKV default build/bin/ripplekv), the fetched assets (scripts/fetch-assets: the SmolLM2
# GGUF, the Austen texts, <cache>/venv with the `gguf` package, which tests/reference/gguf_to_hf.py uses to write the
# model as a float32 Hugging Face folder under <cache>/smollm2-hf-f32, once) and <cache>/venv-kvpress (built by
# tests/reference/make_kvpress_fixtures.sh). About 3 minutes on 2 cores. Never run by scripts/test.sh.
# Usage: tests/reference/compare_kvpress_smollm2.sh [--out DIR]   (cache: $RIPPLEKV_CACHE, default ~/.cache/ripplekv)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cache=${RIPPLEKV_CACHE:-$HOME/.cache/ripplekv}
ripplekv=${RIPPLEKV:-$repo/build/bin/ripplekv}
model=$cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
hf=$cache/smollm2-hf-f32

for need in "$ripplekv" "$model" "$cache/venv/bin/python" "$cache/venv-kvpress/bin/python"; do
  [ -e "$need" ] || { echo "compare_kvpress_smollm2: missing $need (see the comment at the top of $0)" >&2; exit 2; }
done
if [ ! -f "$hf/model.safetensors" ] || [ "$model" -nt "$hf/model.safetensors" ]; then
  echo "compare_kvpress_smollm2: writing $hf from $model" >&2
  "$cache/venv/bin/python" "$repo/tests/reference/gguf_to_hf.py" --model "$model" --out "$hf"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$cache/venv-kvpress/bin/python" "$repo/tests/reference/compare_kvpress_smollm2.py" \
  --ripplekv "$ripplekv" --model "$model" --hf "$hf" --work "$work" "$@"
