"""The dump readers (python/ripplekv/dumps.py) on a table of malformed .npy and kept files: each is refused with
ValueError (never IndexError, SyntaxError, KeyError or TypeError, never a shape with negative, float or bool entries),
FIFOs and devices are refused without blocking, and the files ripplekv writes still read back.

    python3 test_dump_readers.py
"""
import importlib.util
import os
import struct
import sys
import tempfile
import threading
import unittest

SRC = os.environ.get("RKV_SOURCE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
# The module alone (standard library only), so this test needs neither the C library nor its build.
_spec = importlib.util.spec_from_file_location("ripplekv_dumps", os.path.join(SRC, "python", "ripplekv", "dumps.py"))
_dumps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_dumps)
read_kept, read_npy = _dumps.read_kept, _dumps.read_npy


def npy(header, payload=b"", version=b"\x01\x00"):
    """A .npy file with `header` (bytes) padded as NEP 1 pads it, then `payload`."""
    wide = version[0] != 1
    pre = 12 if wide else 10
    header += b" " * ((64 - (pre + len(header) + 1) % 64) % 64) + b"\n"
    size = struct.pack("<I" if wide else "<H", len(header))
    return b"\x93NUMPY" + version + size + header + payload


def floats(*v):
    return struct.pack("<%df" % len(v), *v)


GOOD = b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"

