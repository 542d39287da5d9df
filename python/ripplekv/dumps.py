"""Readers of what `ripplekv run --dump kept,logits` writes (README "Outputs"; host/runner/records/dumps.hpp), standard
library only, so an engine or a peer tool can apply or compare ripplekv's decisions without the C library.

    for rec in read_kept("runs/x/dumps/kept/<cell>.jsonl"):   # one dict per (task, example, layer, KV head)
        rec["positions"]                                       # ascending prompt positions that head keeps
    shape, values = read_npy("runs/x/dumps/logits/<cell>/lm_fidelity-0.npy")   # (n, V), array('f') row-major

Both readers raise ValueError (naming the file, and the line or header field) for anything ripplekv does not write,
and read regular files only: a FIFO, a device or a folder is refused without reading from it.
"""
import array
import json
import os
import re
import stat
import sys


def _read_regular(path):
    """The bytes of `path`, which must be a regular file. Opened with O_NONBLOCK so that a FIFO without a writer
    cannot block the open; the type is checked on the open descriptor (fstat), so it is the file read. Raises
    ValueError for anything else and OSError when the file cannot be opened."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{path}: not a regular file (a FIFO, device or folder is not a ripplekv dump)")
        chunks, left = [], st.st_size
        while left > 0:  # at most the size fstat gave: a file that grows while read is read up to that size
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def read_kept(path):
    """Yields the records of a dumps/kept/<cell>.jsonl file: dicts with task (str), example, layer, head (ints >= 0),
    T (int >= 1) and positions (a list of ints, strictly ascending, each in [0, T)). Blank lines are skipped.
    Raises ValueError naming the file and line for a line that is not such a record (not JSON, not an object, a
    missing or mistyped field, positions out of order, repeated or out of range) and for a file that is not a regular
    file or not UTF-8."""
    try:
        text = _read_regular(path).decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 ({e})") from None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            rec = json.loads(line)
        except ValueError as e:
            raise ValueError(f"{where}: not JSON ({e})") from None
        if not isinstance(rec, dict):
            raise ValueError(f"{where}: a record must be a JSON object, found {type(rec).__name__}")
        if not isinstance(rec.get("task"), str):
            raise ValueError(f"{where}: 'task' must be a string")
        for key, low in (("example", 0), ("layer", 0), ("head", 0), ("T", 1)):
            if not _is_int(rec.get(key)) or rec[key] < low:
                raise ValueError(f"{where}: '{key}' must be an integer >= {low}, found {rec.get(key)!r}")
        positions = rec.get("positions")
        if not isinstance(positions, list) or not all(_is_int(p) for p in positions):
            raise ValueError(f"{where}: 'positions' must be a list of integers")
        for i, p in enumerate(positions):
            if not 0 <= p < rec["T"]:
                raise ValueError(f"{where}: position {p} (entry {i}) is outside [0, T = {rec['T']})")
            if i and p <= positions[i - 1]:
                raise ValueError(f"{where}: positions must be strictly ascending (unique): {positions[i - 1]} then {p}"
                                 f" at entry {i}")
        yield rec


# The header of a .npy file as ripplekv writes it (NEP 1): a Python dict literal of exactly three keys, parsed here
# by a small grammar (never eval): quoted strings, True/False, and a tuple of non-negative decimal integers.
_TOKEN = re.compile(r"\s*(?:(?P<str>'[^'\\]*'|\"[^\"\\]*\")|(?P<int>[0-9]+)(?![0-9A-Za-z_.])|(?P<word>[A-Za-z_]+)"
                    r"|(?P<punct>[{}():,]))")


def _npy_tokens(path, text):
    pos, out = 0, []
    while pos < len(text):
        if not text[pos:].strip():
            break
        m = _TOKEN.match(text, pos)
        if not m:
            raise ValueError(f"{path}: malformed .npy header at character {pos}: {text[pos:pos + 20]!r}")
        kind = m.lastgroup
        value = m.group(kind)
        out.append((kind, value[1:-1] if kind == "str" else int(value) if kind == "int" else value))
        pos = m.end()
    return out


def _parse_npy_header(path, text):
    """The header dict {descr: str, fortran_order: bool, shape: tuple of ints >= 0}; ValueError for anything else."""
    toks = _npy_tokens(path, text)
    i = 0

    def take(kind=None, value=None):
        nonlocal i
        if i >= len(toks):
            raise ValueError(f"{path}: .npy header ends early: {text!r}")
        k, v = toks[i]
        if (kind and k != kind) or (value is not None and v != value):
            raise ValueError(f"{path}: malformed .npy header (unexpected {v!r}): {text!r}")
        i += 1
        return k, v

    def peek(value):
        return i < len(toks) and toks[i][0] == "punct" and toks[i][1] == value

    header = {}
    take("punct", "{")
    while not peek("}"):
        _, key = take("str")
        if key in header:
            raise ValueError(f"{path}: .npy header repeats the key '{key}'")
        take("punct", ":")
        if key == "descr":
            header[key] = take("str")[1]
        elif key == "fortran_order":
            word = take("word")[1]
            if word not in ("True", "False"):
                raise ValueError(f"{path}: .npy header field 'fortran_order' must be True or False, found {word!r}")
            header[key] = word == "True"
        elif key == "shape":
            take("punct", "(")
            dims = []
            while not peek(")"):
                if i < len(toks) and toks[i][0] != "int":
                    raise ValueError(f"{path}: .npy header field 'shape' must hold non-negative integers, found "
                                     f"{toks[i][1]!r}: {text!r}")
                dims.append(take("int")[1])
                if not peek(")"):
                    take("punct", ",")
            take("punct", ")")
            header[key] = tuple(dims)
        else:
            raise ValueError(f"{path}: unknown .npy header key '{key}'")
        if not peek("}"):
            take("punct", ",")
    take("punct", "}")
    if i != len(toks):
        raise ValueError(f"{path}: text after the .npy header dict: {text!r}")
    missing = [k for k in ("descr", "fortran_order", "shape") if k not in header]
    if missing:
        raise ValueError(f"{path}: .npy header lacks {', '.join(missing)}")
    return header


def read_npy(path):
    """Reads a float32 NumPy .npy file as `--dump logits` writes it (format 1.0, 2.0 or 3.0, little-endian '<f4',
    C order): returns (shape, values), shape a tuple of non-negative ints and values an array('f') of their product
    in row-major order. Raises ValueError naming the file for a file that is not regular (FIFO, device, folder), a
    bad magic or version, a malformed header (parsed without eval), any other dtype or order, a dimension that is not a
    non-negative integer, or a data size other than 4 x the product of the shape (truncated or extended)."""
    data = _read_regular(path)
    if data[:6] != b"\x93NUMPY" or len(data) < 10:
        raise ValueError(f"{path}: not a .npy file")
    major, minor = data[6], data[7]
    if major == 1:
        header_len, start = int.from_bytes(data[8:10], "little"), 10
    elif major in (2, 3) and len(data) >= 12:
        header_len, start = int.from_bytes(data[8:12], "little"), 12
    else:
        raise ValueError(f"{path}: unsupported .npy version {major}.{minor}")
    if minor != 0:
        raise ValueError(f"{path}: unsupported .npy version {major}.{minor}")
    if start + header_len > len(data):
        raise ValueError(f"{path}: .npy header of {header_len} bytes runs past the end of the file ({len(data)} bytes)")
    try:
        text = data[start:start + header_len].decode("utf-8" if major == 3 else "latin1")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: .npy header is not UTF-8 ({e})") from None
    header = _parse_npy_header(path, text)
    if header["descr"] != "<f4" or header["fortran_order"]:
        raise ValueError(f"{path}: expected little-endian float32 ('<f4') in C order, found descr "
                         f"{header['descr']!r}, fortran_order {header['fortran_order']}")
    shape = header["shape"]
    count = 1
    for n in shape:
        count *= n
    payload = data[start + header_len:]
    if len(payload) != 4 * count:
        raise ValueError(f"{path}: {len(payload)} data bytes for shape {shape} (expected {4 * count})")
    values = array.array("f")
    values.frombytes(payload)
    if sys.byteorder != "little":
        values.byteswap()
    return shape, values
