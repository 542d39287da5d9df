"""ripplekv from Python: a ctypes binding of the C API (abi/ripplekv/ripplekv.h), standard library only.

The library is found at $RIPPLEKV_LIB, else build/lib/libripplekv.so relative to this package's source tree, else
through the system loader. Every failing call raises ripplekv.Error carrying the C message and status code.

    import ripplekv
    ripplekv.allocate("uniform", prefix_tokens=100, n_layers=4, budget_fraction=0.1)   # [3, 3, 2, 2]
    with ripplekv.Model("SmolLM2-135M-Instruct.Q4_1.gguf") as m:
        print(m.generate("What is the capital of France?", chat=True, max_new_tokens=16))

Thread rules are the C API's: one Model per thread at a time; one run() per process at a time.
"""
import ctypes
import json
import operator
import os
import tempfile

from ._lib import Error, load_library, check, take_string
from .dumps import read_kept, read_npy

__all__ = ["Error", "version", "plugins", "allocate", "profile", "run", "results", "Model",
           "read_kept", "read_npy", "OK", "ERROR_INVALID_ARGUMENT", "ERROR_INTERNAL", "ERROR_CANCELLED", "ERROR_UNSUPPORTED"]

OK, ERROR_INVALID_ARGUMENT, ERROR_INTERNAL, ERROR_CANCELLED, ERROR_UNSUPPORTED = 0, 1, 2, 3, 4

_lib, _C = load_library()

_INT32 = (-2**31, 2**31 - 1)
_INT64 = (-2**63, 2**63 - 1)


def _int(what, value, lo, hi):
    """`value` as a Python int in [lo, hi], checked before it reaches ctypes (which would wrap it silently).

    Integers and objects with __index__ (numpy integers) pass; floats, strings and None raise TypeError; values
    outside [lo, hi] raise ValueError naming `what`."""
    if isinstance(value, float) or value is None:
        raise TypeError("%s must be an integer, got %s" % (what, type(value).__name__))
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError("%s must be an integer, got %s" % (what, type(value).__name__)) from None
    if not lo <= v <= hi:
        raise ValueError("%s = %d is outside [%d, %d]" % (what, v, lo, hi))
    return v


def _cstr(what, value):
    """`value` (a str) as UTF-8 bytes for a C string: TypeError for another type, ValueError for a NUL character
    (C would silently end the string there)."""
    if not isinstance(value, str):
        raise TypeError("%s must be a str, got %s" % (what, type(value).__name__))
    if "\0" in value:
        raise ValueError("%s contains a NUL character, which the C API cannot pass" % what)
    return value.encode()


def _cpath(what, value):
    """A path (str, bytes or os.PathLike) as bytes for a C string; ValueError for a NUL byte."""
    b = os.fsencode(value)
    if b"\0" in b:
        raise ValueError("%s contains a NUL character, which the C API cannot pass" % what)
    return b


def _toml_key(key):
    """A TOML key: bare when it is letters, digits, _ and - only, else a quoted (JSON-escaped) string."""
    if not isinstance(key, str) or not key:
        raise TypeError("compress: a table key must be a non-empty string, got %r" % (key,))
    return key if all(c.isascii() and (c.isalnum() or c in "_-") for c in key) else json.dumps(key)


