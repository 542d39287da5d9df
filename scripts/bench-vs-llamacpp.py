#!/usr/bin/env python3
"""Decode and prefill speed of ripplekv beside llama.cpp on the same SmolLM2 Q4_1 GGUF, as a ratio table.

Builds llama.cpp's llama-bench once from the vendored source of the pinned llama-cpp-python sdist (the version in
scripts/requirements-llamacpp.txt; downloaded with pip, which checks it against the index) into <cache>/llama-bench-<version>/,
then runs, interleaved and --reps times per thread count, `llama-bench -p 512,2048 -n 128` (and `-d 2048 -n 128
-p 0`, decode at depth 2048, when this llama.cpp has -d) and ripplekv's bench_forward on the same shapes
(BM_Prefill, BM_DecodeRun, BM_Decode with model.weights = quantized). Prints medians (tok/s) and ripplekv / llama.cpp.
A timing script: never called from scripts/test.sh. Needs the assets of scripts/fetch-assets and a build with
bench_forward (scripts/build.sh), cmake and a C++ compiler.

Usage: scripts/bench-vs-llamacpp.py [--bench build/bin/bench_forward] [--threads 1,2] [--reps 3] [--build-only]
       scripts/bench-vs-llamacpp.py --long [--only prefill|decode] [--model GGUF] [--threads 2] [--reps 3]
       (cache: $RIPPLEKV_CACHE, default ~/.cache/ripplekv)

--long: long context on a 32K model (default Gemma 3 270M from scripts/fetch-assets): prefill at 4K, 16K and 32K
(`llama-bench -p N -n 0 -fa on` against bench_long_context's BM_PrefillLong) and 32 tokens decoded at depth 16K with
a float cache and a q8_0 cache (`llama-bench -p 0 -n 32 -d 16384 -fa on [-ctk q8_0 -ctv q8_0]`; llama.cpp's float
cache is f16, ripplekv's f32) against BM_DecodeAtDepth. One process per figure (a 32K prefill is minutes on 2 cores).
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("RIPPLEKV_CACHE") or Path.home() / ".cache" / "ripplekv")
MODEL = CACHE / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
FIGURES = ["prefill 512", "prefill 2048", "decode 128, empty context", "decode at depth 2048"]


def pinned_version():
    text = (REPO / "scripts" / "requirements-llamacpp.txt").read_text()
    m = re.search(r"^llama-cpp-python==(\S+)", text, re.M)
    if not m:
        sys.exit("bench-vs-llamacpp: no llama-cpp-python pin in scripts/requirements-llamacpp.txt")
    return m.group(1)


def fetch_sdist(version, dest):
    """The sdist, downloaded by pip (source only, no dependencies; pip checks it against the index's hash)."""
    found = sorted(dest.glob(f"llama_cpp_python-{version}.tar.gz"))
    if not found:
        print(f"bench-vs-llamacpp: pip download llama-cpp-python=={version} (sdist)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--dest",
                        str(dest), f"llama-cpp-python=={version}"], check=True)
        found = sorted(dest.glob(f"llama_cpp_python-{version}.tar.gz"))
    if not found:
        sys.exit(f"bench-vs-llamacpp: pip did not leave llama_cpp_python-{version}.tar.gz in {dest}")
    print(f"bench-vs-llamacpp: {found[0].name} sha256 {hashlib.sha256(found[0].read_bytes()).hexdigest()}",
          file=sys.stderr)
    return found[0]


def build_llama_bench(version):
    root = CACHE / f"llama-bench-{version}"
    exe = root / "build" / "bin" / "llama-bench"
    cache = root / "build" / "CMakeCache.txt"
    if exe.exists() and cache.exists() and "mno-amx-tile" in cache.read_text(errors="replace"):
        return exe
    if exe.exists():  # built before AMX tiles were turned off (it dies of SIGILL where they are denied): rebuild
        shutil.rmtree(root / "build")
    root.mkdir(parents=True, exist_ok=True)
    sdist = fetch_sdist(version, root)
    src = root / "src"
    if not src.exists():
        with tarfile.open(sdist) as t:
            t.extractall(src, filter="data")
    llama = next(src.glob("*/vendor/llama.cpp"))
    jobs = str(os.cpu_count() or 2)
    # No AMX tiles: -march=native turns them on where the CPU has them (Sapphire Rapids and later), but using them
    # needs the kernel's per-process permission (arch_prctl ARCH_REQ_XCOMP_PERM), which sandboxes such as this
    # project's machines deny: llama-bench then dies of SIGILL in tinygemm_kernel_amx (seen 2026-12-07 on a Xeon
    # with amx_int8). ripplekv uses no AMX either, so both sides run AVX-512/AVX2 code.
    no_amx = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    subprocess.run(["cmake", "-S", str(llama), "-B", str(root / "build"), "-DCMAKE_BUILD_TYPE=Release",
                    "-DLLAMA_CURL=OFF", "-DGGML_NATIVE=ON", "-DLLAMA_BUILD_TESTS=OFF",
                    "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF",
                    "-DCMAKE_C_FLAGS=" + no_amx, "-DCMAKE_CXX_FLAGS=" + no_amx], check=True)
    subprocess.run(["cmake", "--build", str(root / "build"), "--target", "llama-bench", "-j", jobs], check=True)
    return exe


