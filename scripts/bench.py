#!/usr/bin/env python3
"""The benchmarks behind the README's speed and memory tables, as one JSON per run, and a comparison of two runs.

    scripts/bench.sh [--build DIR [--commit SHA]] [--reps N] [--groups cli,forward,decode_budget,memory,packed_attention] [--out FILE]
    scripts/bench.sh --compare A.json B.json [--threshold 0.05]

A run records the commit (and whether the tree was dirty), the machine (CPU model, cores, memory), the load average
before and after, and one median per figure:
  cli            peak RSS (MB) and wall time (s) of `ripplekv --version`, `plugins list`, `validate`, `tokenize`,
                 `model info` and `generate` of 64 tokens (one process each, under GNU time; the issue-36 table)
  forward        bench_forward with quantized weights: prefill 512 / 2048, 128 tokens decoded, decode at depth 2048
  decode_budget  bench_decode_budget: decode and attention on the full cache and on a 10% cache
  memory         bench_memory: RSS after loading SmolLM2 and at the peak of a 256-token prefill + 8 decode steps
  packed_attention  bench_packed_attention: one decode step's attention over a packed layer, per codec, at depth
                 2048 and 16K, beside float32
  profile        bench_profile: perturbation_kl against a plain prefill (minutes; not in the default groups)
Each Google Benchmark figure is the median of --reps repetitions (benchmark_repetitions); each cli figure the median
of --reps processes. `--compare` prints every figure both runs have, B / A, and marks a change beyond --threshold as
better or worse by the figure's direction (tok/s: higher is better; MB and seconds: lower), like llama.cpp's
compare-llama-bench.py. Not a test: nothing here fails on a slow machine. Needs a build with the benchmarks
(scripts/build.sh) and the assets of scripts/fetch-assets.
"""
import argparse
import json
import os
import platform
import signal
import stat
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("RIPPLEKV_CACHE") or Path.home() / ".cache" / "ripplekv")
MODEL = CACHE / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
SCHEMA = "ripplekv.bench/1"
DEFAULT_GROUPS = ["cli", "forward", "decode_budget", "memory", "packed_attention"]
# Google Benchmark programs per group: (program, extra flags, one process per benchmark)
PROGRAMS = {
    "forward": ("bench_forward", ["--benchmark_filter=/f32:0"], False),
    "decode_budget": ("bench_decode_budget", [], False),
    "memory": ("bench_memory", [], True),
    "packed_attention": ("bench_packed_attention", [], False),
    "profile": ("bench_profile", [], False),
}


def fail(msg):
    print("bench: " + msg, file=sys.stderr)
    sys.exit(2)


def git(*args):
    p = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 else ""


def machine():
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gb": mem_gb, "system": platform.platform()}


def direction(name):
    """'higher' or 'lower' is better, from the figure's unit, or None for a figure that is a setting, not a result."""
    last = name.rsplit(": ", 1)[-1]
    if "/s" in last or last in ("split_half",):
        return "higher"
    if last in ("entries", "file_MB"):
        return None
    return "lower"


def resolution(name):
    """The smallest change a figure can show: GNU time's wall clock counts hundredths of a second."""
    return 0.015 if name.endswith("wall s") else 0.0


TIME = "/usr/bin/time"  # GNU time: the child is forked from a small process, so its peak RSS is its own


def run_process(argv, env=None):
    """Runs argv under GNU time; returns (exit status, wall seconds, peak RSS in MB). (Python's own wait4 rusage would
    count the forked interpreter's pages into the child's peak: exec keeps the pre-exec high-water mark.)"""
    if not os.access(TIME, os.X_OK):
        fail("%s (GNU time) is missing: apt-get install time" % TIME)
    with tempfile.NamedTemporaryFile(mode="r", suffix=".time") as t:
        p = subprocess.run([TIME, "-f", "%M %e", "-o", t.name, *argv], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=env)
        fields = t.read().split()
    if len(fields) < 2:
        fail("%s wrote no figures for `%s`" % (TIME, " ".join(argv)))
    return p.returncode, float(fields[-1]), int(fields[-2]) / 1024.0


def cli_figures(build, reps):
    exe = str(build / "bin" / "ripplekv")
    if not Path(exe).exists():
        fail("%s is missing: build first (scripts/build.sh)" % exe)
    with tempfile.TemporaryDirectory(prefix="ripplekv-bench-") as tmp:
        return cli_figures_in(exe, Path(tmp), reps)


