"""Writes tests/fixtures/dynamickv/: DynamicKV's own layer budgets on seeded attention layers.

Run by tests/reference/make_dynamickv_fixture.sh inside <cache>/venv-kvpress (torch on the CPU); never by
scripts/test.sh. The C++ side reads the fixture in tests/allocators/test_dynamickv.cpp.

The reference is DreamMr/DynamicKV at 8ab3c08: kv_compression/token_drop/methods/dynamic_v11.py, imported as it is
(its unused `import jsonlines` served by an empty module). Per case and layer, its DynamicKVClusterV11
.budget_compute_per_layer(key_states, query_states, value_states, None) scores the layer (the window's attention,
summed and avg-pooled) and keeps each head's top budget_size positions; after every layer u with u % 4 == 3
(llama_model_impl/dynamickv_v11.py, the call site, whose loop this script repeats line for line) its
.update_and_reset_budget(...) re-decides every layer so far. ripplekv re-decides after the last layer too
(allocators/dynamickv): `lengths` are the reference's with that one call added (which changes nothing when the layer
count is a multiple of 4), `lengths_unpatched` the reference's as it is. Each layer's values carry their position, so
the cache each layer ends with names its kept positions: `lengths` count what each layer stores before its window,
`distinct` the positions before the window among them (a later decision that gives a layer more than an earlier one
left it makes the reference's cut k[:fix] run into the window, storing window entries twice; ripplekv keeps the
distinct entries, so it is checked against `distinct`).

Layers: queries [1, H, T, d] ~ N(0, 1) x a per-layer temperature in [0.3, 3] (peaked and flat layers), keys ~ N(0, 1)
with a few heavy positions per layer, d = 16; torch.manual_seed per case.

Files written:
  scores.f32     float32 little-endian: each case's scores [L, H, T - window] (the reference's attn_cache per layer,
                 the positions before the window), cases one after another
  budgets.json   per case: the shape, window, capacity (the reference's max_capacity_prompt), ratio_max, kernel size,
                 budget_size, the float offset of its scores in scores.f32, lengths, distinct, lengths_unpatched
"""
import argparse
import contextlib
import importlib.util
import io
import json
import os
import sys
import types

import numpy as np
import torch

COMMIT = "8ab3c08"
D = 16
KERNEL = 5
# name, layers, heads, T, window, capacity, ratio_max, seed
CASES = [
    ("smollm2 shape, capacity 19 of 96", 30, 3, 96, 8, 19, 10.0, 1),
    ("smollm2 shape, capacity 48 of 96", 30, 3, 96, 8, 48, 10.0, 2),
    ("smollm2 shape, capacity 12 of 96 (budget_size below T')", 30, 3, 96, 8, 12, 10.0, 3),
    ("gemma3-270m shape, capacity 19 of 96", 18, 1, 96, 8, 19, 10.0, 4),
    ("llama shape (32 layers), capacity 16 of 64", 32, 8, 64, 8, 16, 10.0, 5),
]


