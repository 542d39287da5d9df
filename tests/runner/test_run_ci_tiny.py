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
import tomllib
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

    def test_headline(self):
        # The first screen of report.md, golden against what is known of the run independently of ripplekv: the
        # GGUF's general.name and SmolLM2-135M's shape (HF config.json: 30 layers, 9 heads, 3 KV heads, hidden 576
        # = 9 x 64, 8192 positions; 134.5M parameters on its model card), ci-tiny.toml's n, T and budgets.
        with open(os.path.join(self.full, "report.md")) as f:
            report = f.read()
        head = report[report.index("## Headline"):report.index("### lm_fidelity: ranked by kl")]
        self.assertIn("- **Model** Smollm2 135M 8k Lc100K Mix1 Ep2 (`SmolLM2-135M-Instruct.Q4_1.gguf`): llama, "
                      "134.5M parameters, 30 layers, 9 heads / 3 KV heads (GQA group 3), head dim 64, "
                      "trained context 8192\n", head)
        self.assertIn("- **Task** lm_fidelity: n = 2, T = 256 tokens; continuation = \"teacher-forced\", "
                      "continuation_tokens = 16, prefix_tokens = 256\n", head)
        self.assertIn("- **Task** needle: n = 2, T = ", head)  # 2 trials at 256 context tokens, chat-templated
        self.assertIn("- **Budgets** 0.2, 0.5 (budget.fraction", head)
        self.assertIn("; 7 cells\n- **Baseline** uniform: ", head)
        # Ranking: within each budget, kl ascends (lower is better) and needle accuracy descends; 3 cells each.
        for task, metric, lower in (("lm_fidelity", "kl", True), ("needle", "accuracy", False)):
            for budget in ("0.2", "0.5"):
                title = "### %s: ranked by %s (%s is better), at budget %s\n" % (
                    task, metric, "lower" if lower else "higher", budget)
                table = report[report.index(title):].split("\n\n")[1]
                rows = [r for r in table.splitlines() if r.startswith("| ") and not r.startswith("| rank")]
                self.assertTrue(rows[0].startswith("| ref | full cache | "), rows[0])
                ranked = rows[1:]
                self.assertEqual(len(ranked), 3)
                for r in ranked:
                    self.assertIn("@ f=%s |" % budget, r)
                values = [float(r.split(" | ")[2].split(" ")[0]) for r in ranked]
                self.assertEqual(values, sorted(values, reverse=not lower), table)
                # competition ranking: a rank is 1 + the rows strictly better (ties share it: needle's zeros)
                ranks = [int(r.split(" | ")[0].lstrip("| ")) for r in ranked]
                better = [sum(1 for w in values if (w < v if lower else w > v)) for v in values]
                self.assertEqual(ranks, [1 + b for b in better], table)
        # ppl_full once, under the lm_fidelity table, with one CI.
        self.assertEqual(report.count("ppl_full = "), 1)
        self.assertNotIn("| ppl_full |", report)

    def test_compare_across_models_and_settings(self):
        # Another model (Gemma 3 270M) on the same config: cells align by label, unpaired (its tokenizer gives other
        # token ids). The same model with a shorter lm_fidelity continuation: needle's prompts are the same token ids,
        # so paired; lm_fidelity's inputs (prefix + continuation) differ, so unpaired.
        gemma = os.path.join(CACHE, "models", "gemma-3-270m-q4_k_m.gguf")
        if not os.path.exists(gemma):
            self.skipTest("missing asset %s" % gemma)
        other = os.path.join(self.tmp, "gemma")
        short = os.path.join(self.tmp, "short")
        run("run", CONFIG, "--out", other, "--quiet", "--set", 'model.path="%s"' % gemma)
        run("run", CONFIG, "--out", short, "--quiet", "--set", "tasks.lm_fidelity.continuation_tokens=8")
        out = os.path.join(self.tmp, "compare")
        run("compare", self.full, other, short, "--out", out, "--name", "smol", "--name", "gemma", "--name", "short")
        with open(os.path.join(out, "report.md")) as f:
            report = f.read()
        self.assertIn("| cell | smol | gemma | short | gemma - smol | short - smol |", report)
        self.assertIn("Gemma 3 270m (`gemma-3-270m-q4_k_m.gguf`): gemma3, ", report)
        # the runs table says what differs from the first run's recorded config
        short_row = [line for line in report.splitlines() if line.startswith("| short |")][0]
        self.assertTrue(short_row.endswith("| tasks.lm_fidelity.continuation_tokens: 16 -> 8 |"), short_row)
        # a figure per task and method, one line per run
        self.assertIn("![lm_fidelity kl, uniform + snapkv](plots/lm_fidelity_kl_uniform___snapkv.png)", report)
        self.assertTrue(os.path.exists(os.path.join(out, "plots", "lm_fidelity_kl_uniform___snapkv.png")))
        with open(os.path.join(out, "comparison.jsonl")) as f:
            rows = [json.loads(line) for line in f]
        labels = {r["cell"] for r in rows}
        self.assertEqual(len(labels), 7)  # the same 7 labels in all three runs
        for r in rows:
            self.assertEqual(r["cell"] in labels, True)
            if r["run"] == "smol":
                self.assertNotIn("difference", r)
            else:
                self.assertEqual(r["difference"]["paired"], r["run"] == "short" and r["task"] == "needle", r)
        by = {(r["run"], r["cell"], r["task"], r["metric"]): r for r in rows}
        a = by[("smol", "uniform + snapkv @ f=0.2", "lm_fidelity", "kl")]
        b = by[("gemma", "uniform + snapkv @ f=0.2", "lm_fidelity", "kl")]
        self.assertAlmostEqual(b["difference"]["value"], b["value"] - a["value"], places=12)  # unpaired: of means
        # The output folder is ripplekv's own now (compare.json): a second compare into it is accepted; an input is not.
        run("compare", self.full, short, "--out", out, "--quiet")
        p = run("compare", self.full, short, "--out", short, check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("is the input", p.stderr)

    def test_sweep_over_models_and_seeds_runs_each_and_compares_them(self):
        # [sweep] "model.path" x "data.eval.seed": one ordinary run per combination under runs/, then the runs side by
        # side. The second model is a copy of the file under another name, so its runs must equal the first's
        # example for example (paired, zero difference); another seed draws other windows (unpaired). The run of
        # seed 1 on SmolLM2 is ci-tiny's own run with a smaller sweep: its cell equals the full run's cell exactly.
        link = os.path.join(self.tmp, "smol-link.gguf")  # a copy: a link to the same file is refused as a repeat
        if not os.path.exists(link):
            shutil.copyfile(MODEL, link)
        out = os.path.join(self.tmp, "sweep")
        sets = ["--set", 'sweep."model.path"=["%s", "%s"]' % (MODEL, link), "--set", 'sweep."data.eval.seed"=[1, 2]',
                "--set", 'sweep."allocator.plugin"=["uniform"]', "--set", 'sweep."budget.fraction"=[0.2]']
        p = run("validate", CONFIG, *sets)
        self.assertIn("4 runs over data.eval.seed and model.path", p.stdout)
        run("run", CONFIG, "--out", out, "--quiet", *sets)
        names = ["SmolLM2-135M-Instruct.Q4_1_seed-1", "SmolLM2-135M-Instruct.Q4_1_seed-2", "smol-link_seed-1",
                 "smol-link_seed-2"]
        with open(os.path.join(out, "runs.json")) as f:
            record = json.load(f)
        self.assertEqual([r["name"] for r in record["runs"]], names)
        self.assertEqual(record["runs"][3]["values"], {"model.path": link, "data.eval.seed": 2})
        self.assertEqual(sorted(os.listdir(os.path.join(out, "runs"))), sorted(names))
        with open(os.path.join(out, "runs", names[3], "config.toml"), "rb") as f:
            cfg = tomllib.load(f)
        self.assertEqual(cfg["data"]["eval"]["seed"], 2)
        self.assertEqual(cfg["model"]["path"], link)
        self.assertEqual(cfg["sweep"], {"allocator.plugin": ["uniform"], "budget.fraction": [0.2]})
        label = "uniform + snapkv @ f=0.2"
        full = {(r["task"], r["metric"]): r["value"] for r in results(self.full) if r["cell"] == label}
        own = {(r["task"], r["metric"]): r["value"] for r in results(os.path.join(out, "runs", names[0]))
               if r["cell"] == label}
        self.assertEqual(own, full)
        with open(os.path.join(out, "comparison.jsonl")) as f:
            rows = [json.loads(line) for line in f]
        by = {(r["run"], r["cell"], r["task"], r["metric"]): r for r in rows}
        for task, metric in (("lm_fidelity", "kl"), ("needle", "accuracy")):
            link1 = by[(names[2], label, task, metric)]["difference"]
            self.assertTrue(link1["paired"])
            self.assertEqual(link1["value"], 0.0)
            # needle draws its prompts with its own seed ([tasks.needle] seed), so only lm_fidelity changes with
            # data.eval.seed
            self.assertEqual(by[(names[1], label, task, metric)]["difference"]["paired"], task == "needle")
        self.assertNotEqual(by[(names[1], label, "lm_fidelity", "kl")]["value"],
                            by[(names[0], label, "lm_fidelity", "kl")]["value"])
        with open(os.path.join(out, "report.md")) as f:
            report = f.read()
        self.assertIn("| run | data.eval.seed | model.path |\n", report)
        self.assertIn("| smol-link_seed-2 | 2 | %s |\n" % link, report)
        self.assertIn("| cell | %s |" % " | ".join(names), report)
        # --resume computes nothing; a second run into the folder without it is refused; --shard is refused
        p = run("run", CONFIG, "--out", out, "--resume", *sets)
        self.assertIn("0 cells computed, 8 skipped", p.stderr)
        p = run("run", CONFIG, "--out", out, *sets, check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("already holds a sweep of runs (runs.json)", p.stderr)
        # a refused --resume (a changed key) leaves runs.json as it was; the list reversed resumes into the same folders
        with open(os.path.join(out, "runs.json"), "rb") as f:
            before = f.read()
        p = run("run", CONFIG, "--out", out, "--resume", *sets, "--set", "tasks.lm_fidelity.continuation_tokens=8",
                check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("(run SmolLM2-135M-Instruct.Q4_1_seed-1 of the sweep)", p.stderr)
        with open(os.path.join(out, "runs.json"), "rb") as f:
            self.assertEqual(f.read(), before)
        reversed_sets = list(sets)
        reversed_sets[1] = 'sweep."model.path"=["%s", "%s"]' % (link, MODEL)
        p = run("run", CONFIG, "--out", out, "--resume", *reversed_sets)
        self.assertIn("0 cells computed, 8 skipped", p.stderr)
        # an ordinary run, or a comparison, into the sweep's folder would overwrite its report: refused
        p = run("run", CONFIG, "--out", out, check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("holds a sweep of runs (runs.json)", p.stderr)
        p = run("compare", os.path.join(out, "runs", names[0]), os.path.join(out, "runs", names[1]), "--out", out,
                check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("holds a run, merge or sweep of runs of its own", p.stderr)
        # a sweep stopped before its comparison: runs.json alone makes the folder ripplekv's, --resume completes it
        for name in ("compare.json", "report.md", "comparison.jsonl"):
            os.remove(os.path.join(out, name))
        p = run("run", CONFIG, "--out", out, "--resume", *sets)
        self.assertIn("0 cells computed", p.stderr)
        self.assertTrue(os.path.exists(os.path.join(out, "report.md")))
        p = run("run", CONFIG, "--out", os.path.join(self.tmp, "sweep-shard"), "--shard", "1/2", *sets, check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--shard splits one run's cells", p.stderr)

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

    def test_resume_with_an_extended_sweep_computes_only_the_new_cells(self):
        out = os.path.join(self.tmp, "extended")
        shutil.copytree(self.full, out)
        extended = os.path.join(self.tmp, "extended.toml")
        with open(CONFIG) as f:
            text = f.read().replace('"budget.fraction" = [0.2, 0.5]', '"budget.fraction" = [0.2, 0.5, 0.8]')
        with open(extended, "w") as f:
            f.write(text)
        p = run("run", extended, "--out", out, "--resume")
        self.assertIn("3 cells computed", p.stderr)
        rows = results(out)
        self.assertEqual(len({r["cell_id"] for r in rows}), 10)
        old = {(r["cell_id"], r["task"], r["metric"]): r["value"] for r in results(self.full)}
        for r in rows:
            key = (r["cell_id"], r["task"], r["metric"])
            if key in old:
                self.assertEqual(r["value"], old[key])

    def test_existing_output_without_resume_is_refused(self):
        p = run("run", CONFIG, "--out", self.full, check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("already holds a run", p.stderr)


if __name__ == "__main__":
    unittest.main()
