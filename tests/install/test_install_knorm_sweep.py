"""The out-of-tree knorm scorer in a real run: install this build into a temporary prefix, build
plugins/examples/knorm against it with plain CMake, and run a tiny sweep of configs/ci-tiny.toml's settings
(lm_fidelity only, 2 evaluation examples of 256 tokens, uniform allocator, budget fraction 0.2) over
scorer = snapkv and keynorm (the knorm example's id, org.example.scorer.keynorm) with the INSTALLED CLI, loaded
through RIPPLEKV_PLUGIN_PATH. Checks that both scorers
have a cell with a finite KL > 0 to the full cache and that the two KLs differ. Skips (exit 77) without SmolLM2,
except under CI=true."""
import json
import math
import os
import shutil
import sys
import tempfile
import unittest

import install_helpers as H

CACHE = os.environ.get("RIPPLEKV_CACHE") or os.path.expanduser("~/.cache/ripplekv")
MODEL = os.path.join(CACHE, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")

CONFIG = """\
# configs/ci-tiny.toml, smaller: a sweep of a built-in and a third-party scorer
[model]
path = {model}
backend = "cpu"
threads = 2

[data.calibration]
files = ["austen:emma", "austen:mansfieldpark", "austen:persuasion"]
examples = 2
prefix_tokens = 256
window_tokens = 16
seed = 0

[data.eval]
files = ["austen:prideprejudice", "austen:sensesensibility", "austen:northangerabbey"]
examples = 2
prefix_tokens = 256
seed = 1

[scorer]
plugin = "snapkv"
[scorer.snapkv]
window = 16

[allocator]
plugin = "uniform"

[budget]
fraction = 0.2

[tasks]
run = ["lm_fidelity"]
[tasks.lm_fidelity]
continuation_tokens = 16

[sweep]
"scorer.plugin" = ["snapkv", "keynorm"]

[output]
bootstrap_resamples = 100
"""


class KnormSweep(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(MODEL):
            if os.environ.get("CI") == "true":
                raise AssertionError("missing asset %s (CI=true); run scripts/fetch-assets" % MODEL)
            print("skipping: missing asset %s; run scripts/fetch-assets" % MODEL)
            sys.exit(77)
        cls.tmp = tempfile.mkdtemp(prefix="rkv-knorm-sweep-")
        cls.prefix = os.path.join(cls.tmp, "prefix")
        H.install(cls.prefix)
        cls.knorm_build = os.path.join(cls.tmp, "knorm-build")
        H.build_knorm(cls.prefix, cls.knorm_build)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_sweep_beside_snapkv(self):
        config = os.path.join(self.tmp, "knorm-sweep.toml")
        with open(config, "w") as f:
            f.write(CONFIG.format(model=json.dumps(MODEL)))
        out = os.path.join(self.tmp, "out")
        env = H.clean_env(RIPPLEKV_PLUGIN_PATH=self.knorm_build)
        H.check([H.cli(self.prefix), "run", config, "--out", out, "--quiet"], "installed ripplekv run", env=env,
                cwd=self.tmp, timeout=800)
        with open(os.path.join(out, "results.jsonl")) as f:
            rows = [json.loads(line) for line in f]
        kl = {}
        for r in rows:
            if r["task"] == "lm_fidelity" and r["metric"] == "kl" and r["scorer"] is not None:
                kl[r["scorer"]["id"]] = r
        self.assertEqual(set(kl), {"org.ripplekv.scorer.snapkv", H.KNORM_ID}, rows)
        for sid, r in kl.items():
            self.assertTrue(math.isfinite(r["value"]) and r["value"] > 0.0, (sid, r["value"]))
            self.assertEqual(r["allocator"]["id"], "org.ripplekv.allocator.uniform")
            self.assertEqual(r["budget_fraction"], 0.2)
            self.assertLess(r["kv_bytes"], r["kv_bytes_full"])
        # the cell records the plugin as loaded: knorm's library is the out-of-tree build's
        self.assertEqual(kl[H.KNORM_ID]["scorer"]["version"], "1.0.0")
        self.assertNotEqual(kl[H.KNORM_ID]["value"], kl["org.ripplekv.scorer.snapkv"]["value"])


if __name__ == "__main__":
    unittest.main()
