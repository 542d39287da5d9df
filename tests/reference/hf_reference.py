#!/usr/bin/env python3
"""Independent numpy reference of a llama-architecture GGUF model, written the Hugging Face way.

It shares no code with ripplekv: the GGUF is read and dequantized by the `gguf` package, the Q/K rows that
llama.cpp's converter permuted are put back in Hugging Face order (transformers' reverse_permute), and the forward
follows transformers' LlamaModel: RMSNorm, rotate_half RoPE with cos/sin of cat(freqs, freqs), repeat_kv for
grouped-query attention, a full causal [T, T] softmax, SwiGLU, tied LM head. Everything is computed in float64.

Usage: hf_reference.py --model GGUF --ids IDS.json --out PREFIX
  IDS.json: {"prompts": [[id, ...], ...]}; writes PREFIX<i>.f32 = float32 logits [T_i, vocab] (little-endian).
"""

import argparse
import json

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def field(reader, key):
    """A scalar or string metadata value of the GGUF."""
    f = reader.fields[key]
    v = f.parts[f.data[0]]
    if f.types and f.types[0].name == "STRING":
        return bytes(v).decode("utf-8")
    return v.item() if hasattr(v, "item") else v[0]


def reverse_permute(w, n_head):
    """Undo llama.cpp's convert_hf_to_gguf.py `permute` (transformers' gguf integration: reverse_permute_weights)."""
    dim = w.shape[0] // n_head // 2
    return w.reshape(n_head, dim, 2, *w.shape[1:]).swapaxes(2, 1).reshape(w.shape)


def load_hf_weights(path):
    """Config dict and float32 tensors with Hugging Face names/shapes ([out, in]) from a llama GGUF."""
    r = GGUFReader(path)
    arch = field(r, "general.architecture")
    if arch != "llama":
        raise SystemExit(f"hf_reference: only llama GGUFs are handled here, got {arch}")
    cfg = {
        "n_layers": int(field(r, "llama.block_count")),
        "d_model": int(field(r, "llama.embedding_length")),
        "d_ff": int(field(r, "llama.feed_forward_length")),
        "n_heads": int(field(r, "llama.attention.head_count")),
        "n_kv_heads": int(field(r, "llama.attention.head_count_kv")),
        "rope_theta": float(field(r, "llama.rope.freq_base")),
        "rms_eps": float(field(r, "llama.attention.layer_norm_rms_epsilon")),
        "context_length": int(field(r, "llama.context_length")),
    }
    cfg["head_dim"] = cfg["d_model"] // cfg["n_heads"]
    names = {
        "token_embd.weight": "model.embed_tokens.weight",
        "output_norm.weight": "model.norm.weight",
        "output.weight": "lm_head.weight",
    }
    per_layer = {
        "attn_norm.weight": "input_layernorm.weight",
        "attn_q.weight": "self_attn.q_proj.weight",
        "attn_k.weight": "self_attn.k_proj.weight",
        "attn_v.weight": "self_attn.v_proj.weight",
        "attn_output.weight": "self_attn.o_proj.weight",
        "ffn_norm.weight": "post_attention_layernorm.weight",
        "ffn_gate.weight": "mlp.gate_proj.weight",
        "ffn_up.weight": "mlp.up_proj.weight",
        "ffn_down.weight": "mlp.down_proj.weight",
    }
    w = {}
    for t in r.tensors:
        shape = tuple(int(x) for x in reversed(t.shape))  # ggml ne order -> PyTorch order
        a = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(shape)
        name = t.name
        if name.startswith("blk."):
            _, layer, rest = name.split(".", 2)
            if rest == "attn_q.weight":
                a = reverse_permute(a, cfg["n_heads"])
            elif rest == "attn_k.weight":
                a = reverse_permute(a, cfg["n_kv_heads"])
            name = f"model.layers.{layer}.{per_layer[rest]}"
        else:
            name = names[name]
        w[name] = a
    cfg["tied"] = "lm_head.weight" not in w
    cfg["vocab_size"] = w["model.embed_tokens.weight"].shape[0]
    return cfg, w


def rms_norm(x, weight, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def forward(cfg, w, ids):
    """Logits float64 [T, vocab] for token ids at positions 0..T-1; `w` holds float64 tensors (see main)."""
    T, H, Hkv, d = len(ids), cfg["n_heads"], cfg["n_kv_heads"], cfg["head_dim"]
    f64 = lambda name: w[name]
    x = f64("model.embed_tokens.weight")[np.asarray(ids)]
    inv_freq = 1.0 / (cfg["rope_theta"] ** (np.arange(0, d, 2, dtype=np.float64) / d))
    freqs = np.outer(np.arange(T, dtype=np.float64), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)
    cos, sin = np.cos(emb)[None], np.sin(emb)[None]  # [1, T, d]
    mask = np.triu(np.full((T, T), -np.inf), k=1)
    for l in range(cfg["n_layers"]):
        p = f"model.layers.{l}."
        h = rms_norm(x, f64(p + "input_layernorm.weight"), cfg["rms_eps"])
        q = (h @ f64(p + "self_attn.q_proj.weight").T).reshape(T, H, d).transpose(1, 0, 2)
        k = (h @ f64(p + "self_attn.k_proj.weight").T).reshape(T, Hkv, d).transpose(1, 0, 2)
        v = (h @ f64(p + "self_attn.v_proj.weight").T).reshape(T, Hkv, d).transpose(1, 0, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = np.repeat(k, H // Hkv, axis=0)  # repeat_kv
        v = np.repeat(v, H // Hkv, axis=0)
        s = q @ k.transpose(0, 2, 1) / np.sqrt(d) + mask
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        s /= s.sum(axis=-1, keepdims=True)
        a = (s @ v).transpose(1, 0, 2).reshape(T, H * d)
        x = x + a @ f64(p + "self_attn.o_proj.weight").T
        h = rms_norm(x, f64(p + "post_attention_layernorm.weight"), cfg["rms_eps"])
        g = h @ f64(p + "mlp.gate_proj.weight").T
        u = h @ f64(p + "mlp.up_proj.weight").T
        x = x + (g / (1.0 + np.exp(-g)) * u) @ f64(p + "mlp.down_proj.weight").T
    x = rms_norm(x, f64("model.norm.weight"), cfg["rms_eps"])
    head = f64("model.embed_tokens.weight") if cfg["tied"] else f64("lm_head.weight")
    return x @ head.T


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--ids", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    with open(args.ids) as f:
        prompts = json.load(f)["prompts"]
    cfg, w = load_hf_weights(args.model)
    w = {name: a.astype(np.float64) for name, a in w.items()}
    for i, ids in enumerate(prompts):
        forward(cfg, w, ids).astype("<f4").tofile(f"{args.out}{i}.f32")


if __name__ == "__main__":
    main()
