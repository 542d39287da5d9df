"""`cmake --install` of this build into a temporary prefix, then the installed package used from outside: the files
in the prefix; the installed CLI finding its built-in plugins beside the installed libripplekv with no plugin path;
a C program built with pkg-config and one built with find_package(ripplekv) calling rkv_version(); the out-of-tree
scorer plugins/examples/knorm built with plain CMake, its exported symbols, its scores on hand-computed keys (loaded
through ctypes, the C ABI only), loaded through RIPPLEKV_PLUGIN_PATH and passing `ripplekv plugins check`, and
installed into the prefix, where the host finds it without a plugin path."""
import ctypes
import glob
import json
import math
import os
import shutil
import subprocess
import tempfile
import unittest

import install_helpers as H


class InstalledPackage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="rkv-install-")
        cls.prefix = os.path.join(cls.tmp, "prefix")
        H.install(cls.prefix)
        cls.knorm_build = os.path.join(cls.tmp, "knorm-build")
        cls.knorm_so = H.build_knorm(cls.prefix, cls.knorm_build)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def path(self, *parts):
        return os.path.join(self.prefix, *parts)

    def plugins_json(self, **env):
        p = H.check([H.cli(self.prefix), "plugins", "list", "--json"], "plugins list", env=H.clean_env(**env),
                    cwd=self.prefix)
        return json.loads(p.stdout)

    # ---- the prefix ---------------------------------------------------------------------------------------------

    def test_files(self):
        for rel in ("include/ripplekv/plugin.h", "include/ripplekv/ripplekv.h", "include/ripplekv/sdk.hpp",
                    "bin/ripplekv", "lib/cmake/ripplekv/ripplekvConfig.cmake",
                    "lib/cmake/ripplekv/ripplekvConfigVersion.cmake", "lib/cmake/ripplekv/ripplekvTargets.cmake",
                    "lib/cmake/ripplekv/RipplekvPlugin.cmake", "lib/pkgconfig/ripplekv.pc"):
            self.assertTrue(os.path.isfile(self.path(rel)), rel)
        self.assertTrue(os.access(self.path("bin/ripplekv"), os.X_OK))
        libs = {os.path.basename(p) for p in glob.glob(self.path("lib", "libripplekv.so*"))}
        major = H.VERSION.split(".")[0]
        self.assertEqual(libs, {"libripplekv.so", "libripplekv.so." + major, "libripplekv.so." + H.VERSION})
        plugins = {os.path.basename(p) for p in glob.glob(self.path("lib", "ripplekv", "plugins", "*.so"))}
        self.assertEqual(plugins, H.BUILTIN_LIBS)
        # internal host headers and build-only files stay out of the prefix
        self.assertEqual(sorted(os.listdir(self.path("include"))), ["ripplekv"])
        self.assertEqual(sorted(os.listdir(self.path("include", "ripplekv"))), ["plugin.h", "ripplekv.h", "sdk.hpp"])

    def test_cli_version(self):
        p = H.check([H.cli(self.prefix), "--version"], "ripplekv --version", cwd=self.prefix)
        self.assertIn(H.VERSION, p.stdout)

    def test_installed_cli_finds_builtins_beside_installed_library(self):
        plugins = self.plugins_json(RIPPLEKV_PLUGIN_PATH="")
        self.assertEqual({p["id"] for p in plugins}, H.BUILTIN_IDS)
        plugin_dir = os.path.realpath(self.path("lib", "ripplekv", "plugins"))
        for p in plugins:
            self.assertEqual(os.path.dirname(os.path.realpath(p["path"])), plugin_dir, p["path"])
        # and the text listing too
        p = H.check([H.cli(self.prefix), "plugins", "list"], "plugins list", env=H.clean_env(RIPPLEKV_PLUGIN_PATH=""),
                    cwd=self.prefix)
        for pid in H.BUILTIN_IDS:
            self.assertIn(pid, p.stdout)

    def test_cli_links_installed_library(self):
        out = H.check(["ldd", H.cli(self.prefix)], "ldd").stdout
        line = next(l for l in out.splitlines() if "libripplekv.so" in l)
        self.assertIn(os.path.realpath(self.path("lib")), os.path.realpath(line.split("=>")[1].split("(")[0].strip()))

    # ---- consumers: pkg-config and find_package ------------------------------------------------------------------

    def test_pkg_config_program(self):
        env = H.clean_env(PKG_CONFIG_PATH=self.path("lib", "pkgconfig"))
        self.assertEqual(H.check(["pkg-config", "--modversion", "ripplekv"], "pkg-config", env=env).stdout.strip(),
                         H.VERSION)
        flags = H.check(["pkg-config", "--cflags", "--libs", "ripplekv"], "pkg-config", env=env).stdout.split()
        libdir = H.check(["pkg-config", "--variable=libdir", "ripplekv"], "pkg-config", env=env).stdout.strip()
        self.assertEqual(os.path.realpath(libdir), os.path.realpath(self.path("lib")))
        plugindir = H.check(["pkg-config", "--variable=plugindir", "ripplekv"], "pkg-config", env=env).stdout.strip()
        self.assertEqual(os.path.realpath(plugindir), os.path.realpath(self.path("lib", "ripplekv", "plugins")))
        exe = os.path.join(self.tmp, "print_version_pc")
        H.check([H.CC, "-std=c99", "-Wall", "-Wextra", "-Werror", os.path.join(H.HERE, "consumer", "print_version.c"),
                 "-o", exe, *flags, "-Wl,-rpath," + libdir, *H.SANITIZE_FLAGS], "cc with pkg-config flags", env=env)
        self.assertEqual(H.check([exe], "print_version (pkg-config)").stdout.strip(), H.VERSION + " 1.7")

    def test_pkg_config_c_plugin(self):
        # a plugin written in plain C against <ripplekv/plugin.h> alone (the fixture tests/plugins/raw_old_struct.c),
        # compiled with the prefix's pkg-config flags only: plugins never link libripplekv
        env = H.clean_env(PKG_CONFIG_PATH=self.path("lib", "pkgconfig"))
        cflags = H.check(["pkg-config", "--cflags", "ripplekv"], "pkg-config --cflags", env=env).stdout.split()
        folder = os.path.join(self.tmp, "c-plugin")
        os.makedirs(folder)
        H.check([H.CC, "-std=c99", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-fvisibility=hidden", *cflags,
                 os.path.join(H.SRC, "tests", "plugins", "raw_old_struct.c"), "-o", os.path.join(folder, "old.so")],
                "cc C plugin with pkg-config --cflags", env=env)
        ids = {p["id"] for p in self.plugins_json(RIPPLEKV_PLUGIN_PATH=folder)}
        self.assertEqual(ids, H.BUILTIN_IDS | {"org.test.old_struct"})

    def test_find_package_program(self):
        build = os.path.join(self.tmp, "consumer-build")
        H.configure_and_build(os.path.join(H.HERE, "consumer"), build, self.prefix,
                              *(["-DCMAKE_C_FLAGS=" + " ".join(H.SANITIZE_FLAGS)] if H.SANITIZE_FLAGS else []))
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            cache = f.read()
        self.assertIn("ripplekv_DIR:PATH=" + self.path("lib", "cmake", "ripplekv"), cache)
        self.assertEqual(H.check([os.path.join(build, "print_version")], "print_version (find_package)").stdout.strip(),
                         H.VERSION + " 1.7")

    def test_find_package_refuses_other_major(self):
        build = os.path.join(self.tmp, "consumer-build-v99")
        p = subprocess.run([H.CMAKE, "-S", os.path.join(H.HERE, "consumer"), "-B", build,
                            "-DCMAKE_PREFIX_PATH=" + self.prefix, "-DRKV_REQUEST_VERSION=99.0"],
                           capture_output=True, text=True, env=H.clean_env(), timeout=300)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("compatible with requested version \"99.0\"", p.stderr + p.stdout)

    # ---- the out-of-tree knorm scorer ---------------------------------------------------------------------------

    def test_knorm_built_against_prefix(self):
        with open(os.path.join(self.knorm_build, "CMakeCache.txt")) as f:
            cache = f.read()
        self.assertIn("ripplekv_DIR:PATH=" + self.path("lib", "cmake", "ripplekv"), cache)
        # -fvisibility=hidden: the entry point is the only exported function
        syms = H.check(["nm", "-D", "--defined-only", self.knorm_so], "nm").stdout.split()
        funcs = [s for s in syms if s.startswith("rkv_")]
        self.assertEqual(funcs, ["rkv_plugin_library_get"])

    def test_knorm_scores_by_hand(self):
        k = KnormViaCtypes(self.knorm_so)
        self.assertEqual((k.lib.abi_major, k.lib.abi_minor), (1, 7))
        self.assertEqual(k.lib.descriptor_count(), 1)
        d = k.lib.descriptor_at(0).contents
        self.assertEqual((d.id, d.kind, d.version), (H.KNORM_ID.encode(), 2, b"1.0.0"))
        self.assertTrue(d.params)  # a NULL-terminated list, here empty: no parameters
        self.assertFalse(ctypes.cast(d.params, ctypes.POINTER(ctypes.c_void_p))[0])
        req = k.requirements(n_layers=30, n_heads=9, n_kv_heads=2, head_dim=2)
        self.assertEqual((req.stats, req.window, req.sinks, req.recent), (1, 0, 0, 0))  # RKV_STAT_KEYS only
        # keys [H_kv = 2, T = 3, d = 2]; score = -||k||_2: -5, 0, -sqrt(2) | -10, -0.5, -1000
        keys = [[3, 4], [0, 0], [1, -1], [6, 8], [-0.5, 0], [1000, 0]]
        status, scores = k.score(keys, n_kv_heads=2, T=3, d=2)
        self.assertEqual(status, 0, k.messages)
        expected = [-5.0, 0.0, -math.sqrt(2.0), -10.0, -0.5, -1000.0]
        for got, want in zip(scores, expected):
            self.assertAlmostEqual(got, want, places=6)
        # bad input: a key tensor of the wrong head dim is refused with a message, not a crash
        status, _ = k.score(keys, n_kv_heads=2, T=2, d=3)
        self.assertEqual(status, 1)  # RKV_ERROR_INVALID_ARGUMENT
        self.assertTrue(any("keys" in m for m in k.messages), k.messages)
        self.assertIsNone(k.interface(b"rkv.allocator/1"))
        k.destroy()

    def test_knorm_through_plugin_path(self):
        plugins = self.plugins_json(RIPPLEKV_PLUGIN_PATH=self.knorm_build)
        self.assertEqual({p["id"] for p in plugins}, H.BUILTIN_IDS | {H.KNORM_ID})
        knorm = next(p for p in plugins if p["id"] == H.KNORM_ID)
        self.assertEqual((knorm["kind"], knorm["version"], knorm["params"]), ("scorer", "1.0.0", []))
        p = H.check([H.cli(self.prefix), "plugins", "describe", "keynorm"], "plugins describe keynorm",
                    env=H.clean_env(RIPPLEKV_PLUGIN_PATH=self.knorm_build), cwd=self.prefix)
        self.assertIn(H.KNORM_ID, p.stdout)

    def test_knorm_passes_plugins_check(self):
        env = H.clean_env(RIPPLEKV_PLUGIN_PATH=self.knorm_build)
        p = subprocess.run([H.cli(self.prefix), "plugins", "check", "keynorm"], capture_output=True, text=True, env=env,
                           cwd=self.prefix, timeout=600)
        self.assertEqual(p.returncode, 0, "plugins check knorm failed:\n" + p.stdout + p.stderr)

    def test_knorm_installed_beside_builtins(self):
        # a second copy of the prefix, so the other tests keep seeing exactly the built-in plugins
        prefix = os.path.join(self.tmp, "prefix-with-knorm")
        shutil.copytree(self.prefix, prefix, symlinks=True)
        H.check([H.CMAKE, "--install", self.knorm_build, "--prefix", prefix], "cmake --install knorm")
        self.assertTrue(os.path.isfile(os.path.join(prefix, "lib", "ripplekv", "plugins", "knorm.so")))
        p = H.check([H.cli(prefix), "plugins", "list", "--json"], "plugins list",
                    env=H.clean_env(RIPPLEKV_PLUGIN_PATH=""), cwd=prefix)
        self.assertEqual({q["id"] for q in json.loads(p.stdout)}, H.BUILTIN_IDS | {H.KNORM_ID})


