#!/usr/bin/env bash
# Regenerates tests/fixtures/dynamickv/ with tests/reference/make_dynamickv_fixture.py: DynamicKV's own layer budgets
# (DreamMr/DynamicKV at a pinned commit, cloned once: its DynamicKVClusterV11 scoring and re-deciding the budgets, on
# seeded attention layers). Runs in <cache>/venv-kvpress (torch on the CPU; made from scripts/requirements-kvpress.txt
# as make_kvpress_fixtures.sh makes it, once). Needs no model. Never run by scripts/test.sh.
# Usage: tests/reference/make_dynamickv_fixture.sh [--out DIR]   (cache: $RIPPLEKV_CACHE, default ~/.cache/ripplekv)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cache=${RIPPLEKV_CACHE:-$HOME/.cache/ripplekv}
venv=$cache/venv-kvpress
requirements=$repo/scripts/requirements-kvpress.txt

. "$repo/tests/reference/reference_venv.sh"
reference_venv "$venv" "$requirements" make_dynamickv_fixture "about 4 GB download, once"
src=${RIPPLEKV_DYNAMICKV_SRC:-$cache/src/DynamicKV}
reference_checkout "$src" DreamMr/DynamicKV 8ab3c08 kv_compression/token_drop/methods/dynamic_v11.py \
  make_dynamickv_fixture
exec "$venv/bin/python" "$repo/tests/reference/make_dynamickv_fixture.py" --src "$src" "$@"