def _toml_value(where, v):
    """A TOML value for bool, int, finite float, str or a list of them."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            raise ValueError("compress: %s is %r; a config takes finite numbers only" % (where, v))
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string: JSON's escapes (\", \\, \n, \uXXXX) are TOML's
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(where, x) for x in v) + "]"
    raise TypeError("compress: %s is a %s; give bool, int, float, str, a list or a table" % (where, type(v).__name__))


def _toml_text(table, path=()):
    """TOML text of a dict of dicts: scalars and lists first, then [sub.tables], then [[arrays.of.tables]]."""
    lines, subtables = [], []
    for key, v in table.items():
        name = path + (_toml_key(key),)
        if isinstance(v, dict):
            subtables.append(("table", name, v))
        elif isinstance(v, (list, tuple)) and v and all(isinstance(x, dict) for x in v):
            subtables.append(("array", name, v))
        else:
            lines.append("%s = %s" % (name[-1], _toml_value(".".join(name), v)))
    text = "\n".join(lines) + ("\n" if lines else "")
    for kind, name, v in subtables:
        if kind == "table":
            text += "\n[%s]\n" % ".".join(name) + _toml_text(v, name)
        else:
            for item in v:
                text += "\n[[%s]]\n" % ".".join(name) + _toml_text(item, name)
    return text


def _compression_toml(compress):
    """compress= as TOML text, or None when it names a file: a dict ({"scorer": {"plugin": "snapkv"}, ...}) is text;
    a str with a newline is text; one without a newline is a path when it ends in ".toml", names an existing file or
    has no "=", else text ('budget.fraction = 0.3'); bytes and path-like objects are paths."""
    if isinstance(compress, dict):
        return _toml_text(compress)
    if not isinstance(compress, str):
        return None
    if "\n" in compress:
        return compress
    if compress.endswith(".toml") or os.path.isfile(compress) or "=" not in compress:
        return None
    return compress


class _Context:
    """An rkv_context for one call (contexts are cheap; a fresh one keeps calls independent across threads)."""

    def __enter__(self):
        self.handle = ctypes.c_void_p()
        st = _lib.rkv_context_create(ctypes.byref(self.handle))
        if st != OK:
            raise Error(st, "rkv_context_create failed")
        return self

    def __exit__(self, *exc):
        _lib.rkv_context_destroy(self.handle)

    def check(self, status):
        check(status, _lib.rkv_context_last_error(self.handle))


def version():
    """The library version string, e.g. "0.1.0"."""
    return _lib.rkv_version().decode()


def plugins():
    """The discovered plugins: a list of dicts with id, kind, version, path, description, params."""
    with _Context() as ctx:
        out = ctypes.c_void_p()
        ctx.check(_lib.rkv_plugins_json(ctx.handle, ctypes.byref(out)))
        return json.loads(take_string(_lib, out))


def allocate(allocator, prefix_tokens, n_layers=0, budget_fraction=None, budget_tokens=None, profile=None,
             params=None):
    """Per-layer budgets (list of int) from one allocator plugin.

    allocator: plugin id; prefix_tokens: T >= 1; exactly one of budget_fraction (F in (0, 1], B = floor(F*T*L + 0.5))
    and budget_tokens (N >= 1, B = min(N, T)*L), a value outside its range (0, NaN) raising Error naming it; profile: per-layer sensitivities (L taken from it), needed by allocators
    such as "ripplekv"; params: dict or list of "k=v" strings of plugin parameters.
    """
    if (budget_fraction is None) == (budget_tokens is None):
        raise Error(ERROR_INVALID_ARGUMENT, "give exactly one of budget_fraction and budget_tokens")
    if isinstance(params, dict):
        params = ["%s=%s" % (k, v) for k, v in params.items()]
    params = list(params or [])
    prof = [float(x) for x in (profile or [])]
    prefix_tokens = _int("allocate: prefix_tokens", prefix_tokens, *_INT64)
    n_layers = _int("allocate: n_layers", n_layers, *_INT64)
    if budget_tokens is not None:
        budget_tokens = _int("allocate: budget_tokens", budget_tokens, *_INT64)
    if budget_fraction is not None and (isinstance(budget_fraction, (str, bytes)) or budget_fraction is True
                                        or budget_fraction is False):
        raise TypeError("allocate: budget_fraction must be a number, got " + type(budget_fraction).__name__)
    # Checked here because the C API reads 0 as "unset": a given 0 (or NaN) must be named as a bad value.
    if budget_fraction is not None and not 0.0 < float(budget_fraction) <= 1.0:
        raise Error(ERROR_INVALID_ARGUMENT, "budget_fraction must be in (0, 1] (got %s)" % float(budget_fraction))
    if budget_tokens is not None and budget_tokens < 1:
        raise Error(ERROR_INVALID_ARGUMENT, "budget_tokens must be >= 1 (got %d)" % budget_tokens)
    L = len(prof) if prof else n_layers
    o = _C.AllocateOptions()
    o.struct_size = ctypes.sizeof(o)
    o.allocator = _cstr("allocate: allocator", allocator)
    arr = (ctypes.c_char_p * max(len(params), 1))(*[_cstr("allocate: params", p) for p in params])
    o.params = ctypes.cast(arr, ctypes.POINTER(ctypes.c_char_p)) if params else None
    o.n_params = len(params)
    parr = (ctypes.c_double * max(len(prof), 1))(*prof)
    o.profile = ctypes.cast(parr, ctypes.POINTER(ctypes.c_double)) if prof else None
    o.n_profile = len(prof)
    o.prefix_tokens = prefix_tokens
    o.budget_fraction = 0.0 if budget_fraction is None else float(budget_fraction)
    o.budget_tokens = 0 if budget_tokens is None else budget_tokens
    o.n_layers = n_layers
    out = (ctypes.c_int64 * max(L, 1))()
    with _Context() as ctx:
        ctx.check(_lib.rkv_allocate(ctx.handle, ctypes.byref(o), out, max(L, 0)))
    return list(out[:L])


def profile(config, threads=0):
    """The sensitivity profile (dict, the content of profile.json) of the TOML config file `config`."""
    config_b = _cpath("profile: config", config)
    threads = _int("profile: threads", threads, 0, _INT32[1])
    with _Context() as ctx:
        out = ctypes.c_void_p()
        ctx.check(_lib.rkv_profile(ctx.handle, config_b, threads, ctypes.byref(out)))
        return json.loads(take_string(_lib, out))


def run(config=None, out=None, progress=None, cancel=None, config_text=None, threads=0, resume=False):
    """Runs the ablation sweep of the TOML config file `config` (or TOML text `config_text`) into folder `out`
    (None: the config's [output] dir) and returns results(out).

    progress(done, total, label) is called after each example, once every pending cell has run on it (done and total
    count examples); cancel() returning True stops the run before its next example or cell (it is polled from a
    library thread too), raising Error with status ERROR_CANCELLED; finished cells stay in out/cells, the examples
    each unfinished cell finished in out/partial, and nothing is half-written (rerun with resume=True to continue).
    """
    if (config is None) == (config_text is None):
        raise Error(ERROR_INVALID_ARGUMENT, "give exactly one of config and config_text")
    errors = []

    def on_progress(done, total, label, _user):
        if progress is not None:
            try:
                progress(done, total, label.decode())
            except BaseException as e:  # an exception cannot cross the C boundary: re-raised after the run
                errors.append(e)

    def on_cancel(_user):
        if errors:
            return 1
        try:
            return 1 if (cancel is not None and cancel()) else 0
        except BaseException as e:
            errors.append(e)
            return 1

    o = _C.RunOptions()
    o.struct_size = ctypes.sizeof(o)
    o.config_path = _cpath("run: config", config) if config is not None else None
    o.config_text = _cstr("run: config_text", config_text) if config_text is not None else None
    o.out_dir = _cpath("run: out", out) if out is not None else None
    o.threads = _int("run: threads", threads, 0, _INT32[1])
    o.resume = 1 if resume else 0
    progress_cb = _C.PROGRESS(on_progress)
    cancel_cb = _C.CANCEL(on_cancel)
    o.progress = progress_cb
    o.cancel = cancel_cb if (cancel is not None or progress is not None) else _C.CANCEL()
    with _Context() as ctx:
        st = _lib.rkv_run(ctx.handle, ctypes.byref(o))
        if errors:
            raise errors[0]
        ctx.check(st)
    return results(out) if out is not None else None


def results(out):
    """The records of out/results.jsonl as a list of dicts (keys as README "Results"); in the folder of a sweep over
    model.path / data.eval.seed (out/runs.json), every run's records, each with "run": the run's name."""
    with _Context() as ctx:
        s = ctypes.c_void_p()
        ctx.check(_lib.rkv_results_json(ctx.handle, _cpath("results: out", out), ctypes.byref(s)))
        return json.loads(take_string(_lib, s))


class Model:
    """One open model (GGUF file or Hugging Face folder) with its tokenizer, on a backend.

    backend: "cpu" (default), "cuda", or "auto" (cuda when the library has the CUDA backend and a device is
    present); "cuda" without a device raises Error with ERROR_UNSUPPORTED ("model.backend = cuda: no CUDA device
    ..."). dtype: "f32" (default) or "bf16" (cuda only). threads: CPU threads (0 = all cores), process-wide.
    weights: how the cpu backend holds the weights (the config key model.weights): "quantized" (default: Q8_0, Q4_0
    and Q4_1 matrices kept in their blocks, other quantized and F16/BF16 matrices requantized to Q8_0 at load) or
    "f32" (dequantized at load: the exact oracle, about 4 bytes per parameter); cuda always loads float32; another
    value raises Error with ERROR_INVALID_ARGUMENT. Close with close() or use as a context manager.
    """

    def __init__(self, path, backend="cpu", threads=0, dtype="f32", weights="quantized"):
        o = _C.ModelOptions()
        o.struct_size = ctypes.sizeof(o)
        self._h = None
        o.path = _cpath("Model: path", path)
        for name, value, allowed in (("backend", backend, '"cpu", "cuda" or "auto"'), ("dtype", dtype, '"f32" or "bf16"'),
                                     ("weights", weights, '"quantized" or "f32"')):
            if not isinstance(value, str) or "\0" in value or not value.isascii():
                raise Error(ERROR_INVALID_ARGUMENT, f"{name} must be an ASCII str without NUL: {allowed}")
        o.backend = backend.encode()
        o.dtype = dtype.encode()
        o.weights = weights.encode()
        o.threads = _int("Model: threads", threads, 0, _INT32[1])
        self._h = ctypes.c_void_p()
        with _Context() as ctx:
            ctx.check(_lib.rkv_model_open(ctx.handle, ctypes.byref(o), ctypes.byref(self._h)))

    def _check(self, status):
        if self._h is None or not self._h.value:
            raise Error(ERROR_INVALID_ARGUMENT, "the model is closed")
        check(status, _lib.rkv_model_last_error(self._h))

    def _live(self):
        if self._h is None or not self._h.value:
            raise Error(ERROR_INVALID_ARGUMENT, "the model is closed")
        return self._h

    def tokenize(self, text, add_bos=True, parse_special=False):
        """Token ids (list of int) of UTF-8 `text` (a str without NUL characters: the C API takes C strings)."""
        if not isinstance(text, str):
            raise TypeError("tokenize: text must be a str, got " + type(text).__name__)
        if "\0" in text:
            raise ValueError("tokenize: text contains a NUL character, which the C API cannot pass")
        ids = ctypes.POINTER(ctypes.c_int32)()
        n = ctypes.c_size_t()
        self._check(_lib.rkv_tokenize(self._live(), text.encode(), int(add_bos), int(parse_special),
                                      ctypes.byref(ids), ctypes.byref(n)))
        try:
            return list(ids[:n.value])
        finally:
            _lib.rkv_ids_free(ids)

    def detokenize(self, ids, render_special=True):
        """Text of token ids."""
        ids = [_int("detokenize: a token id", i, *_INT32) for i in ids]  # 1.7 is a TypeError, not id 1
        arr = (ctypes.c_int32 * max(len(ids), 1))(*ids)
        out = ctypes.c_void_p()
        self._check(_lib.rkv_detokenize(self._live(), arr, len(ids), int(render_special), ctypes.byref(out)))
        return take_string(_lib, out)

    def generate(self, prompt, chat=False, max_new_tokens=256, compress=None, profile=None, info=False):
        """Greedy continuation of `prompt` (chat=True wraps it as a user turn of the chat template); new text only.

        compress: a compression config ([scorer], [allocator], [budget], [compression...]) as a path of a TOML file,
        a string of TOML text (one with a newline, or an "=" and no ".toml" ending), or a dict of tables, e.g.
        {"scorer": {"plugin": "snapkv"}, "allocator": {"plugin": "uniform"}, "budget": {"fraction": 0.3}}; the
        prompt's KV cache is compressed after prefill and decoding runs on the compacted cache. Text and dicts are
        written to a private temporary file for the call (so relative paths inside them resolve against its folder:
        give absolute ones). profile: a profile.json, for allocators that need a
        sensitivity profile (ripplekv). info=True (with compress) returns (text, dict) where the dict holds scorer,
        allocator, prompt_tokens, budget_total, budgets (per layer), kv_bytes_full, kv_bytes_kept and warnings."""
        if info and compress is None:
            raise ValueError("info=True needs compress=CONFIG")
        o = _C.GenerateOptions()
        o.struct_size = ctypes.sizeof(o)
        o.prompt = _cstr("generate: prompt", prompt)  # a NUL would silently end the prompt there
        o.chat = 1 if chat else 0
        o.max_new_tokens = _int("generate: max_new_tokens", max_new_tokens, *_INT64)
        o.profile_path = _cpath("generate: profile", profile) if profile is not None else None
        info_out = ctypes.c_void_p()
        if info:
            o.out_compression_json = ctypes.pointer(info_out)
        out = ctypes.c_void_p()
        toml = _compression_toml(compress) if compress is not None else None
        if toml is None:
            o.compression_config = _cpath("generate: compress", compress) if compress is not None else None
            self._check(_lib.rkv_generate(self._live(), ctypes.byref(o), ctypes.byref(out)))
        else:
            with tempfile.TemporaryDirectory(prefix="ripplekv-compress-") as d:
                path = os.path.join(d, "compress.toml")
                with open(path, "w", encoding="utf-8") as f:
                    f.write(toml)
                o.compression_config = _cpath("generate: compress", path)
                try:
                    self._check(_lib.rkv_generate(self._live(), ctypes.byref(o), ctypes.byref(out)))
                except Error as e:  # name what the caller gave, not the temporary file gone after the call
                    given = "compress (a dict)" if isinstance(compress, dict) else "compress (TOML text)"
                    raise Error(e.status, e.message.replace(path, given)) from None
        text = take_string(_lib, out)
        if info:
            return text, json.loads(take_string(_lib, info_out))
        return text

    def close(self):
        if self._h is not None and self._h.value:
            _lib.rkv_model_close(self._h)
        self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