def cli_figures_in(exe, tmp, reps):
    text = tmp / "text.txt"
    text.write_text("It is a truth universally acknowledged, that a single man in possession of a good fortune, "
                    "must be in want of a wife.\n")
    commands = {
        "--version": [exe, "--version"],
        "plugins list": [exe, "plugins", "list"],
        "validate configs/default.toml": [exe, "validate", str(REPO / "configs" / "default.toml")],
        "tokenize": [exe, "tokenize", "--model", str(MODEL), "--text-file", str(text)],
        "model info": [exe, "model", "info", "--model", str(MODEL)],
        "generate 64 tokens, 1 thread": [exe, "generate", "--model", str(MODEL), "--prompt", "The capital of France is",
                                         "--max-new-tokens", "64", "--threads", "1"],
    }
    env = dict(os.environ, RIPPLEKV_CACHE=str(CACHE))
    figures = {}
    for name, argv in commands.items():
        rss, wall = [], []
        for _ in range(reps):
            code, w, r = run_process(argv, env)
            if code != 0:
                fail("`%s` exited with %d" % (" ".join(argv), code))
            rss.append(r)
            wall.append(w)
        figures["cli: %s: peak RSS MB" % name] = statistics.median(rss)
        figures["cli: %s: wall s" % name] = statistics.median(wall)
    return figures


def benchmark_names(program):
    p = subprocess.run([str(program), "--benchmark_list_tests=true"], capture_output=True, text=True)
    if p.returncode != 0:
        fail("%s --benchmark_list_tests failed: %s" % (program, p.stderr.strip()))
    return [line.strip() for line in p.stdout.splitlines() if line.strip()]


def gbench_figures(build, group, reps):
    name, flags, per_process = PROGRAMS[group]
    program = build / "bin" / name
    if not program.exists():
        fail("%s is missing: build with the benchmarks (scripts/build.sh)" % program)
    runs = [[]]
    if per_process:
        runs = [["--benchmark_filter=^%s$" % b] for b in benchmark_names(program)]
    figures = {}
    for extra in runs:
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            argv = [str(program), *flags, *extra, "--benchmark_out=" + out.name, "--benchmark_out_format=json"]
            if reps > 1 and not per_process:
                argv += ["--benchmark_repetitions=%d" % reps, "--benchmark_report_aggregates_only=true"]
            p = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if p.returncode != 0:
                fail("%s failed (%d): %s" % (" ".join(argv), p.returncode, p.stderr.strip()[-2000:]))
            data = json.load(open(out.name))
        for b in data.get("benchmarks", []):
            if b.get("error_occurred"):
                fail("%s %s: %s" % (name, b.get("name"), b.get("error_message")))
            if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
                continue
            base = "%s: %s" % (name, b.get("run_name", b["name"]))
            figures[base + ": time %s" % b.get("time_unit", "ns")] = b["real_time"]
            for key, value in b.items():
                if key in ("real_time", "cpu_time", "iterations", "repetitions", "repetition_index", "threads",
                           "family_index", "per_family_instance_index") or not isinstance(value, (int, float)):
                    continue
                figures["%s: %s" % (base, key)] = value
    return figures


def record(args):
    build = Path(args.build)
    groups = [g for g in args.groups.split(",") if g]
    for g in groups:
        if g != "cli" and g not in PROGRAMS:
            fail("unknown group '%s' (expected cli, %s)" % (g, ", ".join(PROGRAMS)))
    if not MODEL.exists():
        fail("missing asset %s; run scripts/fetch-assets" % MODEL)
    if args.out and os.path.lexists(args.out):
        fail("--out %s exists (a run is never overwritten; choose another name)" % args.out)
    if args.out and not os.path.isdir(os.path.dirname(os.path.abspath(args.out))):
        fail("--out %s: its folder does not exist" % args.out)
    if not groups:
        fail("--groups names no group (expected some of cli, %s)" % ", ".join(PROGRAMS))
    result = {
        "schema": SCHEMA,
        "commit": args.commit or git("rev-parse", "HEAD"),
        "dirty": False if args.commit else bool(git("status", "--porcelain", "--untracked-files=no")),
        "build": str(build.resolve()),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "load_average_before": list(os.getloadavg()),
        "repetitions": args.reps,
        "groups": groups,
        "figures": {},
    }
    for g in groups:
        print("bench: %s ..." % g, file=sys.stderr, flush=True)
        result["figures"].update(cli_figures(build, args.reps) if g == "cli" else gbench_figures(build, g, args.reps))
    result["load_average_after"] = list(os.getloadavg())
    text = json.dumps(result, indent=1, sort_keys=True) + "\n"
    if args.out:
        try:
            with open(args.out, "x") as f:  # never over a file that appeared meanwhile
                f.write(text)
        except OSError as e:
            sys.stdout.write(text)  # the measurements are not lost
            fail("--out %s: %s (the run was printed on stdout instead)" % (args.out, e))
        print("bench: wrote %s (%d figures)" % (args.out, len(result["figures"])), file=sys.stderr)
    else:
        sys.stdout.write(text)