# ---- a host written against the C ABI alone, in ctypes (abi/ripplekv/plugin.h, dlpack/dlpack.h v0.6) -------------

class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


REPORT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_char_p)


class Diagnostics(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("ctx", ctypes.c_void_p), ("report", REPORT)]


GET_BOOL = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int32))
GET_INT = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64))
GET_FLOAT = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_double))
GET_STRING = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p))
IS_SET = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_char_p)


class Params(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("ctx", ctypes.c_void_p), ("get_bool", GET_BOOL),
                ("get_int", GET_INT), ("get_float", GET_FLOAT), ("get_string", GET_STRING), ("is_set", IS_SET)]


IS_CANCELLED = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)
GET_SERVICE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)


class Host(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("abi_major", ctypes.c_uint32), ("abi_minor", ctypes.c_uint32),
                ("ctx", ctypes.c_void_p), ("is_cancelled", IS_CANCELLED), ("get_service", GET_SERVICE)]


class Descriptor(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("id", ctypes.c_char_p), ("kind", ctypes.c_int32),
                ("version", ctypes.c_char_p), ("description", ctypes.c_char_p), ("params", ctypes.c_void_p),
                ("flags", ctypes.c_uint64)]


class Instance(ctypes.Structure):
    pass


GET_INTERFACE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(Instance), ctypes.c_char_p)
DESTROY = ctypes.CFUNCTYPE(None, ctypes.POINTER(Instance))
Instance._fields_ = [("struct_size", ctypes.c_uint32), ("plugin_data", ctypes.c_void_p),
                     ("get_interface", GET_INTERFACE), ("destroy", DESTROY)]

