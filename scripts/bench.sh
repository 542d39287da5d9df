#!/usr/bin/env bash
# The benchmarks behind the speed and memory tables (docs/DECISIONS.md, docs/guides/long-context.md) as one JSON per run, or two runs compared:
#   scripts/bench.sh [--build DIR] [--reps N] [--groups cli,forward,decode_budget,memory,packed_attention] [--out FILE]
#   scripts/bench.sh --compare A.json B.json [--threshold 0.05]
# Everything is in scripts/bench.py (its docstring lists the figures). Not a test: never called by scripts/test.sh.
set -euo pipefail
exec python3 "$(dirname "$0")/bench.py" "$@"
