"""End-to-end comparison on SmolLM2: the prompt positions ripplekv's snapkv, streamingllm and knorm keep per layer and
KV head against the ones kvpress's SnapKVPress, StreamingLLMPress and KnormPress keep, on the same token ids at the
same budgets. Writes tests/fixtures/kvpress/smollm2_e2e.json (the comparison) and smollm2_e2e_kvpress_kept.json
(kvpress's kept positions, which tests/scorers/test_kvpress_e2e.py compares a fresh ripplekv run against).

Run by tests/reference/compare_kvpress_smollm2.sh inside <cache>/venv-kvpress (kvpress 0.5.5, torch 2.7.1 on the CPU,
transformers 4.57.1: scripts/requirements-kvpress.txt); never by scripts/test.sh. The prompts, budgets, ripplekv
config and run are in tests/reference/kvpress_e2e.py.

Both sides compute from the same weights: the GGUF's matrices dequantized to float32 (ripplekv `model.weights =
"f32"`; kvpress runs transformers' LlamaForCausalLM, float32, sdpa attention, on the Hugging Face folder
tests/reference/gguf_to_hf.py writes from the same GGUF). kvpress gets the prompt ids ripplekv's run used as
input_ids.

Kept positions: kvpress's own forward_hook and compress() run on every layer of one prefill (run_kvpress); a wrapper
records, per layer and KV head, the input key rows its output rows are (post-RoPE key rows are unique within a head,
checked), and the scores it ranked (press.score()). On the first prompt, two presses are also run the plain way
(`with press(model)`, one prefill each) and must keep the same positions. ripplekv's come from `ripplekv run --dump
kept`.

Per (method, ratio, prompt, layer): `differing` = sum over KV heads of |kvpress kept \\ ripplekv kept| (both keep n,
so it also equals |ripplekv kept \\ kvpress kept|: the number of swapped positions). For the swapped positions the
file gives their token ids and how far they are from kvpress's cut: `max_rank_distance` (1: the last kept or first
dropped position in kvpress's score order) and `max_relative_score_gap` = |s_p - s_cut| / |s_cut| with s_cut the mean
of kvpress's n-th and (n+1)-th scores (0: an exact float32 tie in kvpress's own scores).
"""
import argparse
import importlib.metadata
import json
import os
import sys

import numpy as np
import torch
from transformers import DynamicCache, LlamaForCausalLM

import kvpress

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kvpress_e2e as e2e  # noqa: E402


def recording(press):
    """Wraps press.score and press.compress (instance attributes, which kvpress's forward_hook calls) to record, per
    layer, the scores and the kept positions per KV head. Returns (press, kept, scores): kept[layer] = [head] -> sorted
    positions, scores[layer] = float32 [H_kv, T]."""
    kept, scores = {}, {}
    score, compress = press.score, press.compress

    def recording_score(module, hidden_states, keys, values, attentions, kwargs):
        s = score(module, hidden_states, keys, values, attentions, kwargs)
        scores[module.layer_idx] = s[0].float().numpy().copy()
        return s

    def recording_compress(module, hidden_states, keys, values, attentions, kwargs):
        keys_out, values_out = compress(module, hidden_states, keys, values, attentions, kwargs)
        heads = []
        for g in range(keys.shape[1]):
            rows = keys[0, g].numpy()
            index = {r.tobytes(): j for j, r in enumerate(rows)}
            assert len(index) == rows.shape[0], "key rows are not unique"
            heads.append(sorted(index[r.tobytes()] for r in keys_out[0, g].numpy()))
        kept[module.layer_idx] = heads
        return keys_out, values_out

    press.score, press.compress = recording_score, recording_compress
    return press, kept, scores


def make_press(method, ratio):
    cls_name, pargs, _, _ = e2e.METHODS[method]
    return getattr(kvpress, cls_name)(compression_ratio=ratio, **pargs)


def ordered(kept, scores):
    return [kept[l] for l in sorted(kept)], [scores[l] for l in sorted(scores)]