CREATE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_char_p, ctypes.POINTER(Host), ctypes.POINTER(Params),
                          ctypes.POINTER(Diagnostics), ctypes.POINTER(ctypes.POINTER(Instance)))


class Library(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("abi_major", ctypes.c_uint32), ("abi_minor", ctypes.c_uint32),
                ("name", ctypes.c_char_p), ("descriptor_count", ctypes.CFUNCTYPE(ctypes.c_uint32)),
                ("descriptor_at", ctypes.CFUNCTYPE(ctypes.POINTER(Descriptor), ctypes.c_uint32)),
                ("create", CREATE)]


class AttentionShape(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("n_layers", ctypes.c_int64), ("n_heads", ctypes.c_int64),
                ("n_kv_heads", ctypes.c_int64), ("head_dim", ctypes.c_int64)]


class Requirements(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("stats", ctypes.c_uint64), ("window", ctypes.c_int64),
                ("sinks", ctypes.c_int64), ("recent", ctypes.c_int64)]


class ScorerInputs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("layer", ctypes.c_int64), ("prefix_tokens", ctypes.c_int64),
                ("window", ctypes.c_int64), ("keys", ctypes.POINTER(DLTensor)), ("values", ctypes.POINTER(DLTensor)),
                ("window_attention", ctypes.POINTER(DLTensor)), ("cumulative_attention", ctypes.POINTER(DLTensor)),
                ("window_queries", ctypes.POINTER(DLTensor)), ("stream", ctypes.c_void_p)]


