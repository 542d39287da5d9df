#!/usr/bin/env bash
# Set-up and the main job on a fresh Debian machine: installs what is missing, fetches the assets (SmolLM2 and the
# Austen novels), builds, then runs the default ablation (configs/default.toml): perturbation-KL profile, SnapKV
# scoring, uniform vs PyramidKV vs RippleKV budgets at 10/20/30%, tasks lm_fidelity and needle.
#   scripts/demo.sh [--out DIR] [other `ripplekv run` options]     (default DIR: runs/default)
# A second call continues an interrupted run (--resume) and redoes nothing that finished.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/fetch-assets
scripts/build.sh
out=runs/default
args=()
while (($#)); do
  case "$1" in
    --out) out=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
resume=()
[ -f "$out/run.json" ] && resume=(--resume)
build/bin/ripplekv run configs/default.toml --out "$out" "${resume[@]}" "${args[@]}"
echo
echo "== $out/report.md (its headline: every cell ranked per task and budget; the rest and the plots in $out/)"
awk '/^## Headline/ { on = 1; print; next } on && /^## / { exit } on { print }' "$out/report.md"
