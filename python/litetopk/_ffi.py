"""ctypes mirror of include/litetopk.h: library discovery, structures, prototypes, errors.

Everything here follows the header field for field; python/tests/test_abi.py checks every status
code, enumerator and flag below against the header by name and value, and compiles a small C
program against the header (when a compiler is present) to check the structures' offsets.
"""
from __future__ import annotations

import ctypes
import glob
import os
from pathlib import Path

# ---- status codes (pinned ABI values) ----------------------------------------------------------
LTK_OK = 0
LTK_EINVAL = -1
LTK_EUNSUPPORTED = -2
LTK_ENOBACKEND = -3
LTK_ENOMEM = -4
LTK_EWORKSPACE = -5
LTK_ECUDA = -6
LTK_EINTERNAL = -7
LTK_EIO = -8
LTK_EFORMAT = -9

DTYPE_F32, DTYPE_F16, DTYPE_BF16, DTYPE_E4M3 = 0, 1, 2, 3
METRIC_IP, METRIC_L2, METRIC_COS = 0, 1, 2
BACKEND_AUTO, BACKEND_REF, BACKEND_CPU, BACKEND_CUDA = 0, 1, 2, 3
ALGO_FUSED, ALGO_MATERIALIZE, ALGO_SCORE_ONLY = 0, 1, 2
FLAG_UNSORTED = 0x1
FLAG_ABSOLUTE = 0x2
FLAG_PHYSICAL = 0x4
FLAG_PIN_NEWEST = 0x8
FLAG_BY_INDEX = 0x10

# the header's limits (LTK_*_MAX_*), checked against it by tests/test_abi.py
INDEXER_MAX_K, INDEXER_MAX_H, INDEXER_MAX_D = 8192, 128, 256
KNN_MAX_K, KNN_MAX_D = 16384, 65536
SELECT_MAX_K = 65536
STATE_MAX_SIZE = 1 << 20
DECODE_MAX_NEXT_N, DECODE_MAX_BLOCK = 8, 1024
BLOCK_MAX_SIZE, BLOCKS_MAX_K = 64, 4096
MAX_ROWS = 2147483647

BACKENDS = {"auto": BACKEND_AUTO, "ref": BACKEND_REF, "cpu": BACKEND_CPU, "cuda": BACKEND_CUDA}
BACKEND_NAMES = {v: k for k, v in BACKENDS.items()}
ALGOS = {"fused": ALGO_FUSED, "materialize": ALGO_MATERIALIZE, "score_only": ALGO_SCORE_ONLY}
METRICS = {"ip": METRIC_IP, "l2": METRIC_L2, "cos": METRIC_COS}


# ---- exceptions ----------------------------------------------------------------------------------
class LiteTopKError(Exception):
    """Base class of the errors returned by the C library.

    Attributes
    ----------
    status : int
        The ``ltk_status`` value (negative).
    message : str
        ``ltk_last_error()`` of the failed call (may be empty).
    """

    def __init__(self, status: int, message: str):
        self.status = status
        self.message = message
        super().__init__(message)


class InvalidArgumentError(LiteTopKError, ValueError):
    """LTK_EINVAL: an argument the library rejected (shape, stride, range, option)."""


class UnsupportedError(LiteTopKError, RuntimeError):
    """LTK_EUNSUPPORTED: valid, but this backend does not implement the case."""


class BackendUnavailableError(LiteTopKError, RuntimeError):
    """LTK_ENOBACKEND: the backend is not compiled in or has no device on this machine."""


class OutOfMemoryError(LiteTopKError, MemoryError):
    """LTK_ENOMEM."""


class WorkspaceTooSmallError(LiteTopKError, ValueError):
    """LTK_EWORKSPACE: the workspace passed is smaller than *_workspace_size()."""


class CudaError(LiteTopKError, RuntimeError):
    """LTK_ECUDA: a CUDA runtime call failed inside the library."""


class InternalError(LiteTopKError, RuntimeError):
    """LTK_EINTERNAL: a library invariant failed (please report)."""


class FileError(LiteTopKError, OSError):
    """LTK_EIO / LTK_EFORMAT."""


_EXC = {
    LTK_EINVAL: InvalidArgumentError,
    LTK_EUNSUPPORTED: UnsupportedError,
    LTK_ENOBACKEND: BackendUnavailableError,
    LTK_ENOMEM: OutOfMemoryError,
    LTK_EWORKSPACE: WorkspaceTooSmallError,
    LTK_ECUDA: CudaError,
    LTK_EINTERNAL: InternalError,
    LTK_EIO: FileError,
    LTK_EFORMAT: FileError,
}