# (name, file bytes): every one must raise ValueError.
BAD_NPY = [
    ("empty file", b""),
    ("bad magic", b"\x93NUMPX\x01\x00" + b"\x00" * 60),
    ("magic only", b"\x93NUMPY"),
    ("version 9", npy(GOOD, floats(*range(6)), version=b"\x09\x00")),
    ("version 1.5", npy(GOOD, floats(*range(6)), version=b"\x01\x05")),
    ("header longer than file", b"\x93NUMPY\x01\x00\xff\xff{'descr': '<f4'}"),
    ("negative dim", npy(b"{'descr': '<f4', 'fortran_order': False, 'shape': (-2, -3), }", floats(*range(6)))),
    ("negative dims whose product matches", npy(b"{'descr': '<f4', 'fortran_order': False, 'shape': (-1, -4), }",
                                                floats(*range(4)))),
    ("float dim", npy(b"{'descr': '<f4', 'fortran_order': False, 'shape': (2.0, 3), }", floats(*range(6)))),
    ("bool dim", npy(b"{'descr': '<f4', 'fortran_order': False, 'shape': (True, 3), }", floats(*range(3)))),
    ("string dim", npy(b"{'descr': '<f4', 'fortran_order': False, 'shape': ('2', 3), }", floats(*range(6)))),
    ("shape is a list", npy(b"{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }", floats(*range(6)))),
    ("shape is an int", npy(b"{'descr': '<f4', 'fortran_order': False, 'shape': 6, }", floats(*range(6)))),
    ("header not a dict", npy(b"[1, 2, 3]", floats(1, 2, 3))),
    ("header a syntax error", npy(b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3", floats(*range(6)))),
    ("header an expression", npy(b"__import__('os').getpid()", floats(*range(6)))),
    ("missing shape", npy(b"{'descr': '<f4', 'fortran_order': False, }", floats(*range(6)))),
    ("missing descr", npy(b"{'fortran_order': False, 'shape': (2, 3), }", floats(*range(6)))),
    ("repeated key", npy(b"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,), }",
                         floats(*range(6)))),
    ("unknown key", npy(b"{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'extra': 1}", floats(*range(6)))),
    ("descr not a string", npy(b"{'descr': 4, 'fortran_order': False, 'shape': (6,), }", floats(*range(6)))),
    ("float64", npy(b"{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", floats(*range(6)))),
    ("big-endian float32", npy(b"{'descr': '>f4', 'fortran_order': False, 'shape': (6,), }", floats(*range(6)))),
    ("structured dtype", npy(b"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }",
                             floats(*range(6)))),
    ("fortran order", npy(b"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", floats(*range(6)))),
    ("fortran_order not a bool", npy(b"{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3), }", floats(*range(6)))),
    ("truncated data", npy(GOOD, floats(*range(5)))),
    ("extra data", npy(GOOD, floats(*range(7)))),
    ("trailing text after the dict", npy(GOOD + b" junk", floats(*range(6)))),
]

# (name, file text): every one must raise ValueError when the records are read.
BAD_KEPT = [
    ("not JSON", "{task: 1}\n"),
    ("a list, not an object", "[1, 2]\n"),
    ("a number", "3\n"),
    ("missing positions", '{"task": "t", "example": 0, "layer": 0, "head": 0, "T": 8}\n'),
    ("missing T", '{"task": "t", "example": 0, "layer": 0, "head": 0, "positions": [1]}\n'),
    ("task not a string", '{"task": 1, "example": 0, "layer": 0, "head": 0, "T": 8, "positions": [1]}\n'),
    ("negative layer", '{"task": "t", "example": 0, "layer": -1, "head": 0, "T": 8, "positions": [1]}\n'),
    ("float head", '{"task": "t", "example": 0, "layer": 0, "head": 0.5, "T": 8, "positions": [1]}\n'),
    ("bool example", '{"task": "t", "example": true, "layer": 0, "head": 0, "T": 8, "positions": [1]}\n'),
    ("T zero", '{"task": "t", "example": 0, "layer": 0, "head": 0, "T": 0, "positions": []}\n'),
    ("positions not a list", '{"task": "t", "example": 0, "layer": 0, "head": 0, "T": 8, "positions": 3}\n'),
    ("float position", '{"task": "t", "example": 0, "layer": 0, "head": 0, "T": 8, "positions": [1.5]}\n'),
    ("string position", '{"task": "t", "example": 0, "layer": 0, "head": 0, "T": 8, "positions": ["1"]}\n'),
    ("descending", '{"task": "t", "example": 0, "layer": 0, "head": 0, "T": 8, "positions": [5, 2]}\n'),
    ("repeated", '{"task": "t", "example": 0, "layer": 0, "head": 0, "T": 8, "positions": [2, 2]}\n'),
    ("position = T", '{"task": "t", "example": 0, "layer": 0, "head": 0, "T": 8, "positions": [0, 8]}\n'),
    ("negative position", '{"task": "t", "example": 0, "layer": 0, "head": 0, "T": 8, "positions": [-1, 2]}\n'),
    ("second line bad", '{"task": "t", "example": 0, "layer": 0, "head": 0, "T": 8, "positions": [0]}\n'
                        '{"task": "t", "example": 0, "layer": 1, "head": 0, "T": 8, "positions": [9]}\n'),
]


class Npy(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def write(self, name, data):
        path = os.path.join(self.tmp.name, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def test_well_formed_files_read_back(self):
        values = [0.5, -1.0, 2.25, 3.0, 1e-3, -7.5]
        expect = [struct.unpack("<f", struct.pack("<f", v))[0] for v in values]
        for version in (b"\x01\x00", b"\x02\x00", b"\x03\x00"):
            shape, got = read_npy(self.write("a.npy", npy(GOOD, floats(*values), version)))
            self.assertEqual(shape, (2, 3))
            self.assertEqual(list(got), expect)
        # One-dimensional with a trailing comma, double quotes, no trailing comma, a zero dimension, a scalar.
        shape, got = read_npy(self.write("b.npy", npy(b'{"descr": "<f4", "fortran_order": False, "shape": (6,)}',
                                                      floats(*values))))
        self.assertEqual((shape, list(got)), ((6,), expect))
        shape, got = read_npy(self.write("c.npy", npy(b"{'descr': '<f4', 'fortran_order': False, 'shape': (0, 5), }")))
        self.assertEqual((shape, list(got)), ((0, 5), []))
        shape, got = read_npy(self.write("d.npy", npy(b"{'descr': '<f4', 'fortran_order': False, 'shape': (), }",
                                                      floats(4.0))))
        self.assertEqual((shape, list(got)), ((), [4.0]))

    def test_malformed_files_raise_value_error(self):
        for name, data in BAD_NPY:
            with self.subTest(name):
                path = self.write("bad.npy", data)
                with self.assertRaises(ValueError) as e:
                    read_npy(path)
                self.assertIn(path, str(e.exception))

    def test_fifo_is_refused_without_blocking(self):
        fifo = os.path.join(self.tmp.name, "f.npy")
        os.mkfifo(fifo)
        result = []

        def read():
            try:
                read_npy(fifo)
                result.append("returned")
            except ValueError as e:
                result.append(str(e))

        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(10)
        self.assertFalse(t.is_alive(), "read_npy blocked on a FIFO with no writer")
        self.assertEqual(len(result), 1)
        self.assertIn("not a regular file", result[0])

    def test_devices_and_folders_are_refused(self):
        for path in ("/dev/zero", "/dev/null", self.tmp.name):
            with self.subTest(path):
                with self.assertRaises(ValueError) as e:
                    read_npy(path)
                self.assertIn("not a regular file", str(e.exception))
                with self.assertRaises(ValueError):
                    list(read_kept(path))


class Kept(unittest.TestCase):
    def test_well_formed_records_read_back(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "k.jsonl")
            with open(path, "w") as f:
                f.write('{"task": "lm_fidelity", "example": 0, "layer": 1, "head": 0, "T": 8, "positions": [0, 5, 7]}\n'
                        "\n"
                        '{"task": "needle", "example": 2, "layer": 0, "head": 1, "T": 1, "positions": []}\n')
            recs = list(read_kept(path))
            self.assertEqual([r["positions"] for r in recs], [[0, 5, 7], []])
            self.assertEqual([(r["task"], r["example"], r["layer"], r["head"], r["T"]) for r in recs],
                             [("lm_fidelity", 0, 1, 0, 8), ("needle", 2, 0, 1, 1)])

    def test_malformed_records_raise_value_error(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "k.jsonl")
            for name, text in BAD_KEPT:
                with self.subTest(name):
                    with open(path, "w") as f:
                        f.write(text)
                    with self.assertRaises(ValueError) as e:
                        list(read_kept(path))
                    self.assertIn(path + ":" + str(text.count("\n")), str(e.exception))


if __name__ == "__main__":
    unittest.main()
