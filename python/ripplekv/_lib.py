"""Loading libripplekv and declaring the C API's structs and signatures for ctypes (see abi/ripplekv/ripplekv.h)."""
import ctypes
import ctypes.util
import os

_NAMES = {0: "ok", 1: "invalid argument", 2: "internal error", 3: "cancelled", 4: "unsupported", 5: "out of memory"}


class Error(Exception):
    """A failed ripplekv call: .status is the rkv_status code (ripplekv.ERROR_*), .message the C message."""

    def __init__(self, status, message):
        super().__init__("%s (%s)" % (message, _NAMES.get(status, "status %d" % status)))
        self.status = status
        self.message = message


def check(status, message):
    if status != 0:
        raise Error(status, (message or b"").decode("utf-8", "replace"))


def take_string(lib, ptr):
    """Copies a library-allocated C string (c_void_p) into a Python str and frees it with rkv_string_free."""
    try:
        return ctypes.string_at(ptr.value).decode("utf-8", "replace") if ptr.value else ""
    finally:
        lib.rkv_string_free(ptr)


def _find():
    env = os.environ.get("RIPPLEKV_LIB")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    local = os.path.join(here, "..", "..", "build", "lib", "libripplekv.so")
    if os.path.exists(local):
        return local
    return ctypes.util.find_library("ripplekv") or "libripplekv.so"


class _C:
    PROGRESS = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_char_p, ctypes.c_void_p)
    CANCEL = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)

    class ModelOptions(ctypes.Structure):
        _fields_ = [("struct_size", ctypes.c_size_t), ("path", ctypes.c_char_p), ("backend", ctypes.c_char_p),
                    ("threads", ctypes.c_int32), ("dtype", ctypes.c_char_p), ("weights", ctypes.c_char_p)]

    class GenerateOptions(ctypes.Structure):
        _fields_ = [("struct_size", ctypes.c_size_t), ("prompt", ctypes.c_char_p), ("chat", ctypes.c_int),
                    ("max_new_tokens", ctypes.c_int64), ("compression_config", ctypes.c_char_p),
                    ("profile_path", ctypes.c_char_p), ("out_compression_json", ctypes.POINTER(ctypes.c_void_p))]

    class AllocateOptions(ctypes.Structure):
        _fields_ = [("struct_size", ctypes.c_size_t), ("allocator", ctypes.c_char_p),
                    ("params", ctypes.POINTER(ctypes.c_char_p)), ("n_params", ctypes.c_size_t),
                    ("profile", ctypes.POINTER(ctypes.c_double)), ("n_profile", ctypes.c_size_t),
                    ("prefix_tokens", ctypes.c_int64), ("budget_fraction", ctypes.c_double),
                    ("budget_tokens", ctypes.c_int64), ("n_layers", ctypes.c_int64)]


_C.RunOptions = type("RunOptions", (ctypes.Structure,), {"_fields_": [
    ("struct_size", ctypes.c_size_t), ("config_path", ctypes.c_char_p), ("config_text", ctypes.c_char_p),
    ("out_dir", ctypes.c_char_p), ("threads", ctypes.c_int32), ("resume", ctypes.c_int),
    ("progress", _C.PROGRESS), ("cancel", _C.CANCEL), ("user_data", ctypes.c_void_p)]})


def load_library():
    lib = ctypes.CDLL(_find())
    P, I, S, V, St = ctypes.POINTER, ctypes.c_int32, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int32
    sigs = {
        "rkv_version": (ctypes.c_char_p, []),
        "rkv_string_free": (None, [V]),
        "rkv_ids_free": (None, [P(ctypes.c_int32)]),
        "rkv_context_create": (St, [P(V)]),
        "rkv_context_destroy": (None, [V]),
        "rkv_context_last_error": (ctypes.c_char_p, [V]),
        "rkv_plugins_json": (St, [V, P(V)]),
        "rkv_model_open": (St, [V, P(_C.ModelOptions), P(V)]),
        "rkv_model_close": (None, [V]),
        "rkv_model_last_error": (ctypes.c_char_p, [V]),
        "rkv_tokenize": (St, [V, ctypes.c_char_p, ctypes.c_int, ctypes.c_int, P(P(ctypes.c_int32)), P(S)]),
        "rkv_detokenize": (St, [V, P(ctypes.c_int32), S, ctypes.c_int, P(V)]),
        "rkv_generate": (St, [V, P(_C.GenerateOptions), P(V)]),
        "rkv_profile": (St, [V, ctypes.c_char_p, I, P(V)]),
        "rkv_allocate": (St, [V, P(_C.AllocateOptions), P(ctypes.c_int64), S]),
        "rkv_run": (St, [V, P(_C.RunOptions)]),
        "rkv_results_json": (St, [V, ctypes.c_char_p, P(V)]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    return lib, _C
