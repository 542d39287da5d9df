#!/usr/bin/env python3
"""Writes the binary seed files of fuzz/corpus/{gguf,safetensors}/ (checked in beside this script).

Python standard library only (struct, json), so it runs anywhere: `python3 fuzz/make_seeds.py`. The output is
deterministic; rerunning it rewrites the same bytes.

Formats: GGUF v3 as llama.cpp ggml/docs/gguf.md describes it (little-endian; metadata, tensor infos, data aligned
to general.alignment, default 32); safetensors as huggingface/safetensors README describes it (u64 header size,
JSON header, data). Quantized blocks follow ggml-common.h (block_q8_0, block_q4_0, ...); their bytes are arbitrary
but well-sized, which is all a reader may assume.

The safetensors model matches the config.json that fuzz/fuzz_safetensors.cpp writes (tiny llama: vocab 16,
hidden 8, 2 heads, 1 KV head, head dim 4, MLP 16, one layer, untied LM head), so the fuzzer starts from a file the
Hugging Face loader accepts.
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

# GGUF metadata value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<B",
              U64: "<Q", I64: "<q", F64: "<d"}
# ggml tensor types: id, elements per block, bytes per block
GGML = {"f32": (0, 1, 4), "f16": (1, 1, 2), "q4_0": (2, 32, 18), "q4_1": (3, 32, 20), "q5_0": (6, 32, 22),
        "q5_1": (7, 32, 24), "q8_0": (8, 32, 34), "q4_K": (12, 256, 144), "q5_K": (13, 256, 176),
        "q6_K": (14, 256, 210), "iq4_nl": (20, 32, 18), "bf16": (30, 1, 2)}


def gstr(s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gvalue(vtype, value):
    if vtype == STR:
        return gstr(value)
    if vtype == ARR:
        etype, items = value
        out = struct.pack("<IQ", etype, len(items))
        return out + b"".join(gvalue(etype, v) for v in items)
    return struct.pack(SCALAR_FMT[vtype], value)


def pseudo_bytes(n, seed):
    """Deterministic filler bytes (a linear congruential generator), for quantized blocks."""
    out = bytearray()
    x = seed & 0xFFFFFFFF
    for _ in range(n):
        x = (1103515245 * x + 12345) & 0x7FFFFFFF
        out.append((x >> 16) & 0xFF)
    return bytes(out)


def tensor_bytes(kind, n_elem, seed):
    """Bytes of a tensor of n_elem elements: small finite values for f32/f16/bf16, filler blocks otherwise."""
    _, block, size = GGML[kind]
    assert n_elem % block == 0
    vals = [((seed * 31 + i * 7) % 17 - 8) / 16.0 for i in range(n_elem)]
    if kind == "f32":
        return struct.pack("<%df" % n_elem, *vals)
    if kind == "f16":
        return struct.pack("<%de" % n_elem, *vals)
    if kind == "bf16":
        return b"".join(struct.pack("<I", struct.unpack("<I", struct.pack("<f", v))[0])[2:] for v in vals)
    data = bytearray(pseudo_bytes(n_elem // block * size, seed))
    # keep the fp16 scales finite: d (and m/dmin) at the block's start for the non-K types and K types, d at the
    # end for q6_K
    for b in range(n_elem // block):
        base = b * size
        if kind == "q6_K":
            data[base + size - 2:base + size] = struct.pack("<e", 0.01)
        else:
            data[base:base + 2] = struct.pack("<e", 0.01)
            if kind in ("q4_1", "q5_1", "q4_K", "q5_K"):
                data[base + 2:base + 4] = struct.pack("<e", 0.002)
    return bytes(data)


def write_gguf(path, kvs, tensors, alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, ne (ggml order), kind[, raw bytes])]."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)))
    for key, vtype, value in kvs:
        out += gstr(key) + struct.pack("<I", vtype) + gvalue(vtype, value)
    data = bytearray()
    for seed, (name, ne, kind, *raw) in enumerate(tensors):
        n = 1
        for d in ne:
            n *= d
        while len(data) % alignment:
            data.append(0)
        out += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", GGML[kind][0], len(data))
        data += raw[0] if raw else tensor_bytes(kind, n, seed + 1)
    while len(out) % alignment:
        out.append(0)
    with open(path, "wb") as f:
        f.write(bytes(out + data))


def llama_tensors(V, D, H, Hkv, d, F, L, kinds, bias=False, tied=True):
    k = dict(kinds)
    t = [("token_embd.weight", [D, V], k.get("embd", "f32")), ("output_norm.weight", [D], "f32")]
    if not tied:
        t.append(("output.weight", [D, V], k.get("out", "f32")))
    for l in range(L):
        p = "blk.%d." % l
        t += [(p + "attn_norm.weight", [D], "f32"), (p + "attn_q.weight", [D, H * d], k.get("q", "f32")),
              (p + "attn_k.weight", [D, Hkv * d], k.get("k", "f32")), (p + "attn_v.weight", [D, Hkv * d], k.get("v", "f32"))]
        if bias:
            t += [(p + "attn_q.bias", [H * d], "f32"), (p + "attn_k.bias", [Hkv * d], "f32"),
                  (p + "attn_v.bias", [Hkv * d], "f32")]
        t += [(p + "attn_output.weight", [H * d, D], k.get("o", "f32")), (p + "ffn_norm.weight", [D], "f32"),
              (p + "ffn_gate.weight", [D, F], k.get("gate", "f32")), (p + "ffn_up.weight", [D, F], k.get("up", "f32")),
              (p + "ffn_down.weight", [F, D], k.get("down", "f32"))]
    return t


def hparams(arch, V, D, H, Hkv, F, L, extra=()):
    a = arch + "."
    return [("general.architecture", STR, arch), ("general.name", STR, "fuzz seed"),
            (a + "block_count", U32, L), (a + "context_length", U32, 64), (a + "embedding_length", U32, D),
            (a + "feed_forward_length", U32, F), (a + "attention.head_count", U32, H),
            (a + "attention.head_count_kv", U32, Hkv), (a + "attention.layer_norm_rms_epsilon", F32, 1e-5),
            (a + "rope.freq_base", F32, 10000.0), (a + "vocab_size", U32, V)] + list(extra)


def bpe_vocab(pre):
    toks = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "a", "b", "c", "\u0120", "\u0120a", "ab", "abc", "1", "2",
            "12", "!", "\u010a", "\u00c3\u00a9"]
    types = [3, 3, 3] + [1] * 13
    merges = ["a b", "ab c", "\u0120 a", "1 2"]
    return [("tokenizer.ggml.model", STR, "gpt2"), ("tokenizer.ggml.pre", STR, pre),
            ("tokenizer.ggml.tokens", ARR, (STR, toks)), ("tokenizer.ggml.token_type", ARR, (I32, types)),
            ("tokenizer.ggml.merges", ARR, (STR, merges)), ("tokenizer.ggml.bos_token_id", U32, 1),
            ("tokenizer.ggml.eos_token_id", U32, 2), ("tokenizer.ggml.padding_token_id", U32, 0),
            ("tokenizer.ggml.add_bos_token", BOOL, 0),
            ("tokenizer.chat_template", STR, "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
                                             "<|im_end|>\n{% endfor %}")]


def spm_vocab():
    toks = ["<unk>", "<s>", "</s>", "\u2581", "a", "b", "\u2581a", "ab", "\u2581ab", "c", "<0x41>", "<0x0A>",
            "\u2581c", "bc", "<0xE2>", "d"]
    types = [2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 6, 6, 1, 1, 6, 1]
    scores = [0.0, 0.0, 0.0, -1.0, -2.0, -3.0, -1.5, -2.5, -1.2, -4.0, 0.0, 0.0, -3.5, -2.2, 0.0, -5.0]
    return [("tokenizer.ggml.model", STR, "llama"), ("tokenizer.ggml.tokens", ARR, (STR, toks)),
            ("tokenizer.ggml.scores", ARR, (F32, scores)), ("tokenizer.ggml.token_type", ARR, (I32, types)),
            ("tokenizer.ggml.bos_token_id", U32, 1), ("tokenizer.ggml.eos_token_id", U32, 2),
            ("tokenizer.ggml.unknown_token_id", U32, 0), ("tokenizer.ggml.add_space_prefix", BOOL, 1)]


def make_gguf(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    # 1. llama, f32/f16, byte-level BPE vocabulary (smollm pre-tokenizer), tied embeddings.
    V, D, H, Hkv, d, F, L = 16, 8, 2, 1, 4, 16, 1
    write_gguf(os.path.join(out_dir, "llama_bpe_f32.gguf"),
               hparams("llama", V, D, H, Hkv, F, L) + bpe_vocab("smollm"),
               llama_tensors(V, D, H, Hkv, d, F, L, {"q": "f16", "gate": "f16", "up": "f16", "down": "f16"}))
    # 2. qwen2 with Q/K/V biases, 32-wide rows in every 32-block quantization, untied head, rope scaling.
    V, D, H, Hkv, d, F, L = 16, 32, 2, 1, 16, 32, 1
    write_gguf(os.path.join(out_dir, "qwen2_quant.gguf"),
               hparams("qwen2", V, D, H, Hkv, F, L,
                       [("qwen2.rope.scaling.type", STR, "linear"), ("qwen2.rope.scaling.factor", F32, 2.0),
                        ("qwen2.attention.key_length", U32, d)]) + bpe_vocab("qwen2"),
               llama_tensors(V, D, H, Hkv, d, F, L,
                             {"embd": "q8_0", "out": "q4_0", "q": "q4_0", "k": "q4_1", "v": "q5_0", "o": "q5_1",
                              "gate": "iq4_nl", "up": "bf16", "down": "q8_0"}, bias=True, tied=False))
    # 3. llama with a SentencePiece vocabulary, llama3 rope frequency factors, alignment 64.
    V, D, H, Hkv, d, F, L = 16, 8, 2, 2, 4, 8, 2
    write_gguf(os.path.join(out_dir, "llama_spm_ropefreqs.gguf"),
               hparams("llama", V, D, H, Hkv, F, L, [("general.alignment", U32, 64)]) + spm_vocab(),
               llama_tensors(V, D, H, Hkv, d, F, L, {}) + [("rope_freqs.weight", [d // 2], "f32", struct.pack("<2f", 1.0, 4.0))], alignment=64)
    # 4. no model: one metadata value of every type (nested arrays too) and the K quantizations.
    kvs = [("u8", U8, 200), ("i8", I8, -5), ("u16", U16, 65000), ("i16", I16, -300), ("u32", U32, 4000000000),
           ("i32", I32, -7), ("f32", F32, 0.5), ("bool", BOOL, 1), ("str", STR, "h\u00e9llo"),
           ("u64", U64, 2 ** 63 + 5), ("i64", I64, -(2 ** 40)), ("f64", F64, -2.25),
           ("arr.u8", ARR, (U8, [1, 2, 255])), ("arr.bool", ARR, (BOOL, [0, 1])), ("arr.u64", ARR, (U64, [7])),
           ("arr.f64", ARR, (F64, [1.5, -0.0])), ("arr.str", ARR, (STR, ["x", ""])),
           ("arr.nested", ARR, (ARR, [(I16, [1, -1]), (STR, ["y"])])), ("arr.empty", ARR, (F32, []))]
    write_gguf(os.path.join(out_dir, "metadata_ktypes.gguf"), kvs,
               [("k4", [256], "q4_K"), ("k5", [256], "q5_K"), ("k6", [256, 1], "q6_K"), ("empty", [0, 3], "f32")])


def write_safetensors(path, tensors, metadata=None):
    """tensors: [(name, dtype, shape, bytes)] in data order."""
    header, data = {}, bytearray()
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + bytes(data))


def make_safetensors(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    V, D, H, Hkv, d, F = 16, 8, 2, 1, 4, 16
    dt = {"f32": "F32", "f16": "F16", "bf16": "BF16"}

    def t(name, shape, kind, seed):
        n = 1
        for s in shape:
            n *= s
        return (name, dt[kind], shape, tensor_bytes(kind, n, seed))

    p = "model.layers.0."
    tensors = [t("model.embed_tokens.weight", [V, D], "bf16", 1), t("model.norm.weight", [D], "f32", 2),
               t("lm_head.weight", [V, D], "f16", 3), t(p + "input_layernorm.weight", [D], "f32", 4),
               t(p + "self_attn.q_proj.weight", [H * d, D], "bf16", 5),
               t(p + "self_attn.k_proj.weight", [Hkv * d, D], "f16", 6),
               t(p + "self_attn.v_proj.weight", [Hkv * d, D], "f32", 7),
               t(p + "self_attn.o_proj.weight", [D, H * d], "bf16", 8),
               t(p + "post_attention_layernorm.weight", [D], "f32", 9),
               t(p + "mlp.gate_proj.weight", [F, D], "bf16", 10), t(p + "mlp.up_proj.weight", [F, D], "f16", 11),
               t(p + "mlp.down_proj.weight", [D, F], "bf16", 12)]
    write_safetensors(os.path.join(out_dir, "tiny_llama.safetensors"), tensors, {"format": "pt"})
    # Other dtypes, a scalar, an empty tensor, metadata that is not a string.
    misc = [("i64", "I64", [2], struct.pack("<2q", -1, 2)), ("u8", "U8", [3], b"\x00\x7f\xff"),
            ("bool", "BOOL", [2], b"\x00\x01"), ("f8", "F8_E4M3", [2], b"\x38\x40"),
            ("f64", "F64", [], struct.pack("<d", 3.5)), ("empty", "F32", [0, 4], b""),
            ("i16", "I16", [1, 1], struct.pack("<h", -3))]
    write_safetensors(os.path.join(out_dir, "dtypes.safetensors"), misc, {"format": "pt", "n": 1})


if __name__ == "__main__":
    make_gguf(os.path.join(HERE, "corpus", "gguf"))
    make_safetensors(os.path.join(HERE, "corpus", "safetensors"))