# ---- structures ----------------------------------------------------------------------------------
class ltk_stats(ctypes.Structure):
    _fields_ = [
        ("rows", ctypes.c_int64),
        ("short_rows", ctypes.c_int64),
        ("candidates", ctypes.c_int64),
        ("candidates_max", ctypes.c_int64),
        ("bin_entries", ctypes.c_int64),
        ("bin_entries_max", ctypes.c_int64),
        ("compactions", ctypes.c_int64),
        ("fallback_rows", ctypes.c_int64),
        ("row_candidates", ctypes.c_void_p),
        ("row_bin_entries", ctypes.c_void_p),
    ]


class ltk_exec(ctypes.Structure):
    _fields_ = [
        ("backend", ctypes.c_int),
        ("algo", ctypes.c_int),
        ("stream", ctypes.c_void_p),
        ("workspace", ctypes.c_void_p),
        ("workspace_bytes", ctypes.c_size_t),
        ("num_threads", ctypes.c_int32),
        ("stats", ctypes.POINTER(ltk_stats)),
    ]


class ltk_indexer_args(ctypes.Structure):
    _fields_ = [
        ("T", ctypes.c_int64),
        ("S", ctypes.c_int64),
        ("H", ctypes.c_int32),
        ("D", ctypes.c_int32),
        ("k", ctypes.c_int32),
        ("dtype", ctypes.c_int),
        ("q", ctypes.c_void_p),
        ("q_stride_t", ctypes.c_int64),
        ("kv", ctypes.c_void_p),
        ("kv_stride_s", ctypes.c_int64),
        ("kv_scale", ctypes.c_void_p),
        ("weights", ctypes.c_void_p),
        ("w_stride_t", ctypes.c_int64),
        ("ks", ctypes.c_void_p),
        ("ke", ctypes.c_void_p),
        ("out_idx", ctypes.c_void_p),
        ("out_scores", ctypes.c_void_p),
        ("out_stride", ctypes.c_int64),
        ("flags", ctypes.c_uint32),
        ("state", ctypes.c_void_p),
    ]


class ltk_blocks_args(ctypes.Structure):
    _fields_ = [
        ("ix", ltk_indexer_args),
        ("block_size", ctypes.c_int32),
        ("block_k", ctypes.c_int32),
        ("out_blocks", ctypes.c_void_p),
        ("out_block_scores", ctypes.c_void_p),
        ("blocks_stride", ctypes.c_int64),
    ]


class ltk_candidates_args(ctypes.Structure):
    _fields_ = [
        ("ix", ltk_indexer_args),
        ("block_size", ctypes.c_int32),
        ("n_blocks", ctypes.c_int32),
        ("blocks", ctypes.c_void_p),
        ("blocks_stride", ctypes.c_int64),
    ]


PREFILL_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                                    ctypes.c_int64, ctypes.c_void_p)


class ltk_prefill_args(ctypes.Structure):
    _fields_ = [
        ("L", ctypes.c_int64),
        ("m", ctypes.c_int32),
        ("H", ctypes.c_int32),
        ("D", ctypes.c_int32),
        ("k", ctypes.c_int32),
        ("dtype", ctypes.c_int),
        ("q", ctypes.c_void_p),
        ("q_stride_t", ctypes.c_int64),
        ("kv", ctypes.c_void_p),
        ("kv_stride_s", ctypes.c_int64),
        ("kv_scale", ctypes.c_void_p),
        ("weights", ctypes.c_void_p),
        ("w_stride_t", ctypes.c_int64),
        ("chunk", ctypes.c_int64),
        ("sample_size", ctypes.c_int32),
        ("out_idx", ctypes.c_void_p),
        ("out_scores", ctypes.c_void_p),
        ("out_stride", ctypes.c_int64),
        ("flags", ctypes.c_uint32),
        ("callback", PREFILL_CALLBACK),
        ("user", ctypes.c_void_p),
        ("progress", ctypes.c_int),
    ]


class ltk_decode_args(ctypes.Structure):
    _fields_ = [
        ("B", ctypes.c_int64),
        ("next_n", ctypes.c_int32),
        ("H", ctypes.c_int32),
        ("D", ctypes.c_int32),
        ("k", ctypes.c_int32),
        ("dtype", ctypes.c_int),
        ("q", ctypes.c_void_p),
        ("q_stride", ctypes.c_int64),
        ("kv_cache", ctypes.c_void_p),
        ("num_blocks", ctypes.c_int64),
        ("block_kv", ctypes.c_int32),
        ("block_stride", ctypes.c_int64),
        ("block_table", ctypes.c_void_p),
        ("bt_stride", ctypes.c_int64),
        ("max_blocks", ctypes.c_int32),
        ("lens", ctypes.c_void_p),
        ("seq_lens", ctypes.c_void_p),
        ("max_len", ctypes.c_int32),
        ("weights", ctypes.c_void_p),
        ("w_stride", ctypes.c_int64),
        ("out_idx", ctypes.c_void_p),
        ("out_scores", ctypes.c_void_p),
        ("out_stride", ctypes.c_int64),
        ("flags", ctypes.c_uint32),
    ]


