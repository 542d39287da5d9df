"""Readers of what `ripplekv run --dump kept,logits` writes (README "Outputs"; host/runner/records/dumps.hpp), standard
library only, so an engine or a peer tool can apply or compare ripplekv's decisions without the C library.

    for rec in read_kept("runs/x/dumps/kept/<cell>.jsonl"):   # one dict per (task, example, layer, KV head)
        rec["positions"]                                       # ascending prompt positions that head keeps
    shape, values = read_npy("runs/x/dumps/logits/<cell>/lm_fidelity-0.npy")   # (n, V), array('f') row-major
"""
import array
import ast
import json
import sys


def read_kept(path):
    """Yields the records of a dumps/kept/<cell>.jsonl file: dicts with task, example, layer, head, T, positions."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def read_npy(path):
    """Reads a float32 NumPy .npy file (format 1.0 or 2.0, little-endian '<f4', C order): returns (shape, values)
    with values an array('f') in row-major order. Raises ValueError for any other dtype, order or a truncated file."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        raise ValueError(f"{path}: not a .npy file")
    major = data[6]
    if major == 1:
        header_len, start = int.from_bytes(data[8:10], "little"), 10
    elif major in (2, 3):
        header_len, start = int.from_bytes(data[8:12], "little"), 12
    else:
        raise ValueError(f"{path}: unsupported .npy version {major}")
    header = ast.literal_eval(data[start:start + header_len].decode("latin1"))
    if header.get("descr") != "<f4" or header.get("fortran_order"):
        raise ValueError(f"{path}: expected little-endian float32 in C order, found {header}")
    shape = tuple(header["shape"])
    count = 1
    for n in shape:
        count *= n
    values = array.array("f")
    payload = data[start + header_len:]
    if len(payload) != 4 * count:
        raise ValueError(f"{path}: {len(payload)} data bytes for shape {shape} (expected {4 * count})")
    values.frombytes(payload)
    if sys.byteorder != "little":
        values.byteswap()
    return shape, values