def run_llama_bench(exe, threads, has_depth):
    """{figure: tok/s} from one llama-bench run per shape group (-r 1: the interleaving repeats it)."""
    out = {}
    runs = [["-p", "512,2048", "-n", "128"]]
    if has_depth:
        runs.append(["-p", "0", "-n", "128", "-d", "2048"])
    for extra in runs:
        res = subprocess.run([str(exe), "-m", str(MODEL), "-t", str(threads), "-r", "1", "-o", "json"] + extra,
                             check=True, capture_output=True, text=True)
        for row in json.loads(res.stdout):
            depth = row.get("n_depth", 0)
            if row["n_prompt"] > 0:
                out[f"prefill {row['n_prompt']}"] = row["avg_ts"]
            elif depth:
                out["decode at depth 2048"] = row["avg_ts"]
            else:
                out["decode 128, empty context"] = row["avg_ts"]
    return out


def run_ripplekv(bench, threads):
    env = dict(os.environ, RKV_BENCH_THREADS=str(threads))
    res = subprocess.run([str(bench), "--benchmark_filter=BM_(Prefill|DecodeRun|Decode)/.*/f32:0",
                          "--benchmark_format=json", "--benchmark_min_time=2"], check=True, capture_output=True,
                         text=True, env=env)
    out = {}
    for b in json.loads(res.stdout)["benchmarks"]:
        name, rate = b["name"], b["tok/s"]
        if name.startswith("BM_Prefill/n:"):
            out[f"prefill {name.split('/')[1].split(':')[1]}"] = rate
        elif name.startswith("BM_DecodeRun/"):
            out["decode 128, empty context"] = rate
        elif name.startswith("BM_Decode/depth:2048"):
            out["decode at depth 2048"] = rate
    return out


LONG_FIGURES = ["prefill 4096", "prefill 16384", "prefill 32768", "decode at depth 16384, float cache",
                "decode at depth 16384, q8_0 cache"]


def run_llama_bench_long(exe, model, threads, only):
    """{figure: tok/s} of the long-context shapes whose name starts with `only` ("" for all), one llama-bench
    process per figure (-r 1)."""
    shapes = {"prefill 4096": ["-p", "4096", "-n", "0"], "prefill 16384": ["-p", "16384", "-n", "0"],
              "prefill 32768": ["-p", "32768", "-n", "0"],
              "decode at depth 16384, float cache": ["-p", "0", "-n", "32", "-d", "16384"],
              "decode at depth 16384, q8_0 cache": ["-p", "0", "-n", "32", "-d", "16384", "-ctk", "q8_0", "-ctv",
                                                    "q8_0"]}
    out = {}
    for figure, extra in shapes.items():
        if not figure.startswith(only):
            continue
        res = subprocess.run([str(exe), "-m", str(model), "-t", str(threads), "-r", "1", "-fa", "on", "-o", "json"]
                             + extra, check=True, capture_output=True, text=True)
        out[figure] = json.loads(res.stdout)[0]["avg_ts"]
    return out


def run_ripplekv_long(bench, model, threads, only):
    env = dict(os.environ, RKV_BENCH_THREADS=str(threads), RKV_BENCH_GGUF=str(model))
    pattern = {"": ".", "prefill": "BM_PrefillLong", "decode": "BM_DecodeAtDepth"}[only]
    res = subprocess.run([str(bench), "--benchmark_format=json", "--benchmark_filter=" + pattern], check=True,
                         capture_output=True, text=True, env=env)
    out = {}
    for b in json.loads(res.stdout)["benchmarks"]:
        if b.get("error_occurred"):
            sys.exit(f"bench-vs-llamacpp: {b['name']}: {b.get('error_message')}")
        name, rate = b["name"], b["tok/s"]
        if name.startswith("BM_PrefillLong/T:"):
            out[f"prefill {name.split('/')[1].split(':')[1]}"] = rate
        elif name.startswith("BM_DecodeAtDepth/depth:16384/codec:0"):
            out["decode at depth 16384, float cache"] = rate
        elif name.startswith("BM_DecodeAtDepth/depth:16384/codec:1"):
            out["decode at depth 16384, q8_0 cache"] = rate
    return out


