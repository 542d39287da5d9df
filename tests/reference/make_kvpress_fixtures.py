"""Writes the committed kvpress reference fixtures (tests/fixtures/kvpress/): one seeded synthetic attention layer and
what kvpress's own presses make of it.

Run by tests/reference/make_kvpress_fixtures.sh inside <cache>/venv-kvpress (torch on the CPU, kvpress and
transformers pinned in scripts/requirements-kvpress.txt); never by scripts/test.sh. The C++ side reads the fixtures in
tests/scorers/test_kvpress_fixtures.cpp.

The layer (GQA, H = 9 query heads, H_kv = 3 KV heads, d = 64, T = 300), drawn from numpy's PCG64 with a fixed seed:
  - pre-RoPE keys K0 [H_kv, T, d]: a per-head offset direction (so the keys are not centred and their norms spread),
    noise, heavier keys at a few positions and an attention-sink-like key at position 0;
  - pre-RoPE queries Q0 [H, T, d]: correlated with the offset of their KV head's keys (peaked attention), plus noise;
  - values V [H_kv, T, d] with per-position log-normal scales (so ||v|| varies);
  - RoPE as transformers' Llama (theta = 10000, rotate_half), positions 0 .. T-1: K = rope(K0), Q = rope(Q0);
  - attention A[h, t, j] = softmax_j(Q[h, t] . K[g(h), j] / sqrt(d)), causal, float32 (what an eager transformers
    attention hands kvpress as `attentions`).
ripplekv's scorers see exactly these post-RoPE keys, values and queries (the host computes its attention statistics
from Q and K itself, as it does in a run), and the pre-RoPE K0 and Q0 where they ask for pre-RoPE keys or the query
moments. The module's hidden states are [Q0, K0] per position, with q_proj and k_proj picking the two parts, so presses
that project their own pre-RoPE queries or keys (ExpectedAttention, Leverage, Compactor, NonCausalAttn) see Q0 and K0.
Presses that draw from torch's global generator (Leverage, Compactor: the Gaussian sketch) are called right after
torch.manual_seed(seed), the case's `torch_manual_seed`.

Files written:
  layer.f32     float32 little-endian, in order: K [H_kv, T, d] (post-RoPE), V [H_kv, T, d], Q [H, T, d] (post-RoPE)
  layer_prerope.f32  float32 little-endian: K0 [H_kv, T, d], Q0 [H, T, d] (before RoPE)
  layer_wo.i8   int8 [(H + H_kv) d, H d]: the module's o_proj weight W_o times 64 (W_o = i8 / 64 exactly), read by
                CriticalKV's ||W_o v||_1 (drawn from PCG64 with seed SEED + 1, uniform in [-127, 127])
  presses.json  the shape, the versions, and per press case: the kvpress class and its arguments, `scores`
                [H_kv][T] (press.score() on the layer, float32 printed with 9 significant digits), and per
                compression_ratio in {0.9, 0.7, 0.5} (10/30/50% kept) the count kvpress keeps and its kept positions
                per KV head (ascending), read back from what press.compress() returned.
                Budget-dependent presses (CriticalKV: "budget_dependent": true) hold the inner press's scores in
                `scores` and, per ratio, that ratio's own press.score() in `kept[i].scores`. CriticalAdaKV has no
                score(): per ratio, each KV head's kept count (`head_kept`) and positions, read from the
                masked_key_indices its compress() sets.
                With --defensivekv: "defensivekv" (DefensiveKV and Layer-DefensiveKV) and "cake" (CAKE's layer
                preferences and budgets on three prompts of four layers, cake_cases).
"""
import argparse
import hashlib
import importlib.metadata
import json
import os
import sys

import numpy as np
import torch
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding

import kvpress

H, H_KV, D, T = 9, 3, 64, 300
SEED = 15
RATIOS = [0.9, 0.7, 0.5]  # kvpress compression_ratio = share removed: 10%, 30%, 50% kept


DEFENSIVEKV_COMMIT = "9251b95e7e282a6c18dd98ef6318dd489e639a58"
DKV_RATIOS = [0.75, 0.7, 0.5]  # T (1 - r) H_kv is an exact multiple of H_kv at T = 300 for these (225, 270, 450)
DKV_WINDOW = 16
DKV_LAYERS = 3


