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
src=${RIPPLEKV_SQUEEZEATTENTION_SRC:-$cache/src/SqueezeAttention}
reference_checkout "$src" hetailang/SqueezeAttention a1933d1 utils_hh/modify_llama_drop.py make_squeezeattention_fixture
exec "$venv/bin/python" "$repo/tests/reference/make_squeezeattention_fixture.py" --src "$src" "$@"
