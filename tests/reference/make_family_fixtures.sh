#!/usr/bin/env bash
# Regenerates tests/fixtures/families/ with tests/reference/make_family_fixtures.py: for each model family a small
# random model built by transformers, saved as safetensors, converted to GGUF (f32, q8_0) by llama.cpp's own
# convert_hf_to_gguf.py, and transformers' float64 logits of a fixed prompt and 8 greedy steps. Runs in
# <cache>/venv-kvpress (torch on the CPU, transformers; made from scripts/requirements-kvpress.txt, once). The
# converter is the vendored llama.cpp of the llama-cpp-python sdist pinned in scripts/requirements-llamacpp.txt
# (pip download, source only; unpacked once into <cache>/src). The tokenizer is trained on <cache>/austen/emma.txt
# (scripts/fetch-assets). Never run by scripts/test.sh: the tests read the committed files.
# Usage: tests/reference/make_family_fixtures.sh [--family NAME ...]   (cache: $RIPPLEKV_CACHE, default ~/.cache/ripplekv)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cache=${RIPPLEKV_CACHE:-$HOME/.cache/ripplekv}
venv=$cache/venv-kvpress

. "$repo/tests/reference/reference_venv.sh"
reference_venv "$venv" "$repo/scripts/requirements-kvpress.txt" make_family_fixtures "about 4 GB download, once"

version=$(sed -n 's/^llama-cpp-python==\([^ ]*\)$/\1/p' "$repo/scripts/requirements-llamacpp.txt")
[ -n "$version" ] || { echo "make_family_fixtures: no llama-cpp-python pin in scripts/requirements-llamacpp.txt" >&2; exit 1; }
src=$cache/src/llama-cpp-python-$version
llama=$src/llama_cpp_python-$version/vendor/llama.cpp
if [ ! -f "$llama/convert_hf_to_gguf.py" ]; then
  mkdir -p "$src"
  "$venv/bin/pip" download --disable-pip-version-check --no-deps --no-binary :all: --dest "$src" \
    "llama-cpp-python==$version"
  tar -xzf "$src/llama_cpp_python-$version.tar.gz" -C "$src" \
    "llama_cpp_python-$version/PKG-INFO" \
    "llama_cpp_python-$version/vendor/llama.cpp/convert_hf_to_gguf.py" \
    "llama_cpp_python-$version/vendor/llama.cpp/conversion" \
    "llama_cpp_python-$version/vendor/llama.cpp/gguf-py"
fi
austen=$cache/austen/emma.txt
[ -f "$austen" ] || { echo "make_family_fixtures: $austen is missing (run scripts/fetch-assets)" >&2; exit 1; }
exec "$venv/bin/python" "$repo/tests/reference/make_family_fixtures.py" --llama-cpp "$llama" --austen "$austen" \
  --out "$repo/tests/fixtures/families" "$@"
