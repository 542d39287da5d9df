#!/usr/bin/env python3
"""Independent numpy reference of a Gemma 3 GGUF model, written from the published architecture.

It shares no code with ripplekv. The GGUF is read and dequantized by the `gguf` package; the forward follows
transformers' Gemma3TextModel (models/gemma3/modeling_gemma3.py) in float64:
  - embeddings times sqrt(hidden_size) (Gemma3TextScaledWordEmbedding);
  - Gemma3RMSNorm: x / sqrt(mean(x^2) + eps) * (1 + w). llama.cpp's converter stores 1 + w in the GGUF
    (convert_hf_to_gguf.py Gemma3Model: `data_torch = data_torch + 1` for norm weights), so w = stored - 1 here;
  - per layer: input_layernorm, q/k/v projections, q_norm / k_norm over each head's head_dim, rotate_half RoPE with
    base rope_local_base_freq (10000 unless the GGUF says rope.freq_base_swa) on sliding layers and rope_theta
    (rope.freq_base) on full-attention layers, scaling query_pre_attn_scalar^-1/2 (from attention.scale when the
    GGUF has it, else head_dim), causal mask plus, on sliding layers, the sliding window (key j visible to query i
    iff i - j < sliding_window: transformers' sliding_window_overlay, llama.cpp LLAMA_SWA_TYPE_STANDARD), softmax,
    repeat_kv, o_proj, post_attention_layernorm, residual; pre_feedforward_layernorm, gelu_pytorch_tanh(gate) * up,
    down, post_feedforward_layernorm, residual;
  - layer_types: sliding iff (i + 1) % sliding_window_pattern != 0 (Gemma3TextConfig; pattern 6 unless the GGUF has
    attention.sliding_window_pattern);
  - final norm, tied LM head, final_logit_softcapping (tanh(logits / c) * c) when the GGUF has it.

Usage: gemma3_reference.py --model GGUF --ids IDS.json --out PREFIX [--rows last|all]
  IDS.json: {"prompts": [[id, ...], ...]}; writes PREFIX<i>.f32 = float32 logits [rows, vocab] (little-endian), rows
  all positions (default) or only the last one (for large vocabularies).
"""

import argparse
import json
import math

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def field(reader, key, default=None):
    """A scalar metadata value of the GGUF, or `default` when absent."""
    if key not in reader.fields:
        return default
    f = reader.fields[key]
    v = f.parts[f.data[0]]
    return v.item() if hasattr(v, "item") else v[0]


