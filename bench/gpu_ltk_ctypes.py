"""ctypes access to the litetopk GPU select and kNN for the torch benchmarks (same process, same tensors).

Loads, in order: $LTK_LIBRARY, build*/liblitetopk.so (the full library: public API), or
build*/libltk_cuda_sk.so (tests/cuda/standalone.sh: the CUDA entry points only, arguments resolved here
as the front end would). Tensors are torch CUDA tensors; workspaces are torch allocations on the
current stream, so nothing here allocates behind torch's back.
"""
import ctypes as C
import glob
import os

import torch

DT = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
METRIC = {"ip": 0, "l2": 1, "cos": 2}
ALGO = {"fused": 0, "materialize": 1, "score_only": 2}
UNSORTED, ABSOLUTE = 1, 2


class Stats(C.Structure):
    _fields_ = [(n, C.c_int64) for n in ("rows", "short_rows", "candidates", "candidates_max", "bin_entries",
                                          "bin_entries_max", "compactions", "fallback_rows")] + [
        ("row_candidates", C.c_void_p), ("row_bin_entries", C.c_void_p)]


class Exec(C.Structure):
    _fields_ = [("backend", C.c_int), ("algo", C.c_int), ("stream", C.c_void_p), ("workspace", C.c_void_p),
                ("workspace_bytes", C.c_size_t), ("num_threads", C.c_int32), ("stats", C.c_void_p)]


class SelectArgs(C.Structure):
    _fields_ = [("rows", C.c_int64), ("cols", C.c_int64), ("k", C.c_int32), ("dtype", C.c_int), ("scores", C.c_void_p),
                ("row_stride", C.c_int64), ("starts", C.c_void_p), ("ends", C.c_void_p), ("out_idx", C.c_void_p),
                ("out_scores", C.c_void_p), ("out_stride", C.c_int64), ("flags", C.c_uint32)]


class KnnArgs(C.Structure):
    _fields_ = [("B", C.c_int64), ("N", C.c_int64), ("D", C.c_int32), ("k", C.c_int32), ("dtype", C.c_int),
                ("metric", C.c_int), ("queries", C.c_void_p), ("q_stride", C.c_int64), ("base", C.c_void_p),
                ("base_stride", C.c_int64), ("out_idx", C.c_void_p), ("out_scores", C.c_void_p),
                ("out_stride", C.c_int64), ("flags", C.c_uint32)]


def knn_args(q, x, k, out_idx, out_scores=None, metric="ip", flags=0):
    """ltk_knn_args of torch tensors: queries q [B, D], corpus x [N, D], outputs [B, k]."""
    B, D = q.shape
    return KnnArgs(B, x.shape[0], D, k, DT[q.dtype], METRIC[metric], q.data_ptr(), q.stride(0), x.data_ptr(),
                   x.stride(0), out_idx.data_ptr(), out_scores.data_ptr() if out_scores is not None else None, k,
                   flags)


def _find():
    env = os.environ.get("LTK_LIBRARY")
    if env and os.path.exists(env):
        return env
    for pat in ("build*/liblitetopk.so", "build*/libltk_cuda_sk.so"):
        hits = sorted(glob.glob(pat), key=os.path.getmtime, reverse=True)
        if hits:
            return hits[0]
    raise FileNotFoundError("no litetopk library (set LTK_LIBRARY or build first)")


