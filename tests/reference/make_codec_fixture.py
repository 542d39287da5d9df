#!/usr/bin/env python3
"""The numpy reference of ripplekv's KV codecs (host/cache/codec.hpp), written from the formats' definitions and not
from the C++: writes tests/fixtures/codecs/codec_numpy.json, which tests/cache/test_codec_numpy.cpp compares against.

One KV head (T = 48 entries, d = 64 channels) and two query heads (a GQA group of 2) are generated from an integer
hash, so the C++ test makes the same float32 inputs without storing them:
    u(i) = ((i * 2654435761 + seed) mod 2^32) mod 20001,  x = float32((u - 10000) / 1000)   (float64 division)
keys K[t, c] = x(t * d + c, seed 1), plus 40 on channel 5 (an outlier channel, KIVI's motive); values V[t, c] =
x(t * d + c, seed 2); queries q[h, c] = x(h * d + c, seed 3) / 4.

For every codec the fixture holds the dequantized key and value rows of sampled entries and the attention output of
the two query heads over the whole dequantized cache: o[h] = softmax(q[h] K'^T / sqrt(d)) V' (float64).

Codecs (fp16 scales; ceil16 / floor16 = the fp16 value at or above / below, via np.nextafter on float16):
    int  per token, groups along d: symmetric s = ceil16(amax / (2^(b-1) - 1)), q = round_half_away(x / s), x' = q s;
         asymmetric m = floor16(min), s = ceil16((max - m) / (2^b - 1)), q = round_half_away((x - m) / s), x' = m + q s
    kivi keys per channel in groups of G entries (asymmetric), values per token in groups of G channels; the newest
         R entries float32 (packed: floor((T - R) / G) G entries)
    q8_0 / q4_0  ggml-quants.c quantize_row_q8_0_ref / quantize_row_q4_0_ref and their dequantization

Run with any Python that has numpy (e.g. the fixture venv: ~/.cache/ripplekv/venv/bin/python). Never run by
scripts/test.sh; the fixture is committed.
"""
import json
import math
import sys
from pathlib import Path

import numpy as np

T, D, H = 48, 64, 2
SAMPLED = [0, 1, 17, 31, 32, 40, 47]
OUT = Path(__file__).resolve().parent.parent / "fixtures" / "codecs" / "codec_numpy.json"


def hashed(n, seed):
    i = np.arange(n, dtype=np.uint64)
    u = ((i * np.uint64(2654435761) + np.uint64(seed)) % np.uint64(2**32)) % np.uint64(20001)
    return ((u.astype(np.float64) - 10000.0) / 1000.0).astype(np.float32)


def inputs():
    k = hashed(T * D, 1).reshape(T, D)
    k[:, 5] += np.float32(40.0)
    v = hashed(T * D, 2).reshape(T, D)
    q = (hashed(H * D, 3) / np.float32(4.0)).astype(np.float32).reshape(H, D)
    return k, v, q


def fp16_toward(x, up):
    h = np.float16(x)
    if up and np.float32(h) < x:
        h = np.nextafter(h, np.float16(np.inf))
    if not up and np.float32(h) > x:
        h = np.nextafter(h, np.float16(-np.inf))
    return np.float32(h)


def round_half_away(y):
    y = np.asarray(y, dtype=np.float64)  # exact for float32 inputs
    return np.sign(y) * np.floor(np.abs(y) + 0.5)


def int_group(x, bits, symmetric):
    x = x.astype(np.float32)
    if symmetric:
        qmax = 2 ** (bits - 1) - 1
        s = fp16_toward(np.float32(np.max(np.abs(x)) / np.float32(qmax)), True)
        q = np.clip(round_half_away(x / s), -qmax, qmax) if s > 0 else np.zeros_like(x)
        return (q.astype(np.float32) * s).astype(np.float32)
    levels = 2**bits - 1
    m = fp16_toward(np.min(x), False)
    s = fp16_toward(np.float32((np.max(x) - m) / np.float32(levels)), True)
    q = np.clip(round_half_away((x - m) / s), 0, levels) if s > 0 else np.zeros_like(x)
    return (m + q.astype(np.float32) * s).astype(np.float32)