def layer_wo_scale(layer, head):
    """Layer-DefensiveKV's layers: the fixture's o_proj with query head h's block scaled by 1 + ((layer + h) % 3) / 2
    (exact in float32), so the three layers' value-output norm shares, hence their scores, differ."""
    return 1.0 + ((layer + head) % 3) / 2.0


def load_by_path(root, names):
    """Modules of a FFY0/DefensiveKV checkout at `root`, each loaded by path under its kvpress name (beside the
    pinned kvpress 0.5.5, in that order, so later ones import earlier ones); the last one is returned."""
    import importlib.util
    mod = None
    for name in names:
        path = os.path.join(root, *name.split(".")) + ".py"
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return mod


def load_defensivekv(root):
    """The reference's own press classes from a FFY0/DefensiveKV checkout, imported beside the pinned kvpress 0.5.5:
    its four modules are loaded by path under their kvpress names (kvpress.ops.vw_norm is its Triton kernel; the
    scores below use the press's torch vwl1norm, which the file keeps beside the Triton one and which computes the
    same formula)."""
    import types
    sys.modules.setdefault("kvpress.ops", types.ModuleType("kvpress.ops"))
    return load_by_path(root, ["kvpress.ops.vw_norm", "kvpress.presses.efficient_ada_scorer_press",
                               "kvpress.presses.efficient_ada_global_scorer_press",
                               "kvpress.presses.efficient_defensivekv_press"]).EfficientDefensiveKVPress


