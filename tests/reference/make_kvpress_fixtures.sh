#!/usr/bin/env bash
# Regenerates the committed kvpress fixtures (tests/fixtures/kvpress/) with tests/reference/make_kvpress_fixtures.py.
# Makes <cache>/venv-kvpress with scripts/requirements-kvpress.txt first (torch, transformers and kvpress from PyPI:
# about 4 GB with the nvidia-* runtime wheels PyPI's Linux torch pulls in; the presses run on the CPU; once) and clones
# FFY0/DefensiveKV at a pinned commit for the DefensiveKV cases ($RIPPLEKV_DEFENSIVEKV_SRC: an existing checkout).
# Needs no model or other asset. Never run by scripts/test.sh.
# Usage: tests/reference/make_kvpress_fixtures.sh [--out DIR]   (cache: $RIPPLEKV_CACHE, default ~/.cache/ripplekv)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cache=${RIPPLEKV_CACHE:-$HOME/.cache/ripplekv}
venv=$cache/venv-kvpress
requirements=$repo/scripts/requirements-kvpress.txt

. "$repo/tests/reference/reference_venv.sh"
reference_venv "$venv" "$requirements" make_kvpress_fixtures "about 4 GB download, once"
# The DefensiveKV reference (FFY0/DefensiveKV, not on PyPI): a checkout at the pinned commit, cloned once.
dkv=${RIPPLEKV_DEFENSIVEKV_SRC:-$cache/src/DefensiveKV}
reference_checkout "$dkv" FFY0/DefensiveKV 9251b95e7e282a6c18dd98ef6318dd489e639a58 \
  kvpress/presses/efficient_defensivekv_press.py make_kvpress_fixtures
exec "$venv/bin/python" "$repo/tests/reference/make_kvpress_fixtures.py" --defensivekv "$dkv" "$@"