SCORER_REQUIREMENTS = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(Instance), ctypes.POINTER(AttentionShape),
                                       ctypes.POINTER(Requirements), ctypes.POINTER(Diagnostics))
SCORER_SCORE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(Instance), ctypes.POINTER(ScorerInputs),
                                ctypes.POINTER(DLTensor), ctypes.POINTER(Diagnostics))


class ScorerV1(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("requirements", SCORER_REQUIREMENTS), ("score", SCORER_SCORE)]


def f32_tensor(values, shape):
    """A contiguous float32 CPU DLTensor (strides NULL) over a new buffer; returns (tensor, buffer, shape array)."""
    buf = (ctypes.c_float * len(values))(*values)
    dims = (ctypes.c_int64 * len(shape))(*shape)
    t = DLTensor(ctypes.cast(buf, ctypes.c_void_p), DLDevice(1, 0), len(shape), DLDataType(2, 32, 1), dims, None, 0)
    return t, buf, dims


class KnormViaCtypes:
    """Loads knorm.so, creates org.example.scorer.keynorm with no params, and calls rkv.scorer/1 on given keys."""

    def __init__(self, so):
        self.dll = ctypes.CDLL(so)
        entry = self.dll.rkv_plugin_library_get
        entry.restype = ctypes.POINTER(Library)
        entry.argtypes = [ctypes.c_uint32, ctypes.c_uint32]
        self.lib = entry(1, 0).contents
        self.messages = []
        self._report = REPORT(lambda ctx, level, msg: self.messages.append(msg.decode()))
        self.diag = Diagnostics(ctypes.sizeof(Diagnostics), None, self._report)
        no = lambda *a: 1  # RKV_ERROR_INVALID_ARGUMENT: knorm declares no params
        self._getters = (GET_BOOL(no), GET_INT(no), GET_FLOAT(no), GET_STRING(no), IS_SET(lambda ctx, name: 0))
        self.params = Params(ctypes.sizeof(Params), None, *self._getters)
        self._host_fns = (IS_CANCELLED(lambda ctx: 0), GET_SERVICE(lambda ctx, sid: None))
        self.host = Host(ctypes.sizeof(Host), 1, 0, None, *self._host_fns)
        self.inst = ctypes.POINTER(Instance)()
        st = self.lib.create(H.KNORM_ID.encode(), ctypes.byref(self.host), ctypes.byref(self.params),
                             ctypes.byref(self.diag), ctypes.byref(self.inst))
        if st != 0:
            raise AssertionError("create(knorm) returned %d: %s" % (st, self.messages))
        self.scorer = ScorerV1.from_address(self.interface(b"rkv.scorer/1"))

    def interface(self, iid):
        return self.inst.contents.get_interface(self.inst, iid)

    def requirements(self, **shape):
        s = AttentionShape(ctypes.sizeof(AttentionShape), shape["n_layers"], shape["n_heads"], shape["n_kv_heads"],
                           shape["head_dim"])
        r = Requirements(ctypes.sizeof(Requirements), 0, -1, -1, -1)
        st = self.scorer.requirements(self.inst, ctypes.byref(s), ctypes.byref(r), ctypes.byref(self.diag))
        if st != 0:
            raise AssertionError("requirements returned %d: %s" % (st, self.messages))
        return r

    def score(self, keys, n_kv_heads, T, d):
        """keys: rows of the float32 [n_kv_heads, T, d] tensor (flattened here); returns (status, scores list)."""
        flat = [x for row in keys for x in row][: n_kv_heads * T * d]
        k, kbuf, kdims = f32_tensor(flat, [n_kv_heads, T, d])
        out, obuf, odims = f32_tensor([float("nan")] * (n_kv_heads * T), [n_kv_heads, T])
        inputs = ScorerInputs(ctypes.sizeof(ScorerInputs), 0, T, 0, ctypes.pointer(k), None, None, None, None, None)
        self.messages.clear()
        st = self.scorer.score(self.inst, ctypes.byref(inputs), ctypes.byref(out), ctypes.byref(self.diag))
        return st, list(obuf)

    def destroy(self):
        self.inst.contents.destroy(self.inst)


if __name__ == "__main__":
    unittest.main()