def int_rows(a, bits, group, symmetric):
    out = np.empty_like(a)
    for t in range(a.shape[0]):
        for g in range(0, a.shape[1], group):
            out[t, g:g + group] = int_group(a[t, g:g + group], bits, symmetric)
    return out


def q8_0_rows(a):
    out = np.empty_like(a)
    for t in range(a.shape[0]):
        for b in range(0, a.shape[1], 32):
            x = a[t, b:b + 32]
            d = np.float32(np.max(np.abs(x)) / np.float32(127))
            idv = np.float32(1.0) / d if d != 0 else np.float32(0)
            q = round_half_away(x * idv)  # roundf
            out[t, b:b + 32] = q.astype(np.float32) * np.float32(np.float16(d))
    return out


def q4_0_rows(a):
    out = np.empty_like(a)
    for t in range(a.shape[0]):
        for b in range(0, a.shape[1], 32):
            x = a[t, b:b + 32]
            mx = x[np.argmax(np.abs(x))]  # the first element of largest magnitude, signed
            d = np.float32(mx / np.float32(-8))
            idv = np.float32(1.0) / d if d != 0 else np.float32(0)
            q = np.minimum(15, np.trunc(x * idv + np.float32(8.5)))  # (int8_t) truncates toward zero
            out[t, b:b + 32] = (q.astype(np.float32) - np.float32(8)) * np.float32(np.float16(d))
    return out


def kivi(k, v, bits, group, residual):
    packed = max(0, T - residual) // group * group
    kd, vd = k.copy(), v.copy()
    for g0 in range(0, packed, group):
        for c in range(D):
            kd[g0:g0 + group, c] = int_group(k[g0:g0 + group, c], bits, False)
    vd[:packed] = int_rows(v[:packed], bits, group, False)
    return kd, vd


def attention(q, k, v):
    s = (q.astype(np.float64) @ k.astype(np.float64).T) / math.sqrt(D)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return p @ v.astype(np.float64)


def main():
    k, v, q = inputs()
    codecs = {
        "int8-sym-g32": {"format": "int", "bits": 8, "group": 32, "symmetric": True, "residual": 0},
        "int4-asym-g32": {"format": "int", "bits": 4, "group": 32, "symmetric": False, "residual": 0},
        "int4-sym-g16": {"format": "int", "bits": 4, "group": 16, "symmetric": True, "residual": 0},
        "int2-asym-g32": {"format": "int", "bits": 2, "group": 32, "symmetric": False, "residual": 0},
        "kivi2-g32-r16": {"format": "kivi", "bits": 2, "group": 32, "residual": 16},
        "q8_0": {"format": "q8_0", "residual": 0},
        "q4_0": {"format": "q4_0", "residual": 0},
    }
    out = {"T": T, "d": D, "heads": H, "sampled": SAMPLED, "codecs": {},
           "attention_f32_cache": [[float(x) for x in row] for row in attention(q, k, v)]}
    for name, spec in codecs.items():
        if spec["format"] == "int":
            kd = int_rows(k, spec["bits"], spec["group"], spec["symmetric"])
            vd = int_rows(v, spec["bits"], spec["group"], spec["symmetric"])
        elif spec["format"] == "kivi":
            kd, vd = kivi(k, v, spec["bits"], spec["group"], spec["residual"])
        elif spec["format"] == "q8_0":
            kd, vd = q8_0_rows(k), q8_0_rows(v)
        else:
            kd, vd = q4_0_rows(k), q4_0_rows(v)
        o = attention(q, kd, vd)
        out["codecs"][name] = {
            "spec": spec,
            "keys": [[float(x) for x in kd[t]] for t in SAMPLED],
            "values": [[float(x) for x in vd[t]] for t in SAMPLED],
            "attention": [[float(x) for x in row] for row in o],
        }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out) + "\n")
    print(f"wrote {OUT} (numpy {np.__version__})", file=sys.stderr)


if __name__ == "__main__":
    main()
