#!/usr/bin/env bash
# Regenerates tests/fixtures/squeezeattention/budgets.json with tests/reference/make_squeezeattention_fixture.py:
# SqueezeAttention's own layer split (hetailang/SqueezeAttention at a pinned commit, cloned once) on seeded layer
# importances. Makes <cache>/venv-squeezeattention from scripts/requirements-squeezeattention.txt first (numpy and
# scikit-learn from PyPI, about 60 MB, once). Needs no model. Never run by scripts/test.sh.
# Usage: tests/reference/make_squeezeattention_fixture.sh [--out FILE]   (cache: $RIPPLEKV_CACHE, default ~/.cache/ripplekv)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cache=${RIPPLEKV_CACHE:-$HOME/.cache/ripplekv}
venv=$cache/venv-squeezeattention
requirements=$repo/scripts/requirements-squeezeattention.txt

. "$repo/tests/reference/reference_venv.sh"
reference_venv "$venv" "$requirements" make_squeezeattention_fixture "about 60 MB, once"
commit=a1933d1
src=${RIPPLEKV_SQUEEZEATTENTION_SRC:-$cache/src/SqueezeAttention}
if [ ! -f "$src/utils_hh/modify_llama_drop.py" ]; then
  echo "make_squeezeattention_fixture: cloning hetailang/SqueezeAttention at $commit into $src (once)"
  git clone --quiet https://github.com/hetailang/SqueezeAttention "$src"
  git -C "$src" checkout --quiet "$commit"
fi
exec "$venv/bin/python" "$repo/tests/reference/make_squeezeattention_fixture.py" --src "$src" "$@"