class ltk_decode_blocks_args(ctypes.Structure):
    _fields_ = [
        ("dx", ltk_decode_args),
        ("block_size", ctypes.c_int32),
        ("block_k", ctypes.c_int32),
        ("out_blocks", ctypes.c_void_p),
        ("out_block_scores", ctypes.c_void_p),
        ("blocks_stride", ctypes.c_int64),
    ]


class ltk_decode_candidates_args(ctypes.Structure):
    _fields_ = [
        ("dx", ltk_decode_args),
        ("block_size", ctypes.c_int32),
        ("n_blocks", ctypes.c_int32),
        ("blocks", ctypes.c_void_p),
        ("blocks_stride", ctypes.c_int64),
    ]


class ltk_knn_args(ctypes.Structure):
    _fields_ = [
        ("B", ctypes.c_int64),
        ("N", ctypes.c_int64),
        ("D", ctypes.c_int32),
        ("k", ctypes.c_int32),
        ("dtype", ctypes.c_int),
        ("metric", ctypes.c_int),
        ("queries", ctypes.c_void_p),
        ("q_stride", ctypes.c_int64),
        ("base", ctypes.c_void_p),
        ("base_stride", ctypes.c_int64),
        ("out_idx", ctypes.c_void_p),
        ("out_scores", ctypes.c_void_p),
        ("out_stride", ctypes.c_int64),
        ("flags", ctypes.c_uint32),
    ]


class ltk_select_args(ctypes.Structure):
    _fields_ = [
        ("rows", ctypes.c_int64),
        ("cols", ctypes.c_int64),
        ("k", ctypes.c_int32),
        ("dtype", ctypes.c_int),
        ("scores", ctypes.c_void_p),
        ("row_stride", ctypes.c_int64),
        ("starts", ctypes.c_void_p),
        ("ends", ctypes.c_void_p),
        ("out_idx", ctypes.c_void_p),
        ("out_scores", ctypes.c_void_p),
        ("out_stride", ctypes.c_int64),
        ("flags", ctypes.c_uint32),
    ]


class ltk_merge_args(ctypes.Structure):
    _fields_ = [
        ("rows", ctypes.c_int64),
        ("lists", ctypes.c_int32),
        ("list_len", ctypes.c_int32),
        ("k", ctypes.c_int32),
        ("scores", ctypes.c_void_p),
        ("ids", ctypes.c_void_p),
        ("row_stride", ctypes.c_int64),
        ("list_stride", ctypes.c_int64),
        ("out_idx", ctypes.c_void_p),
        ("out_scores", ctypes.c_void_p),
        ("out_stride", ctypes.c_int64),
        ("flags", ctypes.c_uint32),
    ]


# ---- library discovery ---------------------------------------------------------------------------
_PKG_DIR = Path(__file__).resolve().parent
_LIB_NAME = "liblitetopk.so"


def _checkout_roots():
    """Checkout roots to look for build*/liblitetopk.so in: the one recorded at build time (an
    installed copy no longer sits in the tree) and the one this file lives in (source tree use)."""
    roots = []
    rec = _PKG_DIR / "_lib" / "checkout.txt"
    try:
        roots.append(Path(rec.read_text().strip()))
    except OSError:
        pass
    roots.append(_PKG_DIR.parent.parent)
    seen, out = set(), []
    for r in roots:
        if r not in seen:
            seen.add(r)
            out.append(r)
    return out


def candidate_paths():
    """Where the library is looked for, in order (the first existing one is loaded)."""
    paths = []
    env = os.environ.get("LTK_LIBRARY")
    if env:
        return [Path(env)]  # an explicit choice is never silently replaced by another library
    paths.append(_PKG_DIR / "_lib" / _LIB_NAME)
    for root in _checkout_roots():
        # newest build first: the one the developer most likely just rebuilt. A link whose target
        # is missing (build*/liblitetopk.so while that build relinks the library) sorts last, and
        # lib() reports it as missing instead of the sort failing.
        found = glob.glob(str(root / "build*" / _LIB_NAME))
        found.sort(key=lambda p: os.path.getmtime(p) if os.path.exists(p) else 0.0, reverse=True)
        paths.extend(Path(p) for p in found)
    return paths