def load_reference(src):
    sys.modules.setdefault("jsonlines", types.ModuleType("jsonlines"))  # imported, never used by the class
    path = os.path.join(src, "kv_compression", "token_drop", "methods", "dynamic_v11.py")
    spec = importlib.util.spec_from_file_location("dynamic_v11", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    call_site = os.path.join(src, "kv_compression", "token_drop", "llama_model_impl", "dynamickv_v11.py")
    with open(call_site) as f:
        if "if (self.layer_idx % 4) == 3:" not in f.read():
            raise SystemExit("the pinned call site re-decides after layers u % 4 == 3; this checkout differs")
    return mod.DynamicKVClusterV11


def layers(L, H, T, seed):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(L):
        temp = 0.3 + 2.7 * torch.rand(1, generator=g).item()
        q = torch.randn(1, H, T, D, generator=g) * temp
        k = torch.randn(1, H, T, D, generator=g)
        heavy = torch.randint(0, T, (3,), generator=g)
        k[:, :, heavy, :] += q[:, :, -8:, :].mean(dim=2, keepdim=True) * 0.5  # keys the window attends to
        v = torch.arange(T, dtype=torch.float32).view(1, 1, T, 1).expand(1, H, T, D).clone()  # value = position
        out.append((q, k, v))
    return out


def run_reference(Cluster, case, data, patched):
    name, L, H, T, w, cap, ratio_max, seed = case
    budget_k_cache, budget_v_cache, advance_attn_cache, total_gather_indices = [], [], [], []
    scores, budget_size = [], None
    for layer_idx in range(L):
        q, k, v = data[layer_idx]
        cluster = Cluster(num_hidden_layers=L, window_size=w, max_capacity_prompt=cap, kernel_size=KERNEL,
                          pooling="avgpool", layer_idx=layer_idx, radio_max=ratio_max)
        with contextlib.redirect_stdout(io.StringIO()):
            cur_attn_cache, _, cur_k, cur_v = cluster.budget_compute_per_layer(k, q, v, None)
        budget_size = cluster.budget_size
        scores.append(cur_attn_cache[0].numpy().astype(np.float32))
        budget_k_cache.append(cur_k)
        budget_v_cache.append(cur_v)
        advance_attn_cache.append(cur_attn_cache)
        if (layer_idx % 4) == 3 or (patched and layer_idx == L - 1):
            with contextlib.redirect_stdout(io.StringIO()):
                budget_k_cache, budget_v_cache, total_gather_indices = cluster.update_and_reset_budget(
                    budget_k_cache, budget_v_cache, total_gather_indices, advance_attn_cache)
    lengths, distinct = [], []
    for cache in budget_v_cache:
        past = cache[0, :, :-w, 0].round().long()  # [H, kept]: each kept entry's position
        lengths.append(int(past.shape[1]))
        # the positions before the window it keeps (the rest of `past` are window entries a cut ran into, stored
        # again after it); the same count in every head
        counts = {len(set(p for p in row.tolist() if p < T - w)) for row in past}
        assert len(counts) == 1
        distinct.append(counts.pop())
    return np.stack(scores), lengths, distinct, budget_size


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True, help="a DreamMr/DynamicKV checkout at " + COMMIT)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "fixtures", "dynamickv"))
    args = ap.parse_args()
    Cluster = load_reference(args.src)
    os.makedirs(args.out, exist_ok=True)
    blobs, cases, offset = [], [], 0
    for case in CASES:
        name, L, H, T, w, cap, ratio_max, seed = case
        data = layers(L, H, T, seed)
        scores, lengths, distinct, budget_size = run_reference(Cluster, case, data, patched=True)
        _, unpatched, _, _ = run_reference(Cluster, case, data, patched=False)
        blobs.append(scores.astype("<f4").tobytes())
        cases.append({"name": name, "layers": L, "heads": H, "T": T, "window": w, "capacity": cap,
                      "ratio_max": ratio_max, "kernel_size": KERNEL, "budget_size": budget_size,
                      "scores_offset": offset, "lengths": lengths, "distinct": distinct,
                      "lengths_unpatched": unpatched})
        offset += scores.size
    with open(os.path.join(args.out, "scores.f32"), "wb") as f:
        f.write(b"".join(blobs))
    record = {"reference": "DreamMr/DynamicKV at " + COMMIT + ": kv_compression/token_drop/methods/dynamic_v11.py "
                           "(DynamicKVClusterV11), called as llama_model_impl/dynamickv_v11.py calls it",
              "torch": torch.__version__, "cases": cases}
    with open(os.path.join(args.out, "budgets.json"), "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    for c in cases:
        print(c["name"], "budget_size", c["budget_size"], "stored", sum(c["lengths"]), "distinct", sum(c["distinct"]),
              "of", (c["capacity"] - c["window"]) * c["layers"], "unpatched", sum(c["lengths_unpatched"]))


if __name__ == "__main__":
    main()