MAX_RUN_BYTES = 16 << 20  # a run's JSON is a few kB


def load_run(path):
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            fail("%s: not a regular file" % path)
        if st.st_size > MAX_RUN_BYTES:
            fail("%s: %d bytes, more than a bench run holds (%d)" % (path, st.st_size, MAX_RUN_BYTES))
        with open(path, "rb") as f:
            data = json.loads(f.read(MAX_RUN_BYTES + 1))
    except (OSError, ValueError) as e:
        fail("%s: %s" % (path, e))
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("figures"), dict):
        fail("%s: not a %s file (written by scripts/bench.sh)" % (path, SCHEMA))
    for k, v in data["figures"].items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            fail("%s: figure '%s' is %r, not a number" % (path, k, v))
    if not isinstance(data.get("machine", {}), dict):
        fail("%s: 'machine' is not an object" % path)
    return data


def compare(a_path, b_path, threshold):
    a, b = load_run(a_path), load_run(b_path)
    if os.path.realpath(a_path) == os.path.realpath(b_path):
        print("note: A and B are the same file")
    for tag, r in (("A", a), ("B", b)):
        print("%s: %s commit %s%s, %s, load average %s -> %s" % (
            tag, r.get("date"), (r.get("commit") or "?")[:10], " (dirty)" if r.get("dirty") else "",
            r.get("machine", {}).get("cpu"), r.get("load_average_before"), r.get("load_average_after")))
    common = [k for k in a["figures"] if k in b["figures"]]
    if not common:
        fail("the two runs have no figure in common")
    print("\n| figure | A | B | B / A | |\n|---|---:|---:|---:|---|")
    for k in sorted(common):
        x, y = a["figures"][k], b["figures"][k]
        ratio = y / x if x else float("nan")
        mark = ""
        changed = abs(y - x) > resolution(k) and (abs(ratio - 1) > threshold if x else y != x)
        if changed and direction(k):
            better = (y > x) == (direction(k) == "higher")
            mark = "better" if better else "WORSE"
        print("| %s | %.4g | %.4g | %s | %s |" % (k, x, y, "%.3f" % ratio if x else "n/a (A is 0)", mark))
    only = sorted(set(a["figures"]) ^ set(b["figures"]))
    if only:
        print("\n%d figures in only one run (not compared)" % len(only))


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `--compare A B | head` ends quietly
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=str(REPO / "build"), help="build folder (default build/)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions per figure (default 3)")
    ap.add_argument("--groups", default=",".join(DEFAULT_GROUPS),
                    help="comma-separated groups: cli, forward, decode_budget, memory, packed_attention, profile "
                         "(default %(default)s)")
    ap.add_argument("--out", help="write the JSON here instead of stdout (never over an existing file)")
    ap.add_argument("--commit", help="the commit --build was built from, when it is not this tree's HEAD")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two runs' JSON files")
    ap.add_argument("--threshold", type=float, default=0.05, help="relative change marked by --compare (0.05)")
    args = ap.parse_args()
    if args.reps < 1 or args.reps > 100:
        fail("--reps %d: must be in [1, 100]" % args.reps)
    if not 0 <= args.threshold < 10:
        fail("--threshold %g: must be in [0, 10)" % args.threshold)
    if args.compare:
        compare(*args.compare, args.threshold)
    else:
        record(args)


if __name__ == "__main__":
    main()
