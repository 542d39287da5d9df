#!/usr/bin/env python3
"""How far llama.cpp's own arithmetic moves SmolLM2's logits from the exact model (a manual check, not a ctest).

llama.cpp multiplies Q4_1/Q8_0 weights with activations quantized to 8 bits in blocks of 32 (ggml
quantize_row_q8_1/q8_0: d = amax / 127 stored as fp16, q = round(x / d)) and keeps K and V in fp16. This script runs
the Hugging Face-style float64 forward of hf_reference.py twice on the prompts of tests/fixtures/llamacpp/logits.json:
exactly, and with those two approximations emulated, and prints
  KL(emulated || exact)   - the size of the approximation error by itself
  KL(llama.cpp || exact)  - what the fixture shows (ripplekv's CPU forward matches `exact` to ~5e-6)
  KL(llama.cpp || emulated)
averaged over the fixture's positions. Measured on the committed fixture: 2.6e-3, 2.5e-3 and 3.1e-3 (means over the three prompts):
an exact float32 implementation cannot come closer to llama.cpp than the noise of llama.cpp's own quantization.

Usage: llamacpp_noise_floor.py [--model GGUF] [--fixtures DIR]   (venv: <cache>/venv, as hf_reference.py)
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_reference as ref  # noqa: E402


def q8_blocks(x):
    """Round x to ggml's 8-bit block quantization (blocks of 32 along the last axis, scale amax/127 in fp16)."""
    b = x.reshape(-1, 32)
    d = (np.abs(b).max(axis=1, keepdims=True) / 127.0).astype(np.float16).astype(np.float64)
    q = np.where(d > 0, np.round(b / np.where(d > 0, d, 1.0)), 0.0)
    return (q * d).reshape(x.shape)


def forward(cfg, w, ids, emulate):
    T, H, Hkv, d = len(ids), cfg["n_heads"], cfg["n_kv_heads"], cfg["head_dim"]
    lin = lambda x, name: (q8_blocks(x) if emulate else x) @ w[name].T
    x = w["model.embed_tokens.weight"][np.asarray(ids)]
    inv_freq = 1.0 / (cfg["rope_theta"] ** (np.arange(0, d, 2, dtype=np.float64) / d))
    freqs = np.outer(np.arange(T, dtype=np.float64), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)
    cos, sin = np.cos(emb)[None], np.sin(emb)[None]
    mask = np.triu(np.full((T, T), -np.inf), k=1)
    for l in range(cfg["n_layers"]):
        p = f"model.layers.{l}."
        h = ref.rms_norm(x, w[p + "input_layernorm.weight"], cfg["rms_eps"])
        q = lin(h, p + "self_attn.q_proj.weight").reshape(T, H, d).transpose(1, 0, 2)
        k = lin(h, p + "self_attn.k_proj.weight").reshape(T, Hkv, d).transpose(1, 0, 2)
        v = lin(h, p + "self_attn.v_proj.weight").reshape(T, Hkv, d).transpose(1, 0, 2)
        q = q * cos + ref.rotate_half(q) * sin
        k = k * cos + ref.rotate_half(k) * sin
        if emulate:  # fp16 KV cache
            k = k.astype(np.float16).astype(np.float64)
            v = v.astype(np.float16).astype(np.float64)
        k = np.repeat(k, H // Hkv, axis=0)
        v = np.repeat(v, H // Hkv, axis=0)
        s = q @ k.transpose(0, 2, 1) / np.sqrt(d) + mask
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        s /= s.sum(axis=-1, keepdims=True)
        x = x + lin((s @ v).transpose(1, 0, 2).reshape(T, H * d), p + "self_attn.o_proj.weight")
        h = ref.rms_norm(x, w[p + "post_attention_layernorm.weight"], cfg["rms_eps"])
        g, u = lin(h, p + "mlp.gate_proj.weight"), lin(h, p + "mlp.up_proj.weight")
        x = x + lin(g / (1.0 + np.exp(-g)) * u, p + "mlp.down_proj.weight")
    x = ref.rms_norm(x, w["model.norm.weight"], cfg["rms_eps"])
    return lin(x, "model.embed_tokens.weight" if cfg["tied"] else "lm_head.weight")


def kl(lp, lq):
    """Mean over rows of KL(softmax(lp) || softmax(lq))."""
    lp = lp - lp.max(-1, keepdims=True)
    lp = lp - np.log(np.exp(lp).sum(-1, keepdims=True))
    lq = lq - lq.max(-1, keepdims=True)
    lq = lq - np.log(np.exp(lq).sum(-1, keepdims=True))
    return float((np.exp(lp) * (lp - lq)).sum(-1).mean())


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    cache = os.environ.get("RIPPLEKV_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "ripplekv")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(cache, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--fixtures", default=os.path.join(here, "..", "fixtures", "llamacpp"))
    args = ap.parse_args()
    cfg, w = ref.load_hf_weights(args.model)
    w = {k: v.astype(np.float64) for k, v in w.items()}
    with open(os.path.join(args.fixtures, "logits.json")) as f:
        fx = json.load(f)
    sums = np.zeros(3)
    for pr in fx["prompts"]:
        n = pr["n_positions"]
        llama = np.fromfile(os.path.join(args.fixtures, pr["logits_file"]), dtype="<f2").astype(np.float64)
        llama = llama.reshape(n, fx["n_vocab"])
        exact = forward(cfg, w, pr["ids"], False)[-n:]
        emul = forward(cfg, w, pr["ids"], True)[-n:]
        row = np.array([kl(emul, exact), kl(llama, exact), kl(llama, emul)])
        sums += row
        print(f"{pr['name']:>12}: KL(emulated||exact) {row[0]:.3g}  KL(llama.cpp||exact) {row[1]:.3g}  "
              f"KL(llama.cpp||emulated) {row[2]:.3g}")
    m = sums / len(fx["prompts"])
    print(f"{'mean':>12}: KL(emulated||exact) {m[0]:.3g}  KL(llama.cpp||exact) {m[1]:.3g}  KL(llama.cpp||emulated) {m[2]:.3g}")


if __name__ == "__main__":
    main()