def print_table(figures, threads, samples, reps):
    med = {k: statistics.median(v) if v else None for k, v in samples.items()}
    head = "| figure |" + "".join(f" llama.cpp {t}t | ripplekv {t}t | ratio |" for t in threads)
    print(head)
    print("|---|" + "---|---|---|" * len(threads))
    for f in figures:
        cells = []
        for t in threads:
            l, r = med[("llama.cpp", t, f)], med[("ripplekv", t, f)]
            cells += [f"{l:.1f}" if l else "n/a", f"{r:.1f}" if r else "n/a",
                      f"{r / l:.2f}x" if l and r else "n/a"]
        print(f"| {f} | " + " | ".join(cells) + " |")
    print(f"(tok/s, medians of {reps} interleaved runs; load average now {os.getloadavg()[0]:.2f})")


def main_long(a):
    model = Path(a.model) if a.model else CACHE / "models" / "gemma-3-270m-q4_k_m.gguf"
    bench = Path(a.bench) if a.bench else REPO / "build" / "bin" / "bench_long_context"
    if not model.exists():
        sys.exit(f"bench-vs-llamacpp: missing {model}; run scripts/fetch-assets or pass --model")
    if not bench.exists():
        sys.exit(f"bench-vs-llamacpp: missing {bench}; build first (scripts/build.sh)")
    exe = build_llama_bench(pinned_version())
    threads = [int(t) for t in a.threads.split(",")]
    samples = {(who, t, f): [] for who in ("llama.cpp", "ripplekv") for t in threads for f in LONG_FIGURES}
    for rep in range(a.reps):
        for t in threads:
            for who, fn in (("llama.cpp", lambda: run_llama_bench_long(exe, model, t, a.only)),
                            ("ripplekv", lambda: run_ripplekv_long(bench, model, t, a.only))):
                load = os.getloadavg()[0]
                for f, v in fn().items():
                    samples[(who, t, f)].append(v)
                print(f"[rep {rep + 1}/{a.reps}] {who} {t} thread(s) done (load average before: {load:.2f})",
                      file=sys.stderr, flush=True)
    print(f"model: {model.name}")
    print_table([f for f in LONG_FIGURES if f.startswith(a.only)], threads, samples, a.reps)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", default=None,
                    help="the ripplekv bench program (default build/bin/bench_forward; --long: bench_long_context)")
    ap.add_argument("--threads", default=None, help="comma-separated thread counts (default 1,2; --long: 2)")
    ap.add_argument("--reps", type=int, default=3, help="interleaved repetitions; the table gives medians (default 3)")
    ap.add_argument("--build-only", action="store_true", help="build llama-bench and stop")
    ap.add_argument("--long", action="store_true", help="long-context prefill and decode on a 32K model (see above)")
    ap.add_argument("--model", default=None, help="--long: the GGUF (default Gemma 3 270M)")
    ap.add_argument("--only", choices=["prefill", "decode"], default="",
                    help="--long: only the prefill or only the decode figures")
    a = ap.parse_args()
    if a.reps < 1:
        ap.error("--reps must be at least 1")
    if not a.long and (a.only or a.model):
        ap.error("--only and --model go with --long")
    if a.threads is not None:
        try:
            if not all(int(t) >= 1 for t in a.threads.split(",")):
                raise ValueError
        except ValueError:
            ap.error(f"--threads {a.threads!r}: expected comma-separated positive integers, e.g. 1,2")
    if a.build_only:
        print(build_llama_bench(pinned_version()))
        return
    if a.long:
        a.threads = a.threads or "2"
        main_long(a)
        return
    a.threads = a.threads or "1,2"
    a.bench = a.bench or str(REPO / "build" / "bin" / "bench_forward")
    if not MODEL.exists():
        sys.exit(f"bench-vs-llamacpp: missing {MODEL}; run scripts/fetch-assets")
    if not Path(a.bench).exists():
        sys.exit(f"bench-vs-llamacpp: missing {a.bench}; build first (scripts/build.sh)")
    exe = build_llama_bench(pinned_version())
    has_depth = "-d, --n-depth" in subprocess.run([str(exe), "--help"], capture_output=True, text=True).stdout
    threads = [int(t) for t in a.threads.split(",")]
    samples = {(who, t, f): [] for who in ("llama.cpp", "ripplekv") for t in threads for f in FIGURES}
    for rep in range(a.reps):
        for t in threads:
            for who, fn in (("llama.cpp", lambda: run_llama_bench(exe, t, has_depth)),
                            ("ripplekv", lambda: run_ripplekv(a.bench, t))):
                load = os.getloadavg()[0]
                for f, v in fn().items():
                    samples[(who, t, f)].append(v)
                print(f"[rep {rep + 1}/{a.reps}] {who} {t} thread(s) done (load average before: {load:.2f})",
                      file=sys.stderr)
    print_table(FIGURES, threads, samples, a.reps)


if __name__ == "__main__":
    main()
