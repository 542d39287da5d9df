#!/usr/bin/env python3
"""Writes a GGUF with the shapes of a real model and random quantized weights, to measure memory and speed at scale.

Shapes (--shape): llama-3.1-8b (32 layers, hidden 4096, FFN 14336, 32 query / 8 KV heads of 128, vocabulary
128256, untied output; about 4.6 GB). Every matrix is Q4_0 except output.weight, which is Q6_K as in llama.cpp's
Q4_0 files (so the loader's requantization to Q8_0 runs at scale); norms are F32 ones. Block layouts: llama.cpp
ggml-common.h (block_q4_0: fp16 d + 16 bytes of nibbles; block_q6_K: ql[128], qh[64], int8 scales[16], fp16 d).
Scales are set so that a weight is about 1/sqrt(input width) in size; quants are random (seeded). No tokenizer:
load it with load_model / bench_memory, not `ripplekv generate`. Needs numpy (the reference venv of
scripts/fetch-assets has it).

Usage: scripts/make-synthetic-gguf.py OUT.gguf [--shape llama-3.1-8b] [--seed 0]
"""
import argparse
import struct
import sys

import numpy as np

SHAPES = {
    "llama-3.1-8b": dict(layers=32, hidden=4096, ffn=14336, heads=32, kv_heads=8, vocab=128256, ctx=131072,
                         theta=500000.0),
}
F32, Q4_0, Q6_K = 0, 2, 14


def kv_string(key, value):
    k, v = key.encode(), value.encode()
    return struct.pack("<Q", len(k)) + k + struct.pack("<IQ", 8, len(v)) + v


def kv_u32(key, value):
    k = key.encode()
    return struct.pack("<Q", len(k)) + k + struct.pack("<II", 4, value)


def kv_f32(key, value):
    k = key.encode()
    return struct.pack("<Q", len(k)) + k + struct.pack("<If", 6, value)


def q4_0_pool(rng, n_blocks, cols):
    """n_blocks random Q4_0 blocks (18 bytes): |w| <= 8 d ~ 1 / sqrt(cols)."""
    blocks = np.empty((n_blocks, 18), dtype=np.uint8)
    d = np.float16(1.0 / (8.0 * np.sqrt(cols)))
    blocks[:, 0:2] = np.frombuffer(d.tobytes(), dtype=np.uint8)
    blocks[:, 2:] = rng.integers(0, 256, size=(n_blocks, 16), dtype=np.uint8)
    return blocks


def q6_k_pool(rng, n_blocks, cols):
    """n_blocks random Q6_K blocks (210 bytes): |w| <= 32 * 8 * d ~ 1 / sqrt(cols)."""
    blocks = np.empty((n_blocks, 210), dtype=np.uint8)
    blocks[:, :192] = rng.integers(0, 256, size=(n_blocks, 192), dtype=np.uint8)
    blocks[:, 192:208] = 8
    d = np.float16(1.0 / (256.0 * np.sqrt(cols)))
    blocks[:, 208:210] = np.frombuffer(d.tobytes(), dtype=np.uint8)
    return blocks


def tensors(s):
    """(name, ne in ggml order, type) for every tensor."""
    D, F, V, d = s["hidden"], s["ffn"], s["vocab"], s["hidden"] // s["heads"]
    out = [("token_embd.weight", (D, V), Q4_0), ("output_norm.weight", (D,), F32), ("output.weight", (D, V), Q6_K)]
    for l in range(s["layers"]):
        p = f"blk.{l}."
        out += [(p + "attn_norm.weight", (D,), F32), (p + "attn_q.weight", (D, s["heads"] * d), Q4_0),
                (p + "attn_k.weight", (D, s["kv_heads"] * d), Q4_0), (p + "attn_v.weight", (D, s["kv_heads"] * d), Q4_0),
                (p + "attn_output.weight", (s["heads"] * d, D), Q4_0), (p + "ffn_norm.weight", (D,), F32),
                (p + "ffn_gate.weight", (D, F), Q4_0), (p + "ffn_up.weight", (D, F), Q4_0),
                (p + "ffn_down.weight", (F, D), Q4_0)]
    return out


def nbytes(ne, typ):
    n = int(np.prod(ne))
    return {F32: 4 * n, Q4_0: n // 32 * 18, Q6_K: n // 256 * 210}[typ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--shape", default="llama-3.1-8b", choices=sorted(SHAPES))
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    s = SHAPES[a.shape]
    rng = np.random.default_rng(a.seed)
    kvs = [kv_string("general.architecture", "llama"), kv_string("general.name", f"synthetic {a.shape}"),
           kv_u32("llama.block_count", s["layers"]), kv_u32("llama.context_length", s["ctx"]),
           kv_u32("llama.embedding_length", s["hidden"]), kv_u32("llama.feed_forward_length", s["ffn"]),
           kv_u32("llama.attention.head_count", s["heads"]), kv_u32("llama.attention.head_count_kv", s["kv_heads"]),
           kv_f32("llama.rope.freq_base", s["theta"]), kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5),
           kv_u32("llama.vocab_size", s["vocab"]), kv_u32("general.alignment", 32)]
    ts = tensors(s)
    header = b"GGUF" + struct.pack("<IQQ", 3, len(ts), len(kvs)) + b"".join(kvs)
    offset = 0
    for name, ne, typ in ts:
        nb = name.encode()
        header += struct.pack("<Q", len(nb)) + nb + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
        header += struct.pack("<IQ", typ, offset)
        offset += (nbytes(ne, typ) + 31) // 32 * 32
    pools = {Q4_0: q4_0_pool(rng, 1 << 20, s["hidden"]), Q6_K: q6_k_pool(rng, 1 << 16, s["hidden"])}
    with open(a.out, "wb") as f:
        f.write(header + b"\0" * ((32 - len(header) % 32) % 32))
        for i, (name, ne, typ) in enumerate(ts):
            n = nbytes(ne, typ)
            if typ == F32:
                data = np.ones(int(np.prod(ne)), dtype="<f4").tobytes()
            else:
                pool = pools[typ].reshape(-1)
                start = (i * 7919 * pool.shape[0] // 1000) % pool.size // pools[typ].shape[1] * pools[typ].shape[1]
                reps = (start + n) // pool.size + 1
                data = np.tile(pool, reps)[start:start + n].tobytes() if reps > 1 else pool[start:start + n].tobytes()
            f.write(data + b"\0" * ((32 - n % 32) % 32))
    print(f"wrote {a.out}: {offset / 1e9:.2f} GB of tensor data, {len(ts)} tensors", file=sys.stderr)


if __name__ == "__main__":
    main()