def defensivekv_cases(root, config, module, hidden_states, k_t, v_t, wo_i8, kwargs, kept_positions, scores_list):
    """DefensiveKV on the fixture layer, with its queries as they are and scaled by 1/4 (the press's score() with
    compression_ratio r, then its compress()'s Ada split: one topk(int(T (1 - r) H_kv)) over the layer's flattened
    scores), and Layer-DefensiveKV over three layers
    that differ by o_proj (layer_wo_scale): each layer's score(), then its compress()'s global split, one
    topk(int(T (1 - r) H_kv L)) over the stacked scores. Kept positions per (layer,) KV head, ascending."""
    from types import SimpleNamespace
    Press = load_defensivekv(root)
    meta = SimpleNamespace(bsz=1, num_key_value_heads=H_KV, head_lens=[T] * H_KV)
    kw = dict(kwargs, metadata=meta)
    wo = torch.from_numpy(wo_i8.astype(np.float32) / 64.0)

    def set_layer(layer):  # None: the fixture's own o_proj
        w = wo.clone()
        if layer is not None:
            for h in range(H):
                w[:, h * D:(h + 1) * D] *= layer_wo_scale(layer, h)
        with torch.no_grad():
            module.o_proj.weight.copy_(w)

    def score(ratio, layer, query_scale=1.0):
        set_layer(layer)
        p = Press(compression_ratio=ratio, window_size=DKV_WINDOW, kernel_size=5)
        p.vwl1norm_triton = p.vwl1norm  # the torch version of the same formula (the Triton kernel needs a GPU)
        hs = hidden_states.clone()
        hs[..., :H * D] *= query_scale  # the queries q_proj picks (a power of two: exact, and RoPE commutes with it)
        with torch.no_grad():
            return p.score(module, hs, k_t, v_t, None, kw).view(1, H_KV, T)

    def split(flat, n_kept, n_layers):
        idx = flat.reshape(-1).topk(n_kept).indices.tolist()
        kept = [[[] for _ in range(H_KV)] for _ in range(n_layers)]
        for i in idx:
            layer, rest = divmod(i, H_KV * T)
            kept[layer][rest // T].append(rest % T)
        return [[sorted(x) for x in layer] for layer in kept]

    cases = {"commit": DEFENSIVEKV_COMMIT, "window": DKV_WINDOW, "kernel": 5, "ratios": DKV_RATIOS,
             "layers": DKV_LAYERS, "defensivekv": [], "layer_defensivekv": []}
    for r in DKV_RATIOS:
        # query_scale 1/4 flattens the window's attention, so stage 1 needs more entries than the cap b - w allows
        for q_scale in [1.0, 0.25]:
            s = score(r, None, q_scale)
            n_kept = int(T * (1 - r) * H_KV)
            cases["defensivekv"].append({"compression_ratio": r, "query_scale": q_scale, "n_kept_total": n_kept,
                                         "scores": scores_list(s), "positions": split(s, n_kept, 1)[0]})
        layers = [score(r, layer) for layer in range(DKV_LAYERS)]
        n_kept = int(T * (1 - r) * H_KV * DKV_LAYERS)
        cases["layer_defensivekv"].append({"compression_ratio": r, "n_kept_total": n_kept,
                                           "scores": [scores_list(x) for x in layers],
                                           "positions": split(torch.stack(layers), n_kept, DKV_LAYERS)})
    set_layer(None)
    return cases


CAKE_WINDOW = 16
CAKE_RATIOS = [0.5, 0.8]
# Three "prompts" of four layers each: layer l of prompt p has the fixture's queries times CAKE_QUERY_SCALES[p][l]
# (powers of two: exact, and RoPE commutes with them), so the window's attention is flatter or more peaked per layer.
CAKE_QUERY_SCALES = [[1.0, 0.5, 0.25, 2.0], [0.25, 1.0, 2.0, 0.5], [2.0, 4.0, 0.5, 1.0]]


def load_cake(root):
    """FFY0/DefensiveKV's CAKE port (its CakeScorerPress and CakeGlobalPress), loaded by path under their kvpress names
    beside the pinned kvpress 0.5.5."""
    return load_by_path(root, ["kvpress.presses.cake_scorer_press",
                               "kvpress.presses.cake_global_press"]).CakeGlobalPress


def cake_cases(root, module, hidden_states, k_t, v_t, kwargs):
    """CAKE per prompt: each layer's preference (CakeGlobalPress.score's pref_score, tau1 1.6, tau2 0.6; for the
    first prompt also its hh_score, the eviction indicator over the T - w positions before the window) and, per
    compression ratio, the layer budgets of CakeGlobalPress.compress: n_kept = int((T (1 - r) - w) L), the shares
    pref_l / sum pref n_kept before integerising (`shares`) and after CakeScorerPress.adjust_budgets (`budgets`),
    both counted without the window, which every layer keeps."""
    Press = load_cake(root)
    out = {"commit": DEFENSIVEKV_COMMIT, "window": CAKE_WINDOW, "tau1": 1.6, "tau2": 0.6, "ratios": CAKE_RATIOS,
           "query_scales": CAKE_QUERY_SCALES, "prompts": []}
    for index, scales in enumerate(CAKE_QUERY_SCALES):
        prefs, hh_scores = [], []
        for q_scale in scales:
            p = Press(compression_ratio=0.5, window_size=CAKE_WINDOW)
            hs = hidden_states.clone()
            hs[..., :H * D] *= q_scale
            with torch.no_grad():
                hh, pref = p.score(module, hs, k_t, v_t, None, kwargs)
            prefs.append(float(pref))
            hh_scores.append([[float("%.9g" % x) for x in row] for row in hh[0].tolist()])
        n_layers = len(scales)
        prompt = {"preferences": prefs, "budgets": []}
        if index == 0:  # the eviction indicator (hh_score [H_kv][T - w], gamma 200, kernel 5) of each layer
            prompt["scores"] = hh_scores
        for r in CAKE_RATIOS:
            n_kept = int((T * (1 - r) - CAKE_WINDOW) * n_layers)
            shares = [x / sum(prefs) * n_kept for x in prefs]
            adjusted = Press.adjust_budgets(shares, n_kept, T - CAKE_WINDOW, n_layers)
            prompt["budgets"].append({"compression_ratio": r, "n_kept": n_kept, "shares": shares,
                                      "budgets": [int(b) for b in adjusted]})
        out["prompts"].append(prompt)
    return out


def make_layer():
    rng = np.random.default_rng(SEED)
    offset = rng.normal(size=(H_KV, 1, D)) * 1.5
    k0 = offset + rng.normal(size=(H_KV, T, D))
    heavy = rng.choice(np.arange(1, T), size=12, replace=False)
    k0[:, heavy, :] *= 2.0
    k0[:, 0, :] = offset[:, 0, :] * 3.0  # a sink-like first key
    g_of_h = np.arange(H) // (H // H_KV)
    q0 = 0.6 * offset[g_of_h] + rng.normal(size=(H, T, D)) * 0.8
    v_scale = np.exp(rng.normal(size=(H_KV, T, 1)) * 0.5)
    v = rng.normal(size=(H_KV, T, D)) * v_scale
    return k0.astype(np.float32), q0.astype(np.float32), v.astype(np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default_out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "kvpress")
    ap.add_argument("--out", default=default_out)
    ap.add_argument("--defensivekv", default=None,
                    help="a checkout of FFY0/DefensiveKV at %s: adds its DefensiveKV and Layer-DefensiveKV cases" %
                    DEFENSIVEKV_COMMIT)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)

    # hidden_states[t] = [Q0[:, t] (H d values, head after head), K0[:, t] (H_kv d values)]; q_proj and k_proj pick
    # the two parts, so presses that project their own pre-RoPE queries or keys (get_prerope_query_states /
    # get_prerope_key_states) see exactly Q0 and K0, on any slice of positions.
    config = LlamaConfig(hidden_size=(H + H_KV) * D, num_attention_heads=H, num_key_value_heads=H_KV, head_dim=D,
                         rope_theta=10000.0, max_position_embeddings=4096, attention_bias=False)
    config._attn_implementation = "eager"
    module = LlamaAttention(config, layer_idx=0).eval()
    with torch.no_grad():
        module.q_proj.weight.copy_(torch.eye(H * D, (H + H_KV) * D))
        module.k_proj.weight.copy_(torch.cat([torch.zeros(H_KV * D, H * D), torch.eye(H_KV * D)], dim=1))
    wo_i8 = np.random.default_rng(SEED + 1).integers(-127, 128, size=((H + H_KV) * D, H * D), dtype=np.int8)
    with torch.no_grad():
        module.o_proj.weight.copy_(torch.from_numpy(wo_i8.astype(np.float32) / 64.0))
    rope = LlamaRotaryEmbedding(config)
    module.rotary_emb = rope  # what kvpress's pipeline attaches (ExpectedAttentionPress.apply_avg_rope reads it)

    k0, q0, v = make_layer()
    k0_t, q0_t, v_t = (torch.from_numpy(x).unsqueeze(0) for x in (k0, q0, v))
    position_ids = torch.arange(T).unsqueeze(0)
    hidden_states = torch.cat([q0_t.transpose(1, 2).reshape(1, T, H * D), k0_t.transpose(1, 2).reshape(1, T, H_KV * D)],
                              dim=2)
    with torch.no_grad():
        cos, sin = rope(hidden_states, position_ids)
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb, repeat_kv

        q_t, k_t = apply_rotary_pos_emb(q0_t, k0_t, cos, sin)
        logits = torch.matmul(q_t, repeat_kv(k_t, H // H_KV).transpose(2, 3)) / np.sqrt(D)
        mask = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
        attentions = torch.softmax(logits + mask, dim=-1, dtype=torch.float32)
    kwargs = {"position_embeddings": (cos, sin)}

    k_np, q_np = k_t[0].numpy().astype("<f4"), q_t[0].numpy().astype("<f4")
    assert len({row.tobytes() for row in k_np.reshape(-1, D)}) == H_KV * T  # rows are unique: kept keys map back
    with open(os.path.join(args.out, "layer.f32"), "wb") as f:
        for x in (k_np, v.astype("<f4"), q_np):
            f.write(np.ascontiguousarray(x).tobytes())
    with open(os.path.join(args.out, "layer_prerope.f32"), "wb") as f:
        for x in (k0, q0):
            f.write(np.ascontiguousarray(x.astype("<f4")).tobytes())
    with open(os.path.join(args.out, "layer_wo.i8"), "wb") as f:
        f.write(np.ascontiguousarray(wo_i8).tobytes())

    P = kvpress
    cases = [
        ("knorm", P.KnormPress, {}, False),
        ("keydiff", P.KeyDiffPress, {}, False),
        ("lagkv", P.LagKVPress, {}, False),
        ("lagkv_lag32", P.LagKVPress, {"n_sink": 4, "lag_size": 32}, False),
        ("cur", P.CURPress, {}, False),
        ("cur_kv_avg_w8", P.CURPress, {"leverage_type": "kv_avg", "local_window_size": 8}, False),
        ("cur_key_global", P.CURPress, {"leverage_type": "key", "use_local_approximation": False, "num_sinks": 0},
         False),
        ("tova", P.TOVAPress, {}, True),
        ("observed_attention", P.ObservedAttentionPress, {}, True),
        ("snapkv", P.SnapKVPress, {}, True),
        ("non_causal_attention", P.NonCausalAttnPress, {}, False),
        ("non_causal_attention_chunk64", P.NonCausalAttnPress, {"chunk_size": 64}, False),
        ("random_seed0", P.RandomPress, {"seed": 0}, False),
        ("random_seed42", P.RandomPress, {"seed": 42}, False),
        ("streamingllm", P.StreamingLLMPress, {}, False),
        ("expected_attention", P.ExpectedAttentionPress, {}, False),
        ("expected_attention_nocov_f64_eps", P.ExpectedAttentionPress,
         {"use_covariance": False, "n_future_positions": 64, "n_sink": 0, "epsilon": 0.01}, False),
        ("expected_attention_no_vnorm", P.ExpectedAttentionPress, {"use_vnorm": False, "n_sink": 8}, False),
    ]
    # Presses that draw from torch's global generator: torch.manual_seed(seed) right before each call.
    seeded_cases = [
        ("leverage_seed0", P.LeverageScorePress, {}, 0),
        ("leverage_k16_seed7", P.LeverageScorePress, {"sketch_dimension": 16}, 7),
        ("compactor_seed0", P.CompactorPress, {"blending": 0.35}, 0),
        ("compactor_chunk64_seed3", P.CompactorPress,
         {"blending": 0.7, "chunk_size": 64, "sink_size_start": 4, "sink_size_end": 8, "sketch_dimension": 32}, 3),
    ]
    out = {
        "comment": "written by tests/reference/make_kvpress_fixtures.py; see tests/fixtures/kvpress/README.md",
        "versions": {name: importlib.metadata.version(name) for name in ("kvpress", "torch", "transformers", "numpy")},
        "shape": {"n_heads": H, "n_kv_heads": H_KV, "head_dim": D, "prefix_tokens": T, "seed": SEED,
                  "rope_theta": 10000.0},
        "layer_f32_sha256": hashlib.sha256(open(os.path.join(args.out, "layer.f32"), "rb").read()).hexdigest(),
        "ratios": RATIOS,
        "presses": [],
    }

    def kept_positions(keys_out):
        index = {row.tobytes(): j for g in range(H_KV) for j, row in enumerate(k_np[g])}
        kept = []
        for g in range(H_KV):
            rows = keys_out[0, g].numpy().astype("<f4")
            pos = sorted(index[r.tobytes()] - 0 for r in rows)
            assert all(0 <= p < T for p in pos)
            kept.append(pos)
        return kept

    def run(name, press_factory, pargs, with_attn, seed=None):
        attn = attentions if with_attn else None
        press = press_factory(**pargs)
        if seed is not None:
            torch.manual_seed(seed)
        with torch.no_grad():
            scores = press.score(module, hidden_states, k_t, v_t, attn, kwargs)
        case = {"name": name, "press": press_factory.__name__, "args": pargs, "attentions": with_attn,
                "scores": [[float("%.9g" % s) for s in row] for row in scores[0].float().numpy()], "kept": []}
        if seed is not None:
            case["torch_manual_seed"] = seed
        for r in RATIOS:
            p = press_factory(compression_ratio=r, **pargs)
            if seed is not None:
                torch.manual_seed(seed)
            with torch.no_grad():
                keys_out, _ = p.compress(module, hidden_states, k_t, v_t, attn, kwargs)
            case["kept"].append({"compression_ratio": r, "n_kept": int(keys_out.shape[2]),
                                 "positions": kept_positions(keys_out)})
        out["presses"].append(case)

    for name, cls, pargs, with_attn in cases:
        run(name, cls, pargs, with_attn)
    for name, cls, pargs, seed in seeded_cases:
        run(name, cls, pargs, False, seed)

    # ChunkKV wraps a scorer press (the ChunkKV paper's is SnapKV; kvpress asserts attentions is None, so the inner
    # SnapKV computes its window attention from the module's queries and the keys).
    for name, inner_cls, inner_args, chunk in [("chunkkv_snapkv", P.SnapKVPress, {}, 20),
                                                ("chunkkv_knorm", P.KnormPress, {}, 20),
                                                ("chunkkv_knorm_chunk7", P.KnormPress, {}, 7)]:
        inner = inner_cls(**inner_args)
        with torch.no_grad():
            scores = inner.score(module, hidden_states, k_t, v_t, None, kwargs)
        case = {"name": name, "press": "ChunkKVPress", "args": {"chunk_length": chunk},
                "inner": {"press": inner_cls.__name__, "args": inner_args}, "attentions": False,
                "scores": [[float("%.9g" % s) for s in row] for row in scores[0].float().numpy()], "kept": []}
        for r in RATIOS:
            p = P.ChunkKVPress(press=inner_cls(compression_ratio=r, **inner_args), chunk_length=chunk)
            with torch.no_grad():
                keys_out, _ = p.compress(module, hidden_states, k_t, v_t, None, kwargs)
            case["kept"].append({"compression_ratio": r, "n_kept": int(keys_out.shape[2]),
                                 "positions": kept_positions(keys_out)})
        out["presses"].append(case)

    # CriticalKV wraps a scorer press; its scores depend on the compression ratio (the stage-1 count), so each ratio's
    # own score() is recorded beside its kept positions. The window is 8 so stage 1 (>= 14 positions here) holds it.
    def scores_list(x):
        return [[float("%.9g" % s) for s in row] for row in x[0].float().numpy()]

    for name, inner_cls, inner_args, cargs, with_attn in [
            ("criticalkv_snapkv_w8", P.SnapKVPress, {"window_size": 8}, {}, True),
            ("criticalkv_knorm_ratio025_eps0001", P.KnormPress, {}, {"first_stage_ratio": 0.25, "epsilon": 1e-3}, False)]:
        attn = attentions if with_attn else None
        with torch.no_grad():
            inner_scores = inner_cls(**inner_args).score(module, hidden_states, k_t, v_t, attn, kwargs)
        case = {"name": name, "press": "CriticalKVPress", "args": cargs,
                "inner": {"press": inner_cls.__name__, "args": inner_args}, "attentions": with_attn,
                "budget_dependent": True, "scores": scores_list(inner_scores), "kept": []}
        for r in RATIOS:
            p = P.CriticalKVPress(press=inner_cls(compression_ratio=r, **inner_args), **cargs)
            with torch.no_grad():
                scores_r = p.score(module, hidden_states, k_t, v_t, attn, kwargs)
                keys_out, _ = p.compress(module, hidden_states, k_t, v_t, attn, kwargs)
            case["kept"].append({"compression_ratio": r, "n_kept": int(keys_out.shape[2]),
                                 "positions": kept_positions(keys_out), "scores": scores_list(scores_r)})
        out["presses"].append(case)

    # CriticalAdaKV: head budgets by AdaKV's rule on the inner scores, then both CriticalKV stages per head. It masks
    # instead of cutting (module.masked_key_indices) and refuses an eager module, so the config says sdpa meanwhile.
    for name, inner_args, alpha in [("critical_adakv_snapkv_w8", {"window_size": 8}, 0.2)]:
        with torch.no_grad():
            inner_scores = P.SnapKVPress(**inner_args).score(module, hidden_states, k_t, v_t, attentions, kwargs)
        case = {"name": name, "press": "CriticalAdaKVPress", "args": {"alpha_safeguard": alpha},
                "inner": {"press": "SnapKVPress", "args": inner_args}, "attentions": True, "budget_dependent": True,
                "scores": scores_list(inner_scores), "kept": []}
        for r in RATIOS:
            p = P.CriticalAdaKVPress(press=P.SnapKVPress(compression_ratio=r, **inner_args), alpha_safeguard=alpha)
            config._attn_implementation = "sdpa"
            try:
                with torch.no_grad():
                    p.compress(module, hidden_states, k_t, v_t, attentions, kwargs)
            finally:
                config._attn_implementation = "eager"
            _, heads, seqs = module.masked_key_indices
            del module.masked_key_indices
            masked = [set() for _ in range(H_KV)]
            for h, j in zip(heads.tolist(), seqs.tolist()):
                masked[h].add(j)
            positions = [[j for j in range(T) if j not in masked[g]] for g in range(H_KV)]
            case["kept"].append({"compression_ratio": r, "n_kept": int(T * (1 - r)),
                                 "head_kept": [len(x) for x in positions], "positions": positions})
        out["presses"].append(case)

    if args.defensivekv:
        out["cake"] = cake_cases(args.defensivekv, module, hidden_states, k_t, v_t, kwargs)
        out["defensivekv"] = defensivekv_cases(args.defensivekv, config, module, hidden_states, k_t, v_t, wo_i8, kwargs,
                                               kept_positions, scores_list)

    with open(os.path.join(args.out, "presses.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print("make_kvpress_fixtures: wrote %s (%d press cases, kvpress %s, torch %s)" %
          (args.out, len(out["presses"]), out["versions"]["kvpress"], out["versions"]["torch"]), file=sys.stderr)


if __name__ == "__main__":
    main()
