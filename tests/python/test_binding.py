"""The Python binding (python/ripplekv) under ctest.

    python3 test_binding.py unit    plugins, allocate (hand-computed budgets), errors carrying the C message
    python3 test_binding.py model   SmolLM2: tokenize/detokenize/generate, profile, run configs/ci-tiny.toml,
                                    cancellation; exits 77 (skip) without the model unless CI=true
"""
import glob
import json
import os
import sys
import tempfile
import unittest

SRC = os.environ.get("RKV_SOURCE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "python"))
import ripplekv  # noqa: E402

CACHE = os.environ.get("RIPPLEKV_CACHE") or os.path.expanduser("~/.cache/ripplekv")
MODEL = os.path.join(CACHE, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
CONFIG = os.path.join(SRC, "configs", "ci-tiny.toml")


class Unit(unittest.TestCase):
    def test_dump_readers(self):
        # A .npy 1.0 file built by hand from NEP 1: magic, version, u16 header length, dict padded to 64 bytes.
        import struct
        header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
        header += b" " * ((64 - (10 + len(header) + 1) % 64) % 64) + b"\n"
        values = [0.5, -1.0, 2.25, 3.0, 1e-3, -7.5]
        with tempfile.TemporaryDirectory() as tmp:
            npy = os.path.join(tmp, "a.npy")
            with open(npy, "wb") as f:
                f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + struct.pack("<6f", *values))
            shape, got = ripplekv.read_npy(npy)
            self.assertEqual(shape, (2, 3))
            self.assertEqual(list(got), [struct.unpack("<f", struct.pack("<f", v))[0] for v in values])
            with open(npy, "r+b") as f:
                f.truncate(os.path.getsize(npy) - 4)
            with self.assertRaises(ValueError):
                ripplekv.read_npy(npy)
            kept = os.path.join(tmp, "k.jsonl")
            with open(kept, "w") as f:
                f.write('{"task": "lm_fidelity", "example": 0, "layer": 1, "head": 0, "T": 8, "positions": [0, 5, 7]}\n')
            self.assertEqual([r["positions"] for r in ripplekv.read_kept(kept)], [[0, 5, 7]])

    def test_results_of_a_sweep_folder_read_only_its_runs(self):
        # results() on a folder with runs.json (a sweep over model.path / data.eval.seed) reads runs/<name>/results.jsonl
        # of each listed run, adding "run"; anything else in runs.json, a linked run folder, a FIFO or a device as
        # results.jsonl is refused by name, never followed or read.
        with tempfile.TemporaryDirectory() as tmp:
            for name in ("a", "b"):
                os.makedirs(os.path.join(tmp, "runs", name))
                with open(os.path.join(tmp, "runs", name, "results.jsonl"), "w") as f:
                    f.write(json.dumps({"cell": "c", "value": name}) + "\n")

            def record(runs):
                with open(os.path.join(tmp, "runs.json"), "w") as f:
                    json.dump({"schema": "ripplekv.runs/1", "runs": runs}, f)

            def refused(fragment):
                with self.assertRaises(ripplekv.Error) as e:
                    ripplekv.results(tmp)
                self.assertEqual(e.exception.status, ripplekv.ERROR_INVALID_ARGUMENT, e.exception.message)
                self.assertIn(fragment, e.exception.message)

            record([{"name": "a", "folder": "runs/a"}, {"name": "b", "folder": "runs/b"}])
            self.assertEqual(ripplekv.results(tmp), [{"cell": "c", "value": "a", "run": "a"},
                                                     {"cell": "c", "value": "b", "run": "b"}])
            for bad in ({"name": "a", "folder": "/etc"}, {"name": "..", "folder": "runs/.."},
                        {"name": "a", "folder": 5}, {"name": None, "folder": "runs/a"}):
                record([bad])
                refused("a run that is not a folder under runs/")
            record([])
            refused("runs.json: not ripplekv's record of a sweep of runs")
            os.symlink(os.path.join(tmp, "runs", "a"), os.path.join(tmp, "runs", "c"))
            record([{"name": "c", "folder": "runs/c"}])
            refused("nor a link")
            os.remove(os.path.join(tmp, "runs", "b", "results.jsonl"))
            os.mkfifo(os.path.join(tmp, "runs", "b", "results.jsonl"))
            record([{"name": "b", "folder": "runs/b"}])
            refused("is a FIFO (named pipe); expected a regular file")  # at once: never opened for reading
            os.remove(os.path.join(tmp, "runs", "b", "results.jsonl"))
            os.symlink("/dev/zero", os.path.join(tmp, "runs", "b", "results.jsonl"))
            refused("expected a regular file")

    def test_version(self):
        self.assertRegex(ripplekv.version(), r"^\d+\.\d+\.\d+")

    def test_plugins(self):
        ps = ripplekv.plugins()
        ids = {p["id"].split(".")[-1]: p for p in ps}
        for name in ("uniform", "pyramid", "ripplekv"):
            self.assertIn(name, ids)
            self.assertEqual(ids[name]["kind"], "allocator")
        self.assertTrue(all("params" in p for p in ps))

    def test_allocate_hand_computed(self):
        # B = floor(0.025 * 100 * 4 + 0.5) = 10 over 4 layers: 2.5 each, floors 8, +1 to layers 0, 1.
        self.assertEqual(ripplekv.allocate("uniform", prefix_tokens=100, n_layers=4, budget_fraction=0.025),
                         [3, 3, 2, 2])
        # B = min(10, 100) * 4 = 40: 10 each.
        self.assertEqual(ripplekv.allocate("uniform", prefix_tokens=100, n_layers=4, budget_tokens=10),
                         [10, 10, 10, 10])
        # s = [0, 1, 2, 3], T = 1000, F = 0.2: B = 800, C = 200, m = 1.5^(s/3) = [1, 1.1447, 1.3104, 1.5],
        # raw 200 m / mean(m) = [161.45, 184.82, 211.56, 242.17]; largest remainders to layers 1 and 2.
        self.assertEqual(ripplekv.allocate("ripplekv", prefix_tokens=1000, budget_fraction=0.2,
                                           profile=[0, 1, 2, 3]), [161, 185, 212, 242])
        self.assertEqual(ripplekv.allocate("pyramid", prefix_tokens=1000, n_layers=4, budget_fraction=0.2),
                         [360, 253, 147, 40])

    def test_errors_carry_the_message(self):
        with self.assertRaises(ripplekv.Error) as e:
            ripplekv.allocate("no_such_allocator", prefix_tokens=100, n_layers=4, budget_fraction=0.1)
        self.assertEqual(e.exception.status, ripplekv.ERROR_INVALID_ARGUMENT)
        self.assertIn("no_such_allocator", e.exception.message)
        with self.assertRaises(ripplekv.Error) as e:
            ripplekv.allocate("ripplekv", prefix_tokens=100, n_layers=4, budget_fraction=0.1)
        self.assertIn("profile", e.exception.message)
        with self.assertRaises(ripplekv.Error) as e:
            ripplekv.Model("/nonexistent/model.gguf")
        self.assertIn("/nonexistent/model.gguf", e.exception.message)
        # weights is checked by the library before the file is read, naming the option.
        with self.assertRaises(ripplekv.Error) as e:
            ripplekv.Model("/nonexistent/model.gguf", weights="q4_1")
        self.assertEqual(e.exception.status, ripplekv.ERROR_INVALID_ARGUMENT)
        self.assertIn("weights", e.exception.message)
        with self.assertRaises(ripplekv.Error) as e:
            ripplekv.Model("/nonexistent/model.gguf", weights="f32\0")  # a NUL would cut the C string to "f32"
        self.assertIn("weights", e.exception.message)
        with self.assertRaises(ripplekv.Error) as e:
            ripplekv.results("/nonexistent/run")
        self.assertIn("results.jsonl", e.exception.message)

    def test_a_bad_budget_is_named_as_such(self):
        # Regression: a zero or NaN fraction (and a NaN from C) was reported as "set exactly one of budget_fraction
        # and budget_tokens", as if none had been given.
        for fraction, text in ((0, "budget_fraction must be in (0, 1] (got 0.0)"),
                               (float("nan"), "budget_fraction must be in (0, 1] (got nan)"),
                               (-0.5, "budget_fraction must be in (0, 1] (got -0.5)"),
                               (1.5, "budget_fraction must be in (0, 1] (got 1.5)")):
            with self.assertRaises(ripplekv.Error, msg=str(fraction)) as e:
                ripplekv.allocate("uniform", prefix_tokens=100, n_layers=4, budget_fraction=fraction)
            self.assertEqual(e.exception.status, ripplekv.ERROR_INVALID_ARGUMENT)
            self.assertIn(text, e.exception.message)
        with self.assertRaises(ripplekv.Error) as e:
            ripplekv.allocate("uniform", prefix_tokens=100, n_layers=4, budget_tokens=0)
        self.assertIn("budget_tokens must be >= 1 (got 0)", e.exception.message)

    def test_integers_and_strings_are_checked_before_ctypes(self):
        # Regression: ctypes wrapped integers silently (prefix_tokens=2**64+100 acted as 100, threads=2**32
        # as 0 = every core) and a NUL cut a C string. Each is refused before any C call, naming the argument.
        cases = [
            (ValueError, "prefix_tokens", lambda: ripplekv.allocate("uniform", prefix_tokens=2**64 + 100, n_layers=4,
                                                                    budget_fraction=0.1)),
            (ValueError, "budget_tokens", lambda: ripplekv.allocate("uniform", prefix_tokens=100, n_layers=4,
                                                                    budget_tokens=2**63)),
            (ValueError, "n_layers", lambda: ripplekv.allocate("uniform", prefix_tokens=100, n_layers=2**64 + 4,
                                                               budget_fraction=0.1)),
            (TypeError, "prefix_tokens", lambda: ripplekv.allocate("uniform", prefix_tokens=100.7, n_layers=4,
                                                                   budget_fraction=0.1)),
            (ValueError, "allocator", lambda: ripplekv.allocate("uniform\0x", prefix_tokens=100, n_layers=4,
                                                                budget_fraction=0.1)),
            (ValueError, "threads", lambda: ripplekv.profile(CONFIG, threads=2**32)),
            (ValueError, "threads", lambda: ripplekv.run(CONFIG, "/nonexistent/out", threads=2**32)),
            (ValueError, "config_text", lambda: ripplekv.run(config_text="[model]\0", out="/nonexistent/out")),
            (ValueError, "out", lambda: ripplekv.run(CONFIG, "/tmp/x\0y")),
            (ValueError, "threads", lambda: ripplekv.Model("/nonexistent.gguf", threads=2**32)),
            (ValueError, "path", lambda: ripplekv.Model("/tmp/model\0.gguf")),
        ]
        for exc, name, call in cases:
            with self.assertRaises(exc, msg=name) as e:
                call()
            self.assertIn(name, str(e.exception))
        # numpy-style integers (objects with __index__) still pass.
        class Index:
            def __index__(self):
                return 100
        self.assertEqual(ripplekv.allocate("uniform", prefix_tokens=Index(), n_layers=4, budget_fraction=0.025),
                         [3, 3, 2, 2])


def resident_kib():
    """VmRSS of this process in KiB (Linux /proc)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


class CompressionToml(unittest.TestCase):
    def test_a_dict_becomes_the_toml_it_holds(self):
        # Python's own TOML parser (tomllib) reads back exactly the dict: tables, arrays of tables ([[scorer.route]]),
        # keys that need quotes, strings with quotes and newlines, lists, bools, ints and floats.
        import tomllib
        from ripplekv import _toml_text
        d = {"scorer": {"plugin": "snapkv", "snapkv": {"window": 16, "pooling": "max"},
                        "route": [{"layers": [0, 1], "plugin": "h2o"}, {"layers": [5], "plugin": "knorm"}]},
             "allocator": {"plugin": "uniform"}, "budget": {"fraction": 0.25},
             "compression": {"rerotate": True, "codec": {"format": "int", "bits": 4}},
             "sweep": {"budget.fraction": [0.1, 0.2]}, "note": 'a "quoted"\nline'}
        self.assertEqual(tomllib.loads(_toml_text(d)), d)
        with self.assertRaises(ValueError):
            _toml_text({"budget": {"fraction": float("nan")}})
        with self.assertRaises(TypeError):
            _toml_text({"budget": {"fraction": object()}})

    def test_which_strings_are_text(self):
        from ripplekv import _compression_toml
        self.assertEqual(_compression_toml("[budget]\nfraction = 0.3\n"), "[budget]\nfraction = 0.3\n")
        self.assertIsNone(_compression_toml(os.path.join(SRC, "configs", "compress-snapkv-ripplekv.toml")))
        self.assertIsNone(_compression_toml("configs/missing.toml"))  # a path, reported missing by the C API
        self.assertIsNone(_compression_toml("/nonexistent/a=b.toml"))  # a path: it ends in .toml
        self.assertEqual(_compression_toml("budget.fraction = 0.3"), "budget.fraction = 0.3")


class WithModel(unittest.TestCase):
    def test_weights(self):
        # SmolLM2-135M: 135M parameters, 94 MB of Q4_1 blocks in the file. weights="quantized" (the default) holds the
        # blocks (the mapped file, about 100 MB resident); "f32" dequantizes every matrix to 4 bytes a parameter
        # (about 540 MB). The resident set an open adds says which the library holds.
        added = {}
        for weights in ("quantized", "f32"):
            before = resident_kib()
            with ripplekv.Model(MODEL, threads=2, weights=weights):
                added[weights] = resident_kib() - before
        self.assertLess(added["quantized"], 250 * 1024, added)
        self.assertGreater(added["f32"], 400 * 1024, added)

    def test_tokenize_generate(self):
        with ripplekv.Model(MODEL, threads=2) as m:
            ids = m.tokenize("Hello world")
            self.assertEqual(len(ids), 2)
            self.assertEqual(m.detokenize(ids), "Hello world")
            text = m.generate("What is the capital of France?", chat=True, max_new_tokens=24)
            self.assertIn("Paris", text)
            with self.assertRaises(ripplekv.Error) as e:
                m.detokenize([1 << 30])
            self.assertIn("vocabulary", e.exception.message)
            with self.assertRaises(ValueError):
                m.detokenize([1 << 40])  # would wrap to a valid int32 id if passed through
            with self.assertRaises(ValueError):
                m.tokenize("a\0b")  # would be cut at the NUL by the C string
            with self.assertRaises(TypeError):
                m.tokenize(None)
            # Regression: generate cut the prompt at a NUL, max_new_tokens=2**64 wrapped to 0 (returning ''),
            # detokenize([1.7]) used id 1.
            with self.assertRaises(ValueError):
                m.generate("hi\0 and the rest")
            with self.assertRaises(ValueError) as e:
                m.generate("hi", max_new_tokens=2**64)
            self.assertIn("max_new_tokens", str(e.exception))
            with self.assertRaises(TypeError):
                m.detokenize([1.7])
        with self.assertRaises(ripplekv.Error):
            m.tokenize("closed")

    def test_profile(self):
        p = ripplekv.profile(CONFIG, threads=2)
        self.assertEqual(len(p["s"]), 30)  # SmolLM2-135M has 30 layers, all compressible in ci-tiny
        self.assertTrue(all(isinstance(x, (int, float)) for x in p["s"]))

    def test_generate_compressed_with_profile(self):
        # ripplekv allocation from the ci-tiny profile (cached after test_profile), snapkv scoring, fraction 0.3
        p = ripplekv.profile(CONFIG, threads=2)
        compress = os.path.join(SRC, "configs", "compress-snapkv-ripplekv.toml")
        prompt = "Summarize: " + " ".join(["The rain in the north fell for days and the river rose."] * 12)
        with tempfile.TemporaryDirectory() as d, ripplekv.Model(MODEL, threads=2) as m:
            profile_path = os.path.join(d, "profile.json")
            with open(profile_path, "w") as f:
                json.dump(p, f)
            text, info = m.generate(prompt, chat=True, max_new_tokens=8, compress=compress, profile=profile_path,
                                    info=True)
            self.assertIsInstance(text, str)
            T, B, s = info["prompt_tokens"], info["budget_total"], p["s"]
            self.assertEqual(B, int(0.3 * T * 30 + 0.5))  # B = round(f T L)
            self.assertEqual(sum(info["budgets"]), B)
            self.assertEqual(info["allocator"], "org.ripplekv.allocator.ripplekv")
            # the allocation is monotone in the sensitivity: the most sensitive layer keeps at least as many
            # positions as the least sensitive one, and strictly more since the profile is not constant
            hi, lo = s.index(max(s)), s.index(min(s))
            self.assertGreater(info["budgets"][hi], info["budgets"][lo])
            self.assertEqual(info["kv_bytes_kept"], info["kv_bytes_full"] * B // (30 * T))
            # The same config as a dict and as TOML text: the same budgets and text.
            as_dict = {"scorer": {"plugin": "snapkv", "snapkv": {"window": 32}}, "allocator": {"plugin": "ripplekv"},
                       "budget": {"fraction": 0.3}}
            with open(compress) as f:
                as_text = f.read()
            for c in (as_dict, as_text):
                text2, info2 = m.generate(prompt, chat=True, max_new_tokens=8, compress=c, profile=profile_path,
                                          info=True)
                self.assertEqual((text2, info2["budgets"]), (text, info["budgets"]))
            with self.assertRaises(ripplekv.Error) as e:
                m.generate(prompt, compress=compress)  # no profile
            self.assertIn("needs a sensitivity profile", e.exception.message)

    def test_run(self):
        seen = []
        with tempfile.TemporaryDirectory() as out:
            rows = ripplekv.run(CONFIG, out, progress=lambda d, t, label: seen.append((d, t, label)), threads=2)
            # one step per example (2 lm_fidelity windows + 2 needle prompts), each once every cell ran on it
            self.assertEqual([d for d, _, _ in seen], list(range(1, 5)))
            self.assertTrue(all(t == 4 for _, t, _ in seen))
            self.assertTrue(all("7 cells" in label for _, _, label in seen))
            # the full-cache reference + 3 allocators x 2 fractions
            self.assertEqual(len({r["cell_id"] for r in rows}), 7)
            self.assertEqual({r["task"] for r in rows}, {"lm_fidelity", "needle"})
            self.assertEqual(rows, ripplekv.results(out))
        # A CPU run loads no CUDA library (the CUDA backend is a module loaded only when cuda is asked for)
        with open("/proc/self/maps") as f:
            cuda = sorted({line.split()[-1] for line in f if "libcuda" in line or "libcublas" in line
                           or "libripplekv-cuda" in line})
        self.assertEqual(cuda, [], "a CPU-only run of ci-tiny mapped " + ", ".join(cuda))

    def test_run_a_sweep_of_seeds(self):
        # [sweep] "data.eval.seed": a run per seed under out/runs/; progress labels name the run, results() gathers
        # every run's records with "run" set.
        with open(CONFIG) as f:
            text = f.read()
        text = text[:text.index("[sweep]")] + '[sweep]\n"allocator.plugin" = ["uniform"]\n"data.eval.seed" = [1, 2]\n' + \
            text[text.index("[output]"):]
        seen = []
        with tempfile.TemporaryDirectory() as out:
            rows = ripplekv.run(config_text=text, out=out, progress=lambda d, t, label: seen.append((d, t, label)),
                                threads=2)
            # the sweep's 8 examples counted through both runs, each step naming its run
            self.assertEqual([(d, t) for d, t, _ in seen], [(d, 8) for d in range(1, 9)])
            self.assertEqual([label.split(":")[0] for _, _, label in seen], ["seed-1"] * 4 + ["seed-2"] * 4)
            self.assertEqual(sorted({r["run"] for r in rows}), ["seed-1", "seed-2"])
            for name in ("seed-1", "seed-2"):  # each run's own records, in run order
                own = [dict(r, run=name) for r in ripplekv.results(os.path.join(out, "runs", name))]
                self.assertEqual([r for r in rows if r["run"] == name], own)
                self.assertEqual(len({r["cell_id"] for r in own}), 2)  # the full cache and uniform
            self.assertEqual(rows, ripplekv.results(out))
            self.assertTrue(os.path.exists(os.path.join(out, "report.md")))  # the two runs side by side

    def test_cancel_after_first_example(self):
        state = {"examples": 0}

        def progress(done, total, label):
            state["examples"] = done

        with tempfile.TemporaryDirectory() as out:
            with self.assertRaises(ripplekv.Error) as e:
                ripplekv.run(CONFIG, out, progress=progress, cancel=lambda: state["examples"] >= 1, threads=2)
            self.assertEqual(e.exception.status, ripplekv.ERROR_CANCELLED)
            self.assertEqual(state["examples"], 1)
            self.assertEqual(glob.glob(os.path.join(out, "cells", "*.json")), [])  # no cell has every example
            checkpoints = glob.glob(os.path.join(out, "partial", "*.jsonl"))
            self.assertEqual(len(checkpoints), 7)  # every cell kept its finished example
            for c in checkpoints:
                with open(c) as f:
                    lines = [json.loads(line) for line in f]  # whole JSON lines, not half-written
                self.assertEqual(len(lines), 2)  # the header and the first example
            self.assertFalse(os.path.exists(os.path.join(out, "results.jsonl")))  # a cancelled run merges nothing
            # ...but leaves a partial report over the example every cell finished, saying so at its top.
            with open(os.path.join(out, "report.md")) as f:
                report = f.read()
            self.assertIn("> warning: partial report: the run was cancelled after 1 of 4 examples", report)
            self.assertIn("- **Task** lm_fidelity: n = 1, T = 256 tokens", report)
            self.assertIn("7 cells", report)
            self.assertEqual(glob.glob(os.path.join(out, "**", "*.tmp*"), recursive=True), [])
            with self.assertRaises(ripplekv.Error):
                ripplekv.results(out)
            rows = ripplekv.run(CONFIG, out, threads=2, resume=True)  # continues from the second example
            self.assertEqual(len({r["cell_id"] for r in rows}), 7)
            self.assertEqual(glob.glob(os.path.join(out, "partial", "*")), [])


if __name__ == "__main__":
    which = sys.argv.pop(1) if len(sys.argv) > 1 else "unit"
    if which == "model" and not os.path.exists(MODEL):
        print("model asset absent: " + MODEL, file=sys.stderr)
        sys.exit(1 if os.environ.get("CI") == "true" else 77)
    load = unittest.defaultTestLoader.loadTestsFromTestCase
    suite = unittest.TestSuite([load(Unit), load(CompressionToml)] if which == "unit" else [load(WithModel)])
    sys.exit(0 if unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful() else 1)