_lib = None
_lib_path = None


def _declare(lib):
    P = ctypes.c_void_p
    st = ctypes.c_int
    sig = {
        "ltk_status_str": (ctypes.c_char_p, [st]),
        "ltk_last_error": (ctypes.c_char_p, []),
        "ltk_indexer_workspace_size": (st, [P, P, ctypes.POINTER(ctypes.c_size_t)]),
        "ltk_indexer_topk": (st, [P, P]),
        "ltk_indexer_state_create": (st, [ctypes.c_int, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p)]),
        "ltk_indexer_state_free": (None, [P]),
        "ltk_indexer_state_reset": (st, [P]),
        "ltk_indexer_state_get": (st, [P, P, ctypes.c_int32, ctypes.POINTER(ctypes.c_int32)]),
        "ltk_indexer_state_set": (st, [P, P, ctypes.c_int32]),
        "ltk_knn_workspace_size": (st, [P, P, ctypes.POINTER(ctypes.c_size_t)]),
        "ltk_knn_topk": (st, [P, P]),
        "ltk_select_workspace_size": (st, [P, P, ctypes.POINTER(ctypes.c_size_t)]),
        "ltk_select_topk": (st, [P, P]),
        "ltk_merge_workspace_size": (st, [P, P, ctypes.POINTER(ctypes.c_size_t)]),
        "ltk_topk_merge": (st, [P, P]),
        "ltk_backend_available": (ctypes.c_int, [ctypes.c_int]),
        "ltk_backend_name": (ctypes.c_char_p, [ctypes.c_int]),
        "ltk_backend_resolve": (ctypes.c_int, [ctypes.c_int]),
        "ltk_info": (st, [ctypes.c_char_p, ctypes.c_size_t]),
        "ltk_dtype_size": (ctypes.c_size_t, [ctypes.c_int]),
    }
    # newer entry points: a library built before them still loads, the Python call then says so
    optional = {
        "ltk_prefill_workspace_size": (st, [P, P, ctypes.POINTER(ctypes.c_size_t)]),
        "ltk_prefill_run": (st, [P, P]),
        "ltk_decode_workspace_size": (st, [P, P, ctypes.POINTER(ctypes.c_size_t)]),
        "ltk_decode_topk": (st, [P, P]),
        "ltk_blocks_workspace_size": (st, [P, P, ctypes.POINTER(ctypes.c_size_t)]),
        "ltk_blocks_topk": (st, [P, P]),
        "ltk_candidates_workspace_size": (st, [P, P, ctypes.POINTER(ctypes.c_size_t)]),
        "ltk_candidates_topk": (st, [P, P]),
        "ltk_decode_blocks_topk": (st, [P, P]),
        "ltk_decode_candidates_topk": (st, [P, P]),
    }
    for name, (res, args) in list(sig.items()) + list(optional.items()):
        try:
            fn = getattr(lib, name)
        except AttributeError:
            if name in optional:
                continue
            raise
        fn.restype = res
        fn.argtypes = args


def entry(name):
    """A library function, or UnsupportedError when the loaded library predates it."""
    fn = getattr(lib(), name, None)
    if fn is None or fn.argtypes is None:
        raise UnsupportedError(LTK_EUNSUPPORTED, f"{name} is not in the loaded library ({library_path()}); rebuild it")
    return fn


def lib():
    """The loaded shared library (loaded on first use)."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    tried = []
    for p in candidate_paths():
        if not p.is_file():
            tried.append(f"{p} (missing)")
            continue
        try:
            handle = ctypes.CDLL(str(p))
            _declare(handle)
        except (OSError, AttributeError) as e:
            tried.append(f"{p} ({e})")
            continue
        _lib, _lib_path = handle, p
        return _lib
    raise ImportError(
        "litetopk: cannot load liblitetopk.so. Build it (cmake -S . -B build && cmake --build build), "
        "reinstall the package (pip install ./python), or set LTK_LIBRARY to its path. Tried: "
        + "; ".join(tried if tried else ["nothing"])
    )


def library_path() -> str:
    """Path of the shared library in use."""
    lib()
    return str(_lib_path)


def last_error() -> str:
    msg = lib().ltk_last_error()
    return msg.decode("utf-8", "replace") if msg else ""


def check(status: int, what: str) -> None:
    """Raises the exception mapped from a non-OK status, carrying ltk_last_error()."""
    if status == LTK_OK:
        return
    detail = last_error()
    text = lib().ltk_status_str(status)
    text = text.decode() if text else "unknown status"
    exc = _EXC.get(status, InternalError)
    raise exc(status, f"{what}: {text}" + (f": {detail}" if detail else ""))
