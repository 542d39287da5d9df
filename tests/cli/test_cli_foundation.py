"""The `ripplekv` CLI's foundation commands: help, version, plugins list/describe, allocate, and exit codes
(0 success, 2 usage or input error; errors are one line on stderr). Expected budgets are worked out by hand in
tests/allocators/test_allocators.cpp; here they are checked end to end through the CLI."""
import json
import os
import subprocess
import tempfile
import unittest

BIN = os.environ["RIPPLEKV_BIN"]


def rkv(*args, env=None):
    p = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=60,
                       env=None if env is None else {**os.environ, **env})
    return p.returncode, p.stdout, p.stderr


class Foundation(unittest.TestCase):
    def test_version_and_help(self):
        code, out, _ = rkv("--version")
        self.assertEqual(code, 0)
        self.assertRegex(out, r"^ripplekv \d+\.\d+\.\d+\n$")
        code, out, _ = rkv("help")
        self.assertEqual(code, 0)
        for cmd in ("plugins", "allocate"):
            self.assertIn(cmd, out)
        for cmd in (["plugins", "--help"], ["allocate", "--help"]):
            code, out, _ = rkv(*cmd)
            self.assertEqual(code, 0, cmd)
            self.assertIn("usage: ripplekv", out)

    def test_unknown_command_is_usage_error(self):
        code, _, err = rkv("frobnicate")
        self.assertEqual(code, 2)
        self.assertIn("unknown command 'frobnicate'", err)

    def test_plugins_list_json_has_the_three_allocators_from_their_libraries(self):
        code, out, _ = rkv("plugins", "list", "--json")
        self.assertEqual(code, 0)
        plugins = {p["id"]: p for p in json.loads(out)}
        for name in ("uniform", "pyramid", "ripplekv"):
            p = plugins["org.ripplekv.allocator." + name]
            self.assertEqual(p["kind"], "allocator")
            self.assertTrue(p["path"].endswith("rkv_allocator_%s.so" % name), p["path"])
            self.assertEqual(set(p), {"id", "kind", "version", "path", "description", "flags", "params"})
        # the descriptor flags by name, as `describe` prints them
        self.assertEqual(plugins["org.ripplekv.allocator.uniform"]["flags"], [])
        self.assertEqual(plugins["org.ripplekv.allocator.ripplekv"]["flags"], ["needs_profile"])
        self.assertEqual(plugins["org.ripplekv.allocator.global_topk"]["flags"], ["needs_scores"])
        self.assertEqual(plugins["org.ripplekv.signal.cake"]["flags"], ["per_prompt"])
        params = {q["name"]: q for q in plugins["org.ripplekv.allocator.ripplekv"]["params"]}
        self.assertEqual(params["r"]["default"], 1.5)
        self.assertEqual(params["gamma"]["min"], 1.0)

    def test_plugins_describe(self):
        code, out, _ = rkv("plugins", "describe", "pyramid")
        self.assertEqual(code, 0)
        self.assertIn("org.ripplekv.allocator.pyramid", out)
        self.assertIn("beta", out)
        code, out, _ = rkv("plugins", "describe", "snapkv")  # an int parameter's bounds are integers
        self.assertEqual(code, 0)
        self.assertRegex(out, r"window\s+int\s+default 32, min 1, max 1048576\n")
        code, out, _ = rkv("plugins", "list", "--json")
        snap = {q["name"]: q for q in next(p for p in json.loads(out) if p["id"] == "org.ripplekv.scorer.snapkv")["params"]}
        self.assertIs(type(snap["window"]["min"]), int)
        code, _, err = rkv("plugins", "describe", "pyramd")
        self.assertEqual(code, 2)
        self.assertIn("did you mean 'pyramid'?", err)

    def allocate(self, *args):
        code, out, err = rkv("allocate", *args, "--json")
        self.assertEqual(code, 0, err)
        return json.loads(out)

    def test_allocate_hand_computed(self):
        j = self.allocate("--allocator", "uniform", "--layers", "4", "--prefix-tokens", "100", "--budget-tokens", "10")
        self.assertEqual(j["budgets"], [10, 10, 10, 10])
        self.assertEqual(j["budget_total"], 40)
        j = self.allocate("--allocator", "pyramid", "--layers", "4", "--prefix-tokens", "1000",
                          "--budget-fraction", "0.2")
        self.assertEqual(j["budgets"], [360, 253, 147, 40])
        j = self.allocate("--allocator", "org.ripplekv.allocator.ripplekv", "--sensitivity", "0,1,2,3",
                          "--prefix-tokens", "1000", "--budget-fraction", "0.2")
        self.assertEqual(j["budgets"], [161, 185, 212, 242])
        j = self.allocate("--allocator", "ripplekv", "--param", "r=4", "--param", "gamma=2", "--sensitivity",
                          "0,0.5,1", "--prefix-tokens", "100", "--budget-tokens", "50")
        self.assertEqual(j["budget_total"], 150)
        self.assertEqual(j["budgets"], [30, 60, 60])

    def test_allocate_pyramid_fallback_warns(self):
        j = self.allocate("--allocator", "pyramid", "--layers", "4", "--prefix-tokens", "1000",
                          "--budget-tokens", "25")
        self.assertEqual(j["budgets"], [25, 25, 25, 25])
        self.assertEqual(len(j["warnings"]), 1)
        self.assertIn("fell back to uniform", j["warnings"][0])

    def test_allocate_reads_a_profile_file(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "profile.json")
            with open(path, "w") as f:
                json.dump({"s": [0, 1, 2, 3], "layers": [0, 1, 2, 3]}, f)
            j = self.allocate("--allocator", "ripplekv", "--profile", path, "--prefix-tokens", "1000",
                              "--budget-fraction", "0.2")
            self.assertEqual(j["budgets"], [161, 185, 212, 242])
            code, _, err = rkv("allocate", "--allocator", "ripplekv", "--profile", path, "--layers", "5",
                               "--prefix-tokens", "1000", "--budget-fraction", "0.2")
            self.assertEqual(code, 2)
            self.assertIn("--layers 5 does not match the 4 layers of " + path, err)
            with open(path, "w") as f:
                f.write("{\"s\": [1, 2,")
            code, _, err = rkv("allocate", "--allocator", "ripplekv", "--profile", path, "--prefix-tokens", "10",
                               "--budget-fraction", "0.5")
            self.assertEqual(code, 2)
            self.assertIn("not valid JSON", err)

    def test_bad_inputs_exit_2_with_one_clear_line(self):
        cases = [
            (["allocate", "--allocator", "uniform", "--layers", "3", "--prefix-tokens", "10",
              "--budget-fraction", "1.5"], "budget fraction 1.5 is outside (0, 1]"),
            (["allocate", "--allocator", "uniform", "--layers", "3", "--prefix-tokens", "10"],
             "give exactly one of --budget-fraction and --budget-tokens"),
            (["allocate", "--allocator", "ripplekv", "--layers", "3", "--prefix-tokens", "10",
              "--budget-tokens", "5"], "needs a sensitivity profile"),
            (["allocate", "--allocator", "ripplekv", "--sensitivity", "0,x,1", "--prefix-tokens", "10",
              "--budget-tokens", "5"], "item 1 ('x') is not a finite number"),
            (["allocate", "--allocator", "ripplekv", "--sensitivity", "0,nan,1", "--prefix-tokens", "10",
              "--budget-tokens", "5"], "item 1 ('nan') is not a finite number"),
            (["allocate", "--allocator", "uniform", "--layers", "4", "--prefix-tokens", "10",
              "--budget-fraction", "0.05"], "B = 2 is below the number of compressible layers |A| = 4"),
            (["allocate", "--allocator", "pyramid", "--param", "beta=0.5", "--layers", "3", "--prefix-tokens", "10",
              "--budget-tokens", "5"], "0.5 is out of range; allowed: >= 1"),
            (["allocate", "--allocator", "pyramid", "--param", "beta", "--layers", "3", "--prefix-tokens", "10",
              "--budget-tokens", "5"], "--param 'beta' is not KEY=VALUE"),
            (["allocate", "--allocator", "uniform", "--layers", "3", "--prefix-tokens", "0",
              "--budget-tokens", "5"], "--prefix-tokens must be >= 1"),
            (["allocate", "--bogus"], "unrecognised option '--bogus'"),
        ]
        for args, message in cases:
            code, out, err = rkv(*args)
            self.assertEqual(code, 2, (args, err))
            self.assertIn(message, err, args)
            self.assertEqual(out, "", args)

    def test_prompt_and_prompt_file_are_checked_before_the_model_is_read(self):
        with tempfile.TemporaryDirectory() as d:
            model = os.path.join(d, "empty.gguf")
            open(model, "wb").close()  # reading it would fail with another message
            code, out, err = rkv("generate", "--model", model, "--prompt", "hi", "--prompt-file", model)
            self.assertEqual(code, 2, err)
            self.assertIn("--prompt and --prompt-file exclude each other", err)
            code, out, err = rkv("generate", "--model", model)
            self.assertEqual(code, 2, err)
            self.assertIn("--prompt or --prompt-file is required", err)
            os.mkfifo(os.path.join(d, "fifo"))
            code, out, err = rkv("generate", "--model", model, "--prompt-file", os.path.join(d, "fifo"))
            self.assertEqual(code, 2, err)  # refused unread: a FIFO would block
            self.assertIn("--prompt-file '%s' is a FIFO" % os.path.join(d, "fifo"), err)
            code, out, err = rkv("generate", "--model", model, "--prompt-file", os.path.join(d, "missing.txt"))
            self.assertEqual(code, 2, err)
            self.assertIn("--prompt-file '%s': cannot open" % os.path.join(d, "missing.txt"), err)

    def test_backend_that_cannot_be_had_is_refused_before_the_model_is_read(self):
        with tempfile.TemporaryDirectory() as d:
            model = os.path.join(d, "empty.gguf")
            open(model, "wb").close()  # reading it would fail with another message
            code, out, err = rkv("generate", "--model", model, "--prompt", "hi", "--backend", "tpu")
            self.assertEqual(code, 2, err)
            self.assertIn("ripplekv generate: --backend/--dtype: model.backend = tpu: unknown backend", err)
            code, out, err = rkv("generate", "--model", model, "--prompt", "hi", "--dtype", "bf16")
            self.assertEqual(code, 2, err)
            self.assertIn("model.dtype = bf16: the cpu backend computes in f32 only", err)
            code, out, err = rkv("generate", "--model", model, "--prompt", "hi", "--backend", "cuda")
            self.assertEqual(code, 2, err)
            if "model.backend = cuda: " not in err:
                self.skipTest("this machine has a CUDA device: " + err.strip())
            self.assertRegex(err, r"model\.backend = cuda: (no CUDA device|this build has no CUDA backend)")
            self.assertEqual(out, "")

    def test_a_missing_or_broken_cuda_module_is_named(self):
        # The CUDA backend is a module (libripplekv-cuda.so) loaded only when cuda is asked for; RIPPLEKV_BACKEND_DIR
        # points the host at another folder. Each case runs in its own process (a module is loaded once per process).
        with tempfile.TemporaryDirectory() as d:
            model = os.path.join(d, "m.gguf")
            open(model, "wb").close()
            module = os.path.join(d, "libripplekv-cuda.so")
            args = ("generate", "--model", model, "--prompt", "hi", "--backend", "cuda")
            code, out, err = rkv(*args, env={"RIPPLEKV_BACKEND_DIR": d})
            self.assertEqual(code, 2, err)
            self.assertIn("model.backend = cuda: backend module '%s' is missing (RIPPLEKV_BACKEND_DIR = '%s')"
                          % (module, d), err)
            code, out, err = rkv(*args, env={"RIPPLEKV_BACKEND_DIR": model})  # a file, not a folder
            self.assertEqual(code, 2, err)
            self.assertIn("is missing (RIPPLEKV_BACKEND_DIR = '%s' is not a folder)" % model, err)
            os.mkfifo(module)  # dlopen would block on it: refused before
            code, out, err = rkv(*args, env={"RIPPLEKV_BACKEND_DIR": d})
            self.assertEqual(code, 2, err)
            self.assertIn("backend module '%s' is a FIFO, not a shared library" % module, err)
            os.unlink(module)
            with open(module, "wb") as f:
                f.write(b"not an ELF file" * 100)
            code, out, err = rkv(*args, env={"RIPPLEKV_BACKEND_DIR": d})
            self.assertEqual(code, 2, err)
            self.assertIn("model.backend = cuda: backend module '%s': cannot be loaded: " % module, err)
            self.assertIn("invalid ELF header", err)
            # auto on a machine without the NVIDIA driver never loads the module: the broken file is not touched
            if not os.path.exists("/proc/driver/nvidia/version") and not os.path.exists("/dev/nvidiactl"):
                code, out, err = rkv("generate", "--model", model, "--prompt", "hi", "--backend", "auto",
                                     env={"RIPPLEKV_BACKEND_DIR": d})
                self.assertEqual(code, 2, err)
                self.assertNotIn("backend module", err)
                self.assertIn(model, err)  # it went on to read the (empty) model file with the cpu backend


if __name__ == "__main__":
    unittest.main()
