"""Writes tests/fixtures/squeezeattention/budgets.json: SqueezeAttention's own layer split on seeded layer
importances, read by tests/allocators/test_squeezeattention_fixture.cpp.

Run by tests/reference/make_squeezeattention_fixture.sh inside <cache>/venv-squeezeattention (numpy, scikit-learn);
never by scripts/test.sh. The split is the reference's own code: the lines of LlamaModel_squeeze.forward in
hetailang/SqueezeAttention utils_hh/modify_llama_drop.py from `ini_size = self.ini_size` up to (not including) its
`if self.mark == False:` are read from the checkout and executed as they are, with `torch.mean` served by numpy and
sklearn's KMeans given random_state = 0 and n_init = 50. The reference leaves KMeans unseeded with one k-means++
start, so its split is a random draw among local optima: with one seeded start it lands in a worse one on two of these
three prompts (within-cluster sum of squares 0.0740 against 0.0606, 0.0459 against 0.0425). The best of 50 starts is
the optimal split, the one ripplekv computes exactly (1-D k-means by dynamic programming).

Prompts (hidd_data: per layer, the cosine between the residual stream before and after attention of every token, the
reference's own input): three seeded draws, SmolLM2's 30 layers twice and Gemma 3 270M's 18 layers once, T = 1000
tokens, a rising trend of the per-layer mean cosine from about 0.55 to 0.97 with layer noise, and per-token noise
around it. ini_size 0.2 (the uniform fraction) and percent 0.1 (the reduced cluster's), so that B = ini_size T L and
the reference's windows int(a T), int(percent T) follow from its a and percent exactly.

budgets.json: per prompt the layer count, T, ini_size, percent, the means the reference clusters (float(mean)), its
three classes (layer indices, lowest centre first), a (the other layers' fraction) and its integer windows.
"""
import argparse
import json
import os
import re
from functools import partial
from types import SimpleNamespace

import numpy as np
import sklearn
from sklearn.cluster import KMeans

COMMIT = "a1933d1"
T = 1000
INI_SIZE, PERCENT = 0.2, 0.1
PROMPTS = [("smollm2", 30, 1), ("smollm2", 30, 2), ("gemma3_270m", 18, 3)]


def reference_block(src):
    text = open(os.path.join(src, "utils_hh", "modify_llama_drop.py")).read()
    start = text.index("            ini_size = self.ini_size")
    end = text.index("            if self.mark == False:", start)
    lines = text[start:end].splitlines()
    # dedent the method body's 12 spaces (a comment indented by fewer keeps its '#')
    return "\n".join(line[12:] if line.startswith(" " * 12) else line.lstrip() for line in lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", required=True, help="a hetailang/SqueezeAttention checkout at " + COMMIT)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures",
                                                  "squeezeattention", "budgets.json"))
    args = ap.parse_args()
    block = reference_block(args.src)
    out = {"comment": "written by tests/reference/make_squeezeattention_fixture.py", "commit": COMMIT,
           "kmeans": "sklearn KMeans(n_clusters=3, random_state=0, n_init=50)",
           "versions": {"numpy": np.__version__, "scikit-learn": sklearn.__version__}, "prompts": []}
    for model, L, seed in PROMPTS:
        rng = np.random.default_rng(seed)
        trend = np.linspace(0.55, 0.97, L) + rng.normal(0.0, 0.04, L)
        trend = np.minimum(trend, 0.995)
        hidd = {i: np.clip(trend[i] + rng.normal(0.0, 0.02, T), -1.0, 1.0).astype(np.float32) for i in range(L)}
        fake = SimpleNamespace(ini_size=INI_SIZE, percent=PERCENT, num_hidden_layers=L, sliding_windows=[0] * L)
        ns = {"self": fake, "hidd_data": hidd, "np": np, "KMeans": partial(KMeans, random_state=0, n_init=50),
              "torch": SimpleNamespace(mean=np.mean)}
        exec(compile(block, "modify_llama_drop.py (LlamaModel_squeeze.forward)", "exec"), ns)
        out["prompts"].append({
            "model": model, "layers": L, "T": T, "ini_size": INI_SIZE, "percent": PERCENT,
            "means": [float(x) for x in ns["hidd_data"]],
            "classes": [ns["class1_indices"].tolist(), ns["class2_indices"].tolist(), ns["class3_indices"].tolist()],
            "a": float(ns["a"]), "windows": [int(w) for w in fake.sliding_windows]})
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("make_squeezeattention_fixture: wrote %s (%d prompts, scikit-learn %s)" %
          (args.out, len(out["prompts"]), sklearn.__version__))


if __name__ == "__main__":
    main()
