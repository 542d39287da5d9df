#!/usr/bin/env python3
"""Compares two run folders of the same config made on different backends (e.g. ripplekv run --backend cpu and
--backend cuda): every cell's per-example budgets, B and KV bytes must be equal, needle accuracy equal, and every other
metric within REL (default 1e-3) relative. Prints one line per difference and a closing line
"N passed, M failed"; exit 0 when nothing failed. Standard library only.

usage: scripts/compare_runs.py RUN_A RUN_B [--rel REL]
"""
import json
import pathlib
import sys


def cells(run):
    out = {}
    for p in sorted(pathlib.Path(run, "cells").glob("*.json")):
        out[p.stem] = json.loads(p.read_text())
    return out


def main(argv):
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--rel"):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    rel = float(argv[3]) if len(argv) == 4 else 1e-3
    a, b = cells(argv[0]), cells(argv[1])
    passed = failed = 0
    worst = 0.0
    if not a or set(a) != set(b):
        print(f"cell sets differ: {sorted(set(a) ^ set(b))} (or no cells in {argv[0]})")
        failed += 1
    for cid in sorted(set(a) & set(b)):
        for ea, eb in zip(a[cid]["examples"], b[cid]["examples"]):
            what = f"{a[cid]['label']} {ea['task']} #{ea['example']}"
            for key in ("budgets", "B", "kv_bytes"):
                if ea[key] == eb[key]:
                    passed += 1
                else:
                    failed += 1
                    print(f"{what}: {key} differ")
            for field in ("values", "full_values"):
                for metric, x in ea[field].items():
                    y = eb[field].get(metric)
                    if metric == "accuracy":
                        ok = x == y
                    else:
                        d = abs(y - x) / max(abs(x), 1e-12)
                        worst = max(worst, d)
                        ok = d <= rel
                    if ok:
                        passed += 1
                    else:
                        failed += 1
                        print(f"{what}: {field}.{metric} {x} vs {y}")
    print(f"worst relative metric difference {worst:.3g}")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