def load(path):
    """Config dict and float64 tensors (PyTorch shapes [out, in]) keyed by GGUF name."""
    r = GGUFReader(path)
    a = "gemma3."
    n_layers = int(field(r, a + "block_count"))
    d_model = int(field(r, a + "embedding_length"))
    n_heads = int(field(r, a + "attention.head_count"))
    head_dim = int(field(r, a + "attention.key_length", d_model // n_heads))
    scale = field(r, a + "attention.scale")
    pattern = int(field(r, a + "attention.sliding_window_pattern", 6))
    cfg = {
        "n_layers": n_layers,
        "d_model": d_model,
        "n_heads": n_heads,
        "n_kv_heads": int(field(r, a + "attention.head_count_kv", n_heads)),
        "head_dim": head_dim,
        "rope_theta": float(field(r, a + "rope.freq_base")),
        "rope_local_base_freq": float(field(r, a + "rope.freq_base_swa", 10000.0)),
        "rms_eps": float(field(r, a + "attention.layer_norm_rms_epsilon")),
        "sliding_window": int(field(r, a + "attention.sliding_window")),
        "query_pre_attn_scalar": head_dim if scale is None else 1.0 / float(scale) ** 2,
        "softcap": field(r, a + "final_logit_softcapping"),
        "sliding": [(i + 1) % pattern != 0 for i in range(n_layers)],
    }
    w = {}
    for t in r.tensors:
        shape = tuple(int(x) for x in reversed(t.shape))  # ggml ne order -> PyTorch order
        # The [vocab, D] embeddings stay float32 (exact: dequantized values are float32) and are widened in blocks
        # where used; a float64 copy of a 262k vocabulary would be 1.3 GB.
        dtype = np.float32 if t.name in ("token_embd.weight", "output.weight") else np.float64
        w[t.name] = np.asarray(dequantize(t.data, t.tensor_type), dtype=dtype).reshape(shape)
    return cfg, w


def gemma_rms_norm(x, stored_weight, eps):
    """Gemma3RMSNorm with the GGUF's stored weight (1 + w)."""
    w = stored_weight - 1.0
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * (1.0 + w)


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def rope(x, T, d, base):
    """rotate_half RoPE of x [heads, T, d] at positions 0..T-1 with cos/sin of cat(freqs, freqs)."""
    inv_freq = 1.0 / (base ** (np.arange(0, d, 2, dtype=np.float64) / d))
    emb = np.outer(np.arange(T, dtype=np.float64), inv_freq)
    emb = np.concatenate([emb, emb], axis=-1)[None]
    return x * np.cos(emb) + rotate_half(x) * np.sin(emb)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def attention(cfg, w, p, h, sliding):
    """Self-attention of layer prefix p on normed rows h [T, D]; returns o_proj output [T, D]."""
    T, H, Hkv, d = h.shape[0], cfg["n_heads"], cfg["n_kv_heads"], cfg["head_dim"]
    eps = cfg["rms_eps"]
    q = (h @ w[p + "attn_q.weight"].T).reshape(T, H, d).transpose(1, 0, 2)
    k = (h @ w[p + "attn_k.weight"].T).reshape(T, Hkv, d).transpose(1, 0, 2)
    v = (h @ w[p + "attn_v.weight"].T).reshape(T, Hkv, d).transpose(1, 0, 2)
    q = gemma_rms_norm(q, w[p + "attn_q_norm.weight"], eps)
    k = gemma_rms_norm(k, w[p + "attn_k_norm.weight"], eps)
    base = cfg["rope_local_base_freq"] if sliding else cfg["rope_theta"]
    q, k = rope(q, T, d, base), rope(k, T, d, base)
    k = np.repeat(k, H // Hkv, axis=0)  # repeat_kv
    v = np.repeat(v, H // Hkv, axis=0)
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    visible = j <= i
    if sliding:
        visible &= (i - j) < cfg["sliding_window"]
    s = q @ k.transpose(0, 2, 1) * cfg["query_pre_attn_scalar"] ** -0.5
    s = np.where(visible[None], s, -np.inf)
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    s /= s.sum(axis=-1, keepdims=True)
    a = (s @ v).transpose(1, 0, 2).reshape(T, H * d)
    return a @ w[p + "attn_output.weight"].T


def forward(cfg, w, ids, last_only):
    """Logits float64 [T or 1, vocab] for token ids at positions 0..T-1."""
    eps = cfg["rms_eps"]
    x = w["token_embd.weight"][np.asarray(ids)].astype(np.float64) * math.sqrt(cfg["d_model"])
    for l in range(cfg["n_layers"]):
        p = f"blk.{l}."
        h = gemma_rms_norm(x, w[p + "attn_norm.weight"], eps)
        x = x + gemma_rms_norm(attention(cfg, w, p, h, cfg["sliding"][l]), w[p + "post_attention_norm.weight"], eps)
        h = gemma_rms_norm(x, w[p + "ffn_norm.weight"], eps)
        m = (gelu_tanh(h @ w[p + "ffn_gate.weight"].T) * (h @ w[p + "ffn_up.weight"].T)) @ w[p + "ffn_down.weight"].T
        x = x + gemma_rms_norm(m, w[p + "post_ffw_norm.weight"], eps)
    if last_only:
        x = x[-1:]
    x = gemma_rms_norm(x, w["output_norm.weight"], eps)
    head = w.get("output.weight", w["token_embd.weight"])
    logits = np.empty((x.shape[0], head.shape[0]))
    for v0 in range(0, head.shape[0], 16384):  # the LM head in float64, one block of the vocabulary at a time
        logits[:, v0 : v0 + 16384] = x @ head[v0 : v0 + 16384].astype(np.float64).T
    if cfg["softcap"]:
        logits = np.tanh(logits / cfg["softcap"]) * cfg["softcap"]
    return logits


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--ids", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rows", choices=["all", "last"], default="all")
    args = ap.parse_args()
    with open(args.ids) as f:
        prompts = json.load(f)["prompts"]
    cfg, w = load(args.model)
    for i, ids in enumerate(prompts):
        forward(cfg, w, ids, args.rows == "last").astype("<f4").tofile(f"{args.out}{i}.f32")


if __name__ == "__main__":
    main()