def run_kvpress(model, prompt_ids):
    """{(method, ratio): ([layer][head] -> sorted kept positions, [layer] -> float32 scores [H_kv, T])} of every press
    of METHODS at every ratio of RATIOS, from one prefill of the prompt.

    kvpress compresses a layer's cache in a forward hook after the layer's attention; the later layers' prefill never
    reads it, so every press sees the same (hidden states, keys, values) as in its own forward. One hook per layer
    calls each press's own forward_hook (as `with press(model)` registers it) and puts the full keys and values back
    into the cache after each. The LM head is not run (model.model: no logits are needed)."""
    recorders = {}
    for method in e2e.METHODS:
        for ratio in e2e.RATIOS:
            press = make_press(method, ratio)
            press.post_init_from_model(model)
            recorders[(method, ratio)] = recording(press)

    def hook(module, inputs, kwargs, output):
        layer = kwargs["past_key_values"].layers[module.layer_idx]
        keys, values = layer.keys, layer.values
        for press, _, _ in recorders.values():
            press.forward_hook(module, inputs, kwargs, output)
            layer.keys, layer.values = keys, values
        return output

    hooks = []
    for layer in model.model.layers:
        layer.self_attn.rotary_emb = model.model.rotary_emb  # as BasePress.__call__
        hooks.append(layer.self_attn.register_forward_hook(hook, with_kwargs=True))
    try:
        with torch.no_grad():
            model.model(input_ids=torch.tensor([prompt_ids]), past_key_values=DynamicCache(), use_cache=True)
    finally:
        for h in hooks:
            h.remove()
    return {key: ordered(kept, scores) for key, (_, kept, scores) in recorders.items()}


def run_kvpress_plainly(model, prompt_ids, method, ratio):
    """[layer][head] -> kept positions of one press applied as kvpress documents it (`with press(model)`)."""
    press, kept, scores = recording(make_press(method, ratio))
    with torch.no_grad(), press(model):
        model.model(input_ids=torch.tensor([prompt_ids]), past_key_values=DynamicCache(), use_cache=True)
    return ordered(kept, scores)[0]


def compare(kv_kept, rk_kept, kv_scores, n, ids):
    """The result entry of one (method, ratio, prompt): per-layer differing counts and the swaps."""
    differing, max_rank, max_gap, swaps = [], 0, 0.0, []
    for l, (a, b, s_l) in enumerate(zip(kv_kept, rk_kept, kv_scores, strict=True)):
        count = 0
        for g, (only_kv, only_rk) in enumerate(e2e.swapped(a, b)):
            assert len(a[g]) == n, (len(a[g]), n)
            if not only_kv:
                continue
            count += len(only_kv)
            s = s_l[g].astype(np.float64)
            order = np.argsort(-s, kind="stable")
            rank = np.empty_like(order)
            rank[order] = np.arange(len(order))
            cut = 0.5 * (s[order[n - 1]] + s[order[n]])
            for p in only_kv + only_rk:
                max_rank = max(max_rank, int(n - rank[p]) if rank[p] < n else int(rank[p] - n + 1))
                max_gap = max(max_gap, abs(s[p] - cut) / abs(cut))
            swaps.append({"layer": l, "head": g, "kvpress_only": only_kv, "ripplekv_only": only_rk,
                          "kvpress_only_ids": [ids[p] for p in only_kv],
                          "ripplekv_only_ids": [ids[p] for p in only_rk]})
        differing.append(count)
    return {"n_kept": n, "differing": differing, "total_differing": sum(differing),
            "total_kept": n * len(kv_kept) * len(kv_kept[0]), "max_rank_distance": max_rank,
            "max_relative_score_gap": float("%.3g" % max_gap), "swaps": swaps}


