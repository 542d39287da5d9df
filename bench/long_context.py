#!/usr/bin/env python3
"""Wall time and peak memory of `ripplekv run` at long contexts (README "Long context").

For each length T it writes a one-example lm_fidelity config (the full-cache reference and one cell, uniform + snapkv
at budget.fraction 0.25, 16 continuation tokens), runs it under /usr/bin/time -v and prints a markdown table: T, the
prefill mode, wall seconds, peak RSS (GB), and the cache bytes the results record (the full cache after the prompt,
and the cell's). The weights' share of the RSS is the model file's size as the CPU backend holds it (README
"Memory"); the rest is the caches and scratch.

  bench/long_context.py --model ~/.cache/ripplekv/models/gemma-3-270m-q4_k_m.gguf --lengths 4096,8192,16384,32752
  bench/long_context.py --model .../qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --lengths 32752 --chunk 2048

T + 16 continuation tokens must fit the model's context (32,768 for Gemma 3 270M and Qwen2.5-Coder-1.5B: 32752).
Every path is passed to the program as an argument, never through a shell. Exit status: 1 when a run fails.
"""
import argparse
import json
import os
import pathlib
import re
import subprocess
import sys

CONFIG = """[model]
path = "{model}"
backend = "cpu"
threads = {threads}

[data.calibration]
files = ["austen:emma", "austen:mansfieldpark", "austen:persuasion"]
examples = 2
prefix_tokens = 1024
window_tokens = 32
seed = 0

[data.eval]
files = ["austen:prideprejudice", "austen:sensesensibility", "austen:northangerabbey"]
examples = 1
prefix_tokens = {length}
seed = 1

[signal]
plugin = "depth"

[scorer]
plugin = "snapkv"

[allocator]
plugin = "uniform"

[budget]
fraction = 0.25

[prefill]
chunk_tokens = {chunk}
compress_between_chunks = {between}

[tasks]
run = ["lm_fidelity"]
[tasks.lm_fidelity]
continuation_tokens = 16

[output]
bootstrap_resamples = 100
"""


def parse_time(stderr: str):
    """(wall seconds, peak RSS bytes) from /usr/bin/time -v's report."""
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", stderr).group(1)
    parts = [float(p) for p in wall.split(":")]
    seconds = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", stderr).group(1))
    return seconds, rss_kb * 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="GGUF file")
    ap.add_argument("--lengths", default="4096,8192,16384,32752", help="comma-separated prompt lengths T")
    ap.add_argument("--chunk", type=int, default=0, help="[prefill] chunk_tokens (0: one shot)")
    ap.add_argument("--compress-between-chunks", action="store_true")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--ripplekv", default=str(pathlib.Path(__file__).resolve().parent.parent / "build/bin/ripplekv"))
    ap.add_argument("--out", default="runs/long-context-bench", help="folder for the configs and runs")
    a = ap.parse_args()
    lengths = [int(x) for x in a.lengths.split(",") if x.strip()]
    if any(n < 1 or n > 1 << 20 for n in lengths) or a.chunk < 0 or a.threads < 0:
        ap.error("lengths must be in [1, 2^20], --chunk and --threads >= 0")
    model = pathlib.Path(a.model).expanduser().resolve()
    if not model.is_file():
        ap.error(f"--model {model}: no such file")
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    mode = "one shot" if a.chunk == 0 else f"chunks of {a.chunk}" + (", compressed between" if a.compress_between_chunks else "")
    print(f"model {model.name} ({model.stat().st_size / 1e9:.2f} GB file), {mode}")
    print("| T | wall s | peak RSS GB | full cache KV GB | cell KV GB (f = 0.25) |")
    print("|---:|---:|---:|---:|---:|")
    failed = False
    for n in lengths:
        name = f"{model.stem}-T{n}-C{a.chunk}{'-between' if a.compress_between_chunks else ''}"
        cfg = out / f"{name}.toml"
        cfg.write_text(CONFIG.format(model=str(model).replace("\\", "\\\\").replace('"', '\\"'), threads=a.threads,
                                     length=n, chunk=a.chunk,
                                     between="true" if a.compress_between_chunks else "false"))
        run_dir = out / name
        p = subprocess.run(["/usr/bin/time", "-v", a.ripplekv, "run", str(cfg), "--out", str(run_dir), "--force",
                            "--quiet"], capture_output=True, text=True)
        if p.returncode != 0:
            print(f"| {n} | failed (exit {p.returncode}): {p.stderr.strip().splitlines()[-1] if p.stderr else ''} |||")
            failed = True
            continue
        wall, rss = parse_time(p.stderr)
        rows = [json.loads(l) for l in (run_dir / "results.jsonl").read_text().splitlines() if l.strip()]
        full = next(r for r in rows if r["label"] == "full cache")
        cell = next(r for r in rows if r["label"] != "full cache")
        print(f"| {n} | {wall:.0f} | {rss / 1e9:.2f} | {full['kv_bytes'] / 1e9:.3f} | {cell['kv_bytes'] / 1e9:.3f} |",
              flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
