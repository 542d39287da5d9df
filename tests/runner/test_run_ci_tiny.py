"""`ripplekv run` end to end on SmolLM2 with configs/ci-tiny.toml: outputs, --resume doing no work, shards merged
equal to one run (every field but timings), an interrupted run resuming without redoing finished cells, and a
changed config refused by --resume. Skips (exit 77) without the assets, except under CI=true."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

BIN = os.environ["RIPPLEKV_BIN"]
SRC = os.environ["RKV_SOURCE_DIR"]
CONFIG = os.path.join(SRC, "configs", "ci-tiny.toml")
CACHE = os.environ.get("RIPPLEKV_CACHE") or os.path.expanduser("~/.cache/ripplekv")
MODEL = os.path.join(CACHE, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
TIMING = {"seconds", "compress_seconds", "decode_tokens_per_second"}


def run(*args, check=True):
    p = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=1200)
    if check and p.returncode != 0:
        raise AssertionError("ripplekv %s failed (%d): %s" % (" ".join(args), p.returncode, p.stderr))
    return p


def results(folder):
    with open(os.path.join(folder, "results.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    for r in rows:
        for k in TIMING:
            r.pop(k, None)
    return sorted(rows, key=lambda r: (r["cell_id"], r["task"], r["metric"]))


class CiTinyRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(MODEL):
            if os.environ.get("CI") == "true":
                raise AssertionError("missing asset %s (CI=true); run scripts/fetch-assets" % MODEL)
            print("skipping: missing asset %s; run scripts/fetch-assets" % MODEL)
            sys.exit(77)
        cls.tmp = tempfile.mkdtemp(prefix="rkv-run-")
        cls.full = os.path.join(cls.tmp, "full")
        run("run", CONFIG, "--out", cls.full, "--quiet")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_outputs(self):
        rows = results(self.full)
        keys = {"run_id", "cell", "signal", "scorer", "allocator", "budget_fraction", "budget_total", "task", "metric",
                "value", "ci_low", "ci_high", "n", "warnings", "kv_bytes", "kv_bytes_full", "config_sha256",
                "model_sha256", "backend"}
        for r in rows:
            self.assertTrue(keys <= set(r), keys - set(r))
        cells = {r["cell_id"] for r in rows}
        self.assertEqual(len(cells), 7)  # full cache + 3 allocators x 2 budgets
        for r in rows:
            if r["metric"] == "kl" and r["allocator"] is None:
                self.assertEqual(r["value"], 0.0)  # the full cache against itself
            if r["metric"] == "kl" and r["allocator"] is not None:
                self.assertGreater(r["value"], 0.0)
                self.assertLessEqual(r["ci_low"], r["value"])
                self.assertLessEqual(r["value"], r["ci_high"])
                self.assertLess(r["kv_bytes"], r["kv_bytes_full"])
        for name in ("examples.jsonl", "budgets.json", "profile.json", "report.md", "plots/profile.png"):
            self.assertTrue(os.path.exists(os.path.join(self.full, name)), name)
        with open(os.path.join(self.full, "budgets.json")) as f:
            budgets = json.load(f)
        for cell in budgets.values():
            for e in cell["examples"]:
                if cell["label"] != "full cache":
                    self.assertEqual(sum(e["budgets"]), e["B"])  # every layer compressible: sum of b_l is B

    def test_resume_does_no_work(self):
        p = run("run", CONFIG, "--out", self.full, "--resume")
        self.assertIn("0 cells computed", p.stderr)

    def test_shards_merged_equal_one_run(self):
        a, b, m = (os.path.join(self.tmp, n) for n in ("shard1", "shard2", "merged"))
        run("run", CONFIG, "--out", a, "--shard", "1/2", "--quiet")
        run("run", CONFIG, "--out", b, "--shard", "2/2", "--quiet")
        run("merge", a, b, "--out", m, "--quiet")
        self.assertEqual(results(m), results(self.full))

    def test_interrupted_run_resumes_without_redoing_finished_cells(self):
        out = os.path.join(self.tmp, "interrupted")
        proc = subprocess.Popen([BIN, "run", CONFIG, "--out", out, "--quiet"], stderr=subprocess.PIPE, text=True)
        cells = os.path.join(out, "cells")
        deadline = time.time() + 900
        while time.time() < deadline and proc.poll() is None:
            if os.path.isdir(cells) and len([f for f in os.listdir(cells) if f.endswith(".json")]) >= 2:
                break
            time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        finished = [f for f in os.listdir(cells) if f.endswith(".json")]
        self.assertGreaterEqual(len(finished), 2)
        p = run("run", CONFIG, "--out", out, "--resume")
        self.assertIn("%d cells computed" % (7 - len(finished)), p.stderr)
        self.assertEqual(results(out), results(self.full))

    def test_resume_refuses_a_changed_config(self):
        out = os.path.join(self.tmp, "changed")
        shutil.copytree(self.full, out)
        changed = os.path.join(self.tmp, "changed.toml")
        with open(CONFIG) as f:
            text = f.read().replace("continuation_tokens = 16", "continuation_tokens = 17")
        with open(changed, "w") as f:
            f.write(text.replace('"${RIPPLEKV_CACHE}', '"${RIPPLEKV_CACHE}'))
        p = run("run", changed, "--out", out, "--resume", check=False)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("the non-swept part of the config has changed", p.stderr)

    def test_existing_output_without_resume_is_refused(self):
        p = run("run", CONFIG, "--out", self.full, check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("already holds a run", p.stderr)


if __name__ == "__main__":
    unittest.main()