def main():
    cache = os.environ.get("RIPPLEKV_CACHE", os.path.expanduser("~/.cache/ripplekv"))
    fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "kvpress")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ripplekv", required=True, help="the ripplekv binary")
    ap.add_argument("--model", default=os.path.join(cache, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--hf", required=True, help="the model as a float32 Hugging Face folder (gguf_to_hf.py)")
    ap.add_argument("--austen", default=os.path.join(cache, "austen"))
    ap.add_argument("--work", required=True, help="scratch folder (prompt files, ripplekv runs)")
    ap.add_argument("--out", default=fixtures, help="folder of smollm2_e2e.json and smollm2_e2e_kvpress_kept.json")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    torch.set_num_threads(args.threads)
    model = LlamaForCausalLM.from_pretrained(args.hf, dtype=torch.float32, attn_implementation="sdpa").eval()

    head = {
        "comment": "written by tests/reference/compare_kvpress_smollm2.py; see tests/fixtures/kvpress/README.md",
        "versions": {name: importlib.metadata.version(name) for name in ("kvpress", "torch", "transformers")},
        "model": os.path.basename(args.model),
        "continuation_tokens": e2e.CONTINUATION,
        "ratios": e2e.RATIOS,
        "methods": {m: {"kvpress": {"press": c, "args": a}, "ripplekv": {"plugin": p, "params": pp}}
                    for m, (c, a, p, pp) in e2e.METHODS.items()},
        "prompts": [],
    }
    results, kept_masks = [], []
    for i, (novel, start) in enumerate(e2e.PROMPTS):
        name, path, text, first_char = e2e.write_prompt(args.austen, args.work, novel, start)
        ids = e2e.tokenize(args.ripplekv, args.model, path)
        prompt_ids = ids[:len(ids) - e2e.CONTINUATION]
        T = len(prompt_ids)
        n_kept = [e2e.n_kept(T, r) for r in e2e.RATIOS]
        assert n_kept == [kvpress.presses.scorer_press.compute_n_kept(T, r) for r in e2e.RATIOS]
        head["prompts"].append({"name": name, "novel": novel, "start": start, "first_char": first_char,
                                "chars": len(text), "T": T, "window_ids_sha256": e2e.ids_sha256(ids),
                                "n_kept": n_kept})
        print(f"compare_kvpress_smollm2: {name}: T = {T}, n_kept = {n_kept}", file=sys.stderr)
        rk = e2e.run_ripplekv(args.ripplekv, args.model, args.work, name, path, ids, n_kept)
        kv = run_kvpress(model, prompt_ids)
        if i == 0:
            for method in ("snapkv", "knorm"):
                assert run_kvpress_plainly(model, prompt_ids, method, e2e.RATIOS[0]) == kv[(method, e2e.RATIOS[0])][0]
        for method, (_, _, plugin, _) in e2e.METHODS.items():
            for ratio, n in zip(e2e.RATIOS, n_kept):
                kv_kept, kv_scores = kv[(method, ratio)]
                r = {"method": method, "compression_ratio": ratio, "prompt": name,
                     **compare(kv_kept, rk[(plugin, n)], kv_scores, n, prompt_ids)}
                results.append(r)
                kept_masks.append({"method": method, "compression_ratio": ratio, "prompt": name, "n_kept": n,
                                   "kept": [[e2e.positions_mask(h) for h in layer] for layer in kv_kept]})
                print(f"  {method} r={ratio}: {r['total_differing']} / {r['total_kept']} differ "
                      f"(max rank distance {r['max_rank_distance']}, max score gap {r['max_relative_score_gap']})",
                      file=sys.stderr)
    for filename, body in (("smollm2_e2e.json", {**head, "results": results}),
                           ("smollm2_e2e_kvpress_kept.json", {**head, "kvpress_kept": kept_masks})):
        with open(os.path.join(args.out, filename), "w") as f:
            json.dump(body, f, separators=(",", ":"))
            f.write("\n")
        print(f"compare_kvpress_smollm2: wrote {os.path.normpath(os.path.join(args.out, filename))}", file=sys.stderr)


if __name__ == "__main__":
    main()
