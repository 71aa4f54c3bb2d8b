"""What the torch GPU benchmarks share, on top of the Python package's ctypes layer
(python/litetopk/_ffi.py: the structures, the constants, the library loader and the status check).

The library is the full liblitetopk.so that _ffi.lib() loads: $LTK_LIBRARY (scripts/gpu.sh sets it
to the carried gpu-bin/liblitetopk.so), else the newest build*/liblitetopk.so of the checkout. The
checkout's python/ goes first on sys.path, so the ctypes mirror is the one of the header this
checkout's library was built from. Tensors are torch CUDA tensors; workspaces are torch allocations
on the current stream, so nothing here allocates behind torch's back.
"""
import ctypes as C
import os
import sys

import torch

# (LTK_PYTHON_DIR: another copy of the binding, for an A/B against an earlier commit's)
_PY = os.environ.get("LTK_PYTHON_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python")
if _PY not in sys.path:
    sys.path.insert(0, _PY)
from litetopk import _ffi  # noqa: E402

DT = {torch.float32: _ffi.DTYPE_F32, torch.float16: _ffi.DTYPE_F16, torch.bfloat16: _ffi.DTYPE_BF16}


def _set_outputs(a, out_idx, out_scores, flags):
    """The output fields and flags the kNN and select argument structs share."""
    a.out_idx = out_idx.data_ptr()
    a.out_scores = out_scores.data_ptr() if out_scores is not None else None
    a.out_stride = out_idx.stride(0)
    a.flags = flags
    return a


def knn_args(q, x, k, out_idx, out_scores=None, metric="ip", flags=0):
    """ltk_knn_args of torch tensors: queries q [B, D], corpus x [N, D], outputs [B, k]."""
    a = _ffi.ltk_knn_args()
    a.B, a.D = q.shape
    a.N = x.shape[0]
    a.k = k
    a.dtype = DT[q.dtype]
    a.metric = _ffi.METRICS[metric]
    a.queries, a.q_stride = q.data_ptr(), q.stride(0)
    a.base, a.base_stride = x.data_ptr(), x.stride(0)
    return _set_outputs(a, out_idx, out_scores, flags)


def select_args(scores, k, out_idx, out_scores=None, flags=0):
    """ltk_select_args of torch tensors: score rows [rows, cols], outputs [rows, k]."""
    a = _ffi.ltk_select_args()
    a.rows, a.cols = scores.shape
    a.k = k
    a.dtype = DT[scores.dtype]
    a.scores, a.row_stride = scores.data_ptr(), scores.stride(0)
    return _set_outputs(a, out_idx, out_scores, flags)


class GpuCalls:
    """The library's select and kNN on the CUDA backend, on torch's current stream, each call kind
    ("select", "knn_fused", ...) with one workspace kept between calls and grown when a call needs
    more, so the timed calls allocate nothing."""

    def __init__(self):
        self.lib = _ffi.lib()
        self.path = _ffi.library_path()
        self._ws = {}

    def exec_record(self, algo=_ffi.ALGO_FUSED, stats=None):
        """An ltk_exec for the CUDA backend on the current stream (stats: an _ffi.ltk_stats)."""
        e = _ffi.ltk_exec()
        e.backend = _ffi.BACKEND_CUDA
        e.algo = algo
        e.stream = torch.cuda.current_stream().cuda_stream
        if stats is not None:
            e.stats = C.pointer(stats)
        return e

    def workspace(self, tag, nbytes=0):
        """The device workspace of a call kind, at least nbytes long."""
        t = self._ws.get(tag)
        if t is None or t.numel() < nbytes:
            t = torch.empty(max(int(nbytes), 1), dtype=torch.uint8, device="cuda")
            self._ws[tag] = t
        return t

    def _call(self, run, size, args, e, tag):
        n = C.c_size_t(0)
        _ffi.check(size(C.byref(args), C.byref(e), C.byref(n)), tag + " workspace size")
        ws = self.workspace(tag, n.value)
        e.workspace, e.workspace_bytes = ws.data_ptr(), ws.numel()
        _ffi.check(run(C.byref(args), C.byref(e)), tag)
        return n.value

    def select(self, scores, k, out_idx, out_scores=None, flags=0, stats=None):
        """One select call; returns the workspace size it asked for."""
        a = select_args(scores, k, out_idx, out_scores, flags)
        return self._call(self.lib.ltk_select_topk, self.lib.ltk_select_workspace_size, a,
                          self.exec_record(_ffi.ALGO_FUSED, stats), "select")

    def knn(self, q, x, k, out_idx, out_scores=None, metric="ip", algo="fused", flags=0, stats=None):
        """One kNN call; returns the workspace size it asked for."""
        a = knn_args(q, x, k, out_idx, out_scores, metric, flags)
        return self._call(self.lib.ltk_knn_topk, self.lib.ltk_knn_workspace_size, a,
                          self.exec_record(_ffi.ALGOS[algo], stats), "knn_" + algo)

    def knn_prepared(self, q, x, k, out_idx, out_scores=None, metric="ip", algo="fused", flags=0):
        """One checked call, then a function that repeats it through the C entry point with the same
        arguments, execution record and workspace (what a C or C++ caller does): timed loops measure
        the library's call, not ~20 us of building ctypes structures in Python (measured on
        the H200: 0.500 ms a call that way against 0.459 bare at B = 64, N = 1M, k = 1024)."""
        a = knn_args(q, x, k, out_idx, out_scores, metric, flags)
        e = self.exec_record(_ffi.ALGOS[algo])
        tag = "knn_" + algo
        self._call(self.lib.ltk_knn_topk, self.lib.ltk_knn_workspace_size, a, e, tag)
        ws = self._ws[tag]  # held by the closure: a later, larger call of the tag replaces it
        fn, pa, pe = self.lib.ltk_knn_topk, C.byref(a), C.byref(e)

        def call():
            st = fn(pa, pe)
            if st != _ffi.LTK_OK:
                _ffi.check(st, "%s (workspace %d bytes)" % (tag, ws.numel()))
        return call


def knn_shape_args(N=1 << 20, k="1024"):
    """The kNN probes' shared options (--B --N --D --k; k a comma list where the default is a
    string) on a parser the caller extends."""
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--B", type=int, default=64)
    ap.add_argument("--N", type=int, default=N)
    ap.add_argument("--D", type=int, default=768)
    ap.add_argument("--k", type=type(k), default=k)
    return ap


def randn_knn(a):
    """Seeded bf16 randn corpus x [N, D] and queries q [B, D] on the GPU for args a."""
    torch.manual_seed(0)
    x = torch.randn(a.N, a.D, device="cuda", dtype=torch.bfloat16)
    q = torch.randn(a.B, a.D, device="cuda", dtype=torch.bfloat16)
    return x, q


def time_ms(fn, reps=10, warmup=2):
    """Median of `reps` CUDA-event timings after `warmup` calls."""
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]


def copy_gbps(nbytes=4 << 30):
    """Device-to-device copy bandwidth (bytes read + written per second)."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    src.random_(0, 255)
    dst = torch.empty_like(src)
    ms = time_ms(lambda: dst.copy_(src), reps=10)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * nbytes / (ms * 1e6)


def commit():
    """The commit of the library under test: LTK_COMMIT (gpu.sh sets it from the carried binaries'
    stamp) first, since the checkout on the GPU machine need not be the one the binaries came from."""
    if os.environ.get("LTK_COMMIT"):
        return os.environ["LTK_COMMIT"]
    try:
        import subprocess
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    except Exception:
        return "unknown"