class Lib:
    def __init__(self, path=None):
        self.path = path or _find()
        self.lib = C.CDLL(os.path.abspath(self.path))
        self.full = hasattr(self.lib, "ltk_select_topk")
        for fn in ("ltk_select_topk", "ltk_select_workspace_size", "ltk_knn_topk", "ltk_knn_workspace_size",
                   "ltk_cuda_select", "ltk_cuda_select_workspace", "ltk_cuda_knn", "ltk_cuda_knn_workspace"):
            if hasattr(self.lib, fn):
                getattr(self.lib, fn).restype = C.c_int
        self.lib.ltk_last_error.restype = C.c_char_p
        self._ws = {}

    def _exec(self, algo=0, stats=None):
        e = Exec()
        e.backend = 3  # CUDA
        e.algo = algo
        e.stream = C.c_void_p(torch.cuda.current_stream().cuda_stream)
        e.stats = C.cast(C.pointer(stats), C.c_void_p) if stats is not None else None
        return e

    def _workspace(self, tag, nbytes):
        t = self._ws.get(tag)
        if t is None or t.numel() < nbytes:
            t = torch.empty(max(int(nbytes), 1), dtype=torch.uint8, device="cuda")
            self._ws[tag] = t
        return t

    def _call(self, name_pub, name_ws_pub, name_cuda, name_ws_cuda, args, e, tag):
        sz = C.c_size_t(0)
        wsfn = getattr(self.lib, name_ws_pub if self.full else name_ws_cuda)
        st = wsfn(C.byref(args), C.byref(e), C.byref(sz))
        if st:
            raise RuntimeError("%s workspace: %d %s" % (tag, st, self.lib.ltk_last_error()))
        ws = self._workspace(tag, sz.value)
        if self.full:
            e.workspace, e.workspace_bytes = ws.data_ptr(), ws.numel()
            st = getattr(self.lib, name_pub)(C.byref(args), C.byref(e))
        else:
            st = getattr(self.lib, name_cuda)(C.byref(args), C.byref(e), C.c_void_p(ws.data_ptr()), C.c_size_t(ws.numel()))
        if st:
            raise RuntimeError("%s: %d %s" % (tag, st, self.lib.ltk_last_error()))
        return sz.value

    def select(self, scores, k, out_idx, out_scores=None, flags=0, stats=None):
        rows, cols = scores.shape
        a = SelectArgs(rows, cols, k, DT[scores.dtype], scores.data_ptr(), scores.stride(0), None, None,
                       out_idx.data_ptr(), out_scores.data_ptr() if out_scores is not None else None, k, flags)
        return self._call("ltk_select_topk", "ltk_select_workspace_size", "ltk_cuda_select", "ltk_cuda_select_workspace",
                          a, self._exec(0, stats), "select")

    def knn(self, q, x, k, out_idx, out_scores=None, metric="ip", algo="fused", flags=0, stats=None):
        a = knn_args(q, x, k, out_idx, out_scores, metric, flags)
        return self._call("ltk_knn_topk", "ltk_knn_workspace_size", "ltk_cuda_knn", "ltk_cuda_knn_workspace", a,
                          self._exec(ALGO[algo], stats), "knn_" + algo)

    def knn_prepared(self, q, x, k, out_idx, out_scores=None, metric="ip", algo="fused", flags=0):
        """One checked call, then a function that repeats it through the C entry point with the same
        arguments, execution record and workspace (what a C or C++ caller does): timed loops measure
        the library's call, not ~20 us of building ctypes structures in Python (bench/knn_host.py,
        s11-run3: 0.500 ms a call that way against 0.459 bare at B = 64, N = 1M, k = 1024)."""
        a = knn_args(q, x, k, out_idx, out_scores, metric, flags)
        e = self._exec(ALGO[algo])
        self._call("ltk_knn_topk", "ltk_knn_workspace_size", "ltk_cuda_knn", "ltk_cuda_knn_workspace", a, e,
                   "knn_" + algo)
        if not self.full:
            return lambda: self.knn(q, x, k, out_idx, out_scores, metric, algo, flags)
        ws = self._ws["knn_" + algo]  # (held by the closure: a later, larger call of the tag replaces it)
        fn, pa, pe = self.lib.ltk_knn_topk, C.byref(a), C.byref(e)

        def call():
            st = fn(pa, pe)
            if st:
                raise RuntimeError("knn_%s: %d %s (workspace %d bytes)" % (algo, st, self.lib.ltk_last_error(),
                                                                           ws.numel()))
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
