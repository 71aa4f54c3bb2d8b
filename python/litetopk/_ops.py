"""The operations: argument checks in Python, then one call into the C library."""
from __future__ import annotations

import contextlib
import ctypes
import math
import operator
import os

import numpy as np

from . import _fast, _ffi
from ._arrays import (Arr, _devstr, check_out, empty, float_code, require_dtype, same_device, wrap,
                      wrap_index_vector, _torch)

_INDEXER_DTYPES = (_ffi.DTYPE_E4M3, _ffi.DTYPE_BF16, _ffi.DTYPE_F32)
_SCORE_DTYPES = (_ffi.DTYPE_F32, _ffi.DTYPE_F16, _ffi.DTYPE_BF16)
_MAX_K = {"indexer": _ffi.INDEXER_MAX_K, "knn": _ffi.KNN_MAX_K, "select": _ffi.SELECT_MAX_K, "blocks": _ffi.BLOCKS_MAX_K,
          "merge": _ffi.SELECT_MAX_K}


# ---- statistics ------------------------------------------------------------------------------------
class Stats:
    """Counters of one call (``ltk_stats``), filled in place when passed as ``stats=``.

    Parameters
    ----------
    per_row : bool, default False
        Also record ``row_candidates`` and ``row_bin_entries`` (int32 numpy arrays, one entry per
        row of the call). Backends that do not track them leave zeros.

    Notes
    -----
    On the CUDA backend asking for statistics makes the call synchronise with the host (the
    counters are copied back), so do not pass ``stats`` inside a CUDA graph capture.

    Attributes
    ----------
    rows, short_rows, candidates, candidates_max, bin_entries, bin_entries_max, compactions,
    fallback_rows : int
        See ``ltk_stats`` in ``litetopk.h``.
    row_candidates, row_bin_entries : numpy.ndarray of int32 or None
    """

    FIELDS = ("rows", "short_rows", "candidates", "candidates_max", "bin_entries", "bin_entries_max",
              "compactions", "fallback_rows")

    def __init__(self, per_row: bool = False):
        self.per_row = bool(per_row)
        for f in self.FIELDS:
            setattr(self, f, 0)
        self.row_candidates = None
        self.row_bin_entries = None

    def _prepare(self, rows: int):
        c = _ffi.ltk_stats()
        if self.per_row:
            self.row_candidates = np.zeros(rows, np.int32)
            self.row_bin_entries = np.zeros(rows, np.int32)
            c.row_candidates = self.row_candidates.ctypes.data
            c.row_bin_entries = self.row_bin_entries.ctypes.data
        return c

    def _fill(self, c):
        for f in self.FIELDS:
            setattr(self, f, int(getattr(c, f)))

    def as_dict(self):
        d = {f: getattr(self, f) for f in self.FIELDS}
        if self.per_row:
            d["row_candidates"] = self.row_candidates
            d["row_bin_entries"] = self.row_bin_entries
        return d

    def __repr__(self):
        return "Stats(" + ", ".join(f"{f}={getattr(self, f)}" for f in self.FIELDS) + ")"


# ---- execution context ---------------------------------------------------------------------------
def _backend_code(backend) -> int:
    if not isinstance(backend, str) or backend not in _ffi.BACKENDS:
        raise ValueError(f"backend={backend!r}: expected one of {list(_ffi.BACKENDS)}")
    return _ffi.BACKENDS[backend]


def _resolve_backend(backend, device, state=None) -> int:
    """Python's 'auto' follows the data: CUDA tensors -> cuda, host arrays -> cpu (or the host
    backend of the state, or env LTK_BACKEND=ref). The C 'auto' would pick CUDA whenever a GPU is
    present, which would hand host pointers to GPU kernels."""
    b = _backend_code(backend)
    on_cuda = device is not None and device[0] == "cuda"
    if on_cuda:
        if b == _ffi.BACKEND_AUTO:
            return _ffi.BACKEND_CUDA
        if b != _ffi.BACKEND_CUDA:
            raise ValueError(f"backend={backend!r} cannot run on CUDA tensors; use backend='cuda' or 'auto'")
        return b
    if b == _ffi.BACKEND_CUDA:
        raise ValueError("backend='cuda' needs CUDA tensors; these inputs are in host memory")
    if b == _ffi.BACKEND_AUTO:
        if state is not None and state._backend in (_ffi.BACKEND_REF, _ffi.BACKEND_CPU):
            return state._backend
        return _ffi.BACKEND_REF if os.environ.get("LTK_BACKEND") == "ref" else _ffi.BACKEND_CPU
    return b


class _Ctx:
    def __init__(self, device, backend, algo, num_threads, stream, like: Arr, state=None):
        self.device = device if device is not None else ("cpu", None)
        self.is_cuda = self.device[0] == "cuda"
        self.backend = _resolve_backend(backend, self.device, state)
        # the host "auto" that LTK_BACKEND decided (a cached plan re-reads it)
        self.auto_from_env = (not self.is_cuda and backend == "auto"
                              and not (state is not None and state._backend in (_ffi.BACKEND_REF, _ffi.BACKEND_CPU)))
        if not isinstance(algo, str) or algo not in _ffi.ALGOS:
            raise ValueError(f"algo={algo!r}: expected one of {list(_ffi.ALGOS)}")
        self.algo = _ffi.ALGOS[algo]
        self.num_threads = operator.index(num_threads)
        if self.num_threads < 0:
            raise ValueError(f"num_threads={num_threads} < 0")
        self.like = like
        self.stream = 0
        self.tstream = None  # the torch stream our allocations belong to, when not the current one
        if self.is_cuda:
            t = _torch()
            if stream is None:
                # the caller's current stream: work is ordered with the surrounding torch ops (the raw
                # handle where torch offers it: a Stream object costs microseconds a call)
                raw = getattr(t._C, "_cuda_getCurrentRawStream", None)
                self.stream = raw(self.device[1]) if raw else t.cuda.current_stream(self.device[1]).cuda_stream
            else:
                if not hasattr(stream, "cuda_stream"):
                    stream = t.cuda.ExternalStream(operator.index(stream), device=t.device("cuda", self.device[1]))
                self.stream = int(stream.cuda_stream)
                # allocate on the stream that uses the memory, so the caching allocator never hands a
                # block to another stream while our kernel may still touch it
                self.tstream = stream
        elif stream is not None:
            raise ValueError("stream= is only meaningful for CUDA tensors")
        if state is not None:
            state._check_open()
            if self.is_cuda and state._device is not None and state._device.index != self.device[1]:
                raise ValueError(f"state lives on {state._device}, the tensors on cuda:{self.device[1]}")
            if state._backend != self.backend:
                raise ValueError(f"state belongs to backend '{_ffi.BACKEND_NAMES[state._backend]}', "
                                 f"the call runs on '{_ffi.BACKEND_NAMES[self.backend]}'")

    def guard(self):
        # kernels go to the tensors' device; nothing to switch when it is the current one already
        if self.is_cuda and _torch().cuda.current_device() != self.device[1]:
            return _torch().cuda.device(self.device[1])
        return _NULL

    def exec(self):
        e = _ffi.ltk_exec()
        e.backend = self.backend
        e.algo = self.algo
        e.stream = self.stream or None
        e.num_threads = self.num_threads
        return e

    def on_stream(self):
        if self.tstream is not None:
            return _torch().cuda.stream(self.tstream)
        return contextlib.nullcontext()

    def alloc(self, shape, dname):
        with self.on_stream():
            return empty(self.like, shape, dname, self.device)


_NULL = contextlib.nullcontext()


def _workspace_bytes(ctx, ws_fn, args):
    n = ctypes.c_size_t(0)
    e = ctx.exec()
    with ctx.guard():
        _ffi.check(ws_fn(ctypes.byref(args), ctypes.byref(e), ctypes.byref(n)), "workspace size query")
    return int(n.value)


def _run(name, ctx, run_fn, ws_fn, args, rows, workspace, stats):
    with ctx.guard():
        _run_here(name, ctx, run_fn, ws_fn, args, rows, workspace, stats)


def _run_here(name, ctx, run_fn, ws_fn, args, rows, workspace, stats):
    """_run on the tensors' device."""
    e = ctx.exec()
    if workspace is not None:
        w = wrap(workspace, "workspace")
        if w.device != ctx.device:
            raise ValueError(f"workspace is on {_devstr(w.device)}, inputs on {_devstr(ctx.device)}")
        contig = w.obj.is_contiguous() if w.is_torch else w.obj.flags.c_contiguous
        if not contig:
            raise ValueError("workspace must be contiguous")
        e.workspace = w.ptr or None
        e.workspace_bytes = math.prod(w.shape) * w.itemsize if w.ptr else 0
    # Without a workspace the C library takes one from its stream-ordered pool on the call's stream
    # (no synchronisation; LTK_CUDA_POOL_KEEP_MB bounds what it keeps). Why not torch's allocator: the
    # size query and a torch.empty were ~20 us of the call's host time on the H200's host
    # (bench/host_cost.py --trace); the pool adds ~1 us in C (`litetopk bench` host_alloc_us).
    c_stats = None
    if stats is not None:
        if not isinstance(stats, Stats):
            raise TypeError("stats must be a litetopk.Stats instance")
        c_stats = stats._prepare(rows)
        e.stats = ctypes.pointer(c_stats)
    status = run_fn(ctypes.byref(args), ctypes.byref(e))
    _ffi.check(status, name)
    if stats is not None:
        stats._fill(c_stats)


def _check_k(k, what):
    if isinstance(k, bool):
        raise TypeError(f"{what}: k must be an int, got bool")
    try:
        k = operator.index(k)
    except TypeError:
        raise TypeError(f"{what}: k must be an int, got {type(k).__name__}") from None
    if k < 1 or k > _MAX_K[what]:
        raise ValueError(f"{what}: k={k} out of [1, {_MAX_K[what]}]")
    return k


def _flags(sorted_, relative=True):
    return (0 if sorted_ else _ffi.FLAG_UNSORTED) | (0 if relative else _ffi.FLAG_ABSOLUTE)


def _check_ranges_host(lo: Arr, hi: Arr, length: int, what: str):
    a, b = lo.host_numpy(), hi.host_numpy()
    bad = (a < 0) | (b < a) | (b > length)
    if bad.any():
        r = int(np.argmax(bad))
        raise ValueError(f"{what} row {r}: range [{int(a[r])}, {int(b[r])}) is not within [0, {length}]")


def _wrap_ranges(lo, hi, names, rows, length, on_host, like: Arr):
    """Per-row [lo, hi) index vectors: both or neither, on the data's device, checked on the host."""
    loa = wrap_index_vector(lo, names[0], rows, on_host)
    hia = wrap_index_vector(hi, names[1], rows, on_host)
    if (loa is None) != (hia is None):
        raise ValueError(f"{names[0]} and {names[1]} must both be given or both be None")
    same_device([like, loa, hia])
    if on_host and loa is not None:
        _check_ranges_host(loa, hia, length, f"{names[0]}/{names[1]}")
    return loa, hia


def _inner_contig(a: Arr, dims):
    for d in dims:
        if a.stride(d) not in (0, 1):
            raise ValueError(f"{a.name}: dimension {d} must be contiguous (stride {a.strides[d]}); "
                             "pass a tensor whose last dimension has stride 1 (no copy is made here)")


def _outputs2(out, names, shapes, dnames, ctx, rows, k):
    """Validated (or freshly allocated) pair of outputs sharing one row stride; None entries skip."""
    res = []
    strides = set()
    for o, name, shape, dn in zip(out, names, shapes, dnames):
        if shape is None:
            res.append(None)
            continue
        if o is None:
            o = ctx.alloc(shape, dn)
        a = check_out(o, name, shape, dn, ctx.device)
        if rows > 1:
            strides.add(a.strides[0])
        res.append(a)
    if len(strides) > 1:
        raise ValueError(f"{' and '.join(names)} must have the same row stride, got {sorted(strides)}")
    return res


def _index_outputs(out, return_scores, ctx, rows, topk):
    """The (indices, scores) outputs of the indexer-family calls, validated or allocated: out= may be
    None, an indices array, or (indices, scores); passing scores asks for them."""
    if out is None:
        out = (None, None)
    elif isinstance(out, (tuple, list)):
        if len(out) != 2:
            raise ValueError("out: expected (indices, scores)")
        return_scores = return_scores or out[1] is not None
    else:
        out = (out, None)
    shapes = ((rows, topk), (rows, topk) if return_scores else None)
    return _outputs2(out, ("out indices", "out scores"), shapes, ("int32", "float32"), ctx, rows, topk)


def _out_pair(out):
    """out= of the indexer family as the (indices, scores) pair the cache key holds, or None when it
    is neither None, an array nor a pair (the full path says why)."""
    if out is None:
        return None, None
    if type(out) is tuple or type(out) is list:
        return (out[0], out[1]) if len(out) == 2 else None
    return out, None


def _lookup(kind, sk, arrs, state=None, tag=(), call=None):
    """(key, result): the cache key of this call's layout (None when the arrays have none: the full
    path handles them) and what its cached plan returns, or MISS. call(plan, arrs, ptrs) replaces the
    plan's own call (prefill)."""
    s = _fast.scan(arrs)
    if s is None:
        return None, _fast.MISS
    key = (kind, sk, *tag, *s[0])
    plan = _fast.find(kind, key)
    if plan is None:
        return key, _fast.MISS
    return key, (call(plan, arrs, s[1]) if call else plan.call(arrs, s[1], state))


def _row_stride(*arrs):
    for a in arrs:
        if a is not None:
            return a.stride(0)
    return 0


def _set_inputs(a, qa, kva, sa, wa):
    """The q, kv, kv_scale and weights fields the indexer and prefill argument structs share."""
    a.q, a.q_stride_t = qa.ptr or None, qa.stride(0)
    a.kv, a.kv_stride_s = kva.ptr or None, kva.stride(0)
    a.kv_scale = sa.ptr if sa is not None and sa.ptr else None
    a.weights, a.w_stride_t = wa.ptr or None, wa.stride(0)


# ---- indexer ---------------------------------------------------------------------------------------
def _indexer_prepare(q, kv, kv_scale, weights, ks, ke, topk, relative, sorted_, return_scores, state, out,
                     backend, algo, dtype, num_threads, stream):
    qa = wrap(q, "q", ndim=3)
    kva = wrap(kv, "kv", ndim=2)
    wa = wrap(weights, "weights", ndim=2)
    sa = wrap(kv_scale, "kv_scale", ndim=(1, 2), optional=True)
    topk = _check_k(topk, "indexer")
    T, H, D = qa.shape
    S = kva.shape[0]
    qcode = float_code(qa, dtype, _INDEXER_DTYPES, "the indexer")
    kcode = float_code(kva, dtype if dtype is not None else _raw_hint(kva, qcode), _INDEXER_DTYPES, "the indexer")
    if kcode != qcode:
        raise TypeError(f"q ({qa.dname}) and kv ({kva.dname}) must have the same element type")
    require_dtype(wa, "float32")
    if kva.shape[1] != D:
        raise ValueError(f"kv: expected shape ({S}, {D}) to match q's D={D}, got {kva.shape}")
    if wa.shape != (T, H):
        raise ValueError(f"weights: expected shape ({T}, {H}), got {wa.shape}")
    if sa is not None:
        if sa.dname == "uint8" and sa.shape == (S, 4) and sa.stride(1) in (0, 1) and sa.stride(0) in (0, 4):
            pass  # vLLM keeps the fp32 scales as uint8 [S, 4]: same bytes, read as fp32
        else:
            require_dtype(sa, "float32")
            if sa.shape not in ((S,), (S, 1)):
                raise ValueError(f"kv_scale: expected shape ({S},), got {sa.shape}")
            if sa.stride(0) not in (0, 1):
                raise ValueError(f"kv_scale: must be contiguous (stride {sa.strides[0]})")
    _inner_contig(qa, (2,))
    if qa.stride(1) not in (0, D):
        raise ValueError(f"q: heads must be packed (stride(1) == D={D}, got {qa.strides[1]})")
    _inner_contig(kva, (1,))
    _inner_contig(wa, (1,))
    if T > 1 and qa.strides[0] < H * D:
        raise ValueError(f"q: stride(0)={qa.strides[0]} < H*D={H * D}")
    if S > 1 and kva.strides[0] < D:
        raise ValueError(f"kv: stride(0)={kva.strides[0]} < D={D}")
    if T > 1 and wa.strides[0] < H:
        raise ValueError(f"weights: stride(0)={wa.strides[0]} < H={H}")
    device = same_device([qa, kva, wa, sa])
    on_host = device[0] == "cpu"
    ksa, kea = _wrap_ranges(ks, ke, ("ks", "ke"), T, S, on_host, qa)
    if state is not None and not isinstance(state, IndexerState):
        raise TypeError("state must be a litetopk.IndexerState")
    ctx = _Ctx(device, backend, algo, num_threads, stream, qa, state)

    ia, sca = _index_outputs(out, return_scores, ctx, T, topk)

    a = _ffi.ltk_indexer_args()
    a.T, a.S, a.H, a.D, a.k = T, S, H, D, topk
    a.dtype = qcode
    _set_inputs(a, qa, kva, sa, wa)
    a.ks = ksa.ptr if ksa is not None else None
    a.ke = kea.ptr if kea is not None else None
    a.out_idx = ia.ptr or None
    a.out_scores = sca.ptr if sca is not None else None
    a.out_stride = _row_stride(ia, sca)
    a.flags = _flags(sorted_, relative)
    a.state = state._handle.value if state is not None else None
    keep = (ksa, kea)  # numpy conversions of Python lists must outlive the call
    return a, ctx, ia, sca, keep


def _raw_hint(kva: Arr, qcode: int):
    # kv given as raw storage while q carries a real dtype: read it with q's element type
    return qcode if kva.dname in ("uint8", "uint16", "int8", "int16") else None


def indexer_topk(q, kv, kv_scale, weights, ks, ke, topk, *, relative=True, sorted=False, return_scores=False,
                 state=None, out=None, backend="auto", algo="fused", workspace=None, stats=None, dtype=None,
                 num_threads=0, stream=None):
    """Exact top-k of the DSA/CSA lightning-indexer scores, fused (the score matrix is never written).

    For query row ``t`` and key ``s`` in ``[ks[t], ke[t])``::

        I[t, s] = kv_scale[s] * sum_h weights[t, h] * max(0, q[t, h, :] . kv[s, :])

    Parameters
    ----------
    q : array [T, H, D]
        float8_e4m3fn, bfloat16 or float32 (numpy via ml_dtypes, or raw uint8 with ``dtype="e4m3"``;
        torch on CPU or CUDA). No q scale: fold it into ``weights``. ``q[:, h, :]`` must be packed
        (``stride(2) == 1``, ``stride(1) == D``); ``stride(0)`` may be larger than ``H*D``.
    kv : array [S, D]
        Same element type as ``q``, ``stride(1) == 1``.
    kv_scale : float32 array [S] (or [S, 1]), or None
        Per-key scale applied after the ReLU and the head sum; None means 1.
    weights : float32 array [T, H]
        Per (row, head) weights with the q scale and softmax factors folded in; any sign.
    ks, ke : int32 array [T], or None
        Half-open visible key range of each row, ``0 <= ks <= ke <= S`` (checked for host arrays;
        on CUDA it is the caller's contract, checking would synchronise). None means ``[0, S)``.
    topk : int
        1 <= topk <= 8192.
    relative : bool, default True
        Indices relative to ``ks[t]`` (vLLM ``top_k_per_row_prefill`` convention); False gives
        absolute key indices ``s``.
    sorted : bool, default False
        Sort each row by score (desc, ties by lower index). Unsorted rows hold the same set in an
        unspecified order; a row with ``ke - ks <= topk`` is then ``0..len-1, -1, ...`` (unscored
        unless ``return_scores``).
    return_scores : bool, default False
        Also return the float32 scores ``[T, topk]`` (padding ``-inf``).
    state : IndexerState, optional
        Cross-chunk hot set of the request: seeds the sample, updated with this call's top-k.
        Exactness never depends on it.
    out : array [T, topk] int32, or (indices, scores), optional
        Outputs to write (same device; last dim contiguous; both with the same row stride).
    backend : {"auto", "cpu", "ref", "cuda"}
        "auto" follows the data: CUDA tensors run on "cuda", host arrays on "cpu".
    algo : {"fused", "materialize", "score_only"}
        "materialize" is the same scoring code writing every score, then an exact select (baseline;
        identical results); "score_only" is for benchmarks (outputs unspecified).
    workspace : contiguous array/tensor on the data's device, optional
        At least :func:`workspace_size` bytes; with it the call allocates nothing (CUDA-graph safe).
        Without it, CUDA calls take one from the library's stream-ordered pool on the call's stream
        (no synchronisation; memory torch's allocator does not count, ``LTK_CUDA_POOL_KEEP_MB``).
    stats : Stats, optional
        Filled with the call's counters (synchronises on CUDA).
    dtype : str, optional
        Element type for raw storage: "e4m3", "bf16", "f32".
    num_threads : int, default 0
        CPU backend threads (0 = all cores).
    stream : torch.cuda.Stream or int, optional
        CUDA stream; default ``torch.cuda.current_stream()`` of the tensors' device.

    Returns
    -------
    indices : int32 array [T, topk]
        Same framework and device as ``q``. ``-1`` pads rows with fewer than ``topk`` visible keys.
    scores : float32 array [T, topk]
        Only with ``return_scores=True``; ``-inf`` padding.

    Notes
    -----
    Order: score descending; equal scores by the lower index; ``-0.0 == +0.0``; ``-inf`` below every
    finite score; NaN below everything (returned only when a row has fewer than ``topk`` non-NaN
    keys). The set is unique, hence deterministic. Backends differ only in score rounding (CPU:
    fp32 accumulation; CUDA: FP8/bf16 tensor cores), never in selection.
    """
    key = None
    if stats is None and stream is None and (state is None or type(state) is IndexerState):
        sk = _fast.scalars_key((topk, relative, sorted, return_scores, backend, algo, dtype, num_threads))
        o = _out_pair(out)
        if sk is not None and o is not None:
            arrs = (q, kv, kv_scale, weights, ks, ke, o[0], o[1], workspace)
            # the state's backend and device decide the checks; its handle is read every call
            tag = (None if state is None else (state._backend, state._device),)
            key, r = _lookup("indexer", sk, arrs, state, tag)
            if r is not _fast.MISS:
                return r
    a, ctx, ia, sca, keep = _indexer_prepare(q, kv, kv_scale, weights, ks, ke, topk, relative, sorted,
                                             return_scores, state, out, backend, algo, dtype, num_threads, stream)
    L = _ffi.lib()
    _run("indexer_topk", ctx, L.ltk_indexer_topk, L.ltk_indexer_workspace_size, a, a.T, workspace, stats)
    del keep
    if key is not None:
        allocs = [(6, (a.T, a.k), "int32")] if arrs[6] is None else []
        if sca is not None and arrs[7] is None:
            allocs.append((7, (a.T, a.k), "float32"))
        ranges = ((4, 5, a.S),) if ks is not None and not ctx.is_cuda else ()
        _fast.remember(key, lambda: _fast.Plan(
            "indexer_topk", L.ltk_indexer_topk, a, ctx, arrs,
            ("q", "kv", "kv_scale", "weights", "ks", "ke", "out_idx", "out_scores", None), allocs,
            (6, 7) if sca is not None else (6,), ws_slot=8, ranges=ranges,
            state_field="state" if state is not None else None))
    if sca is not None:
        return ia.obj, sca.obj
    return ia.obj


# ---- DeepSeek-V4.1's candidate indexer -------------------------------------------------------------
def _block_list(blocks, rows, ctx):
    ba = wrap(blocks, "blocks", ndim=2)
    require_dtype(ba, "int32")
    if ba.shape[0] != rows:
        raise ValueError(f"blocks: expected {rows} rows, got {ba.shape}")
    if not 1 <= ba.shape[1] <= _ffi.BLOCKS_MAX_K:
        raise ValueError(f"blocks: 1..{_ffi.BLOCKS_MAX_K} ids a row, got {ba.shape[1]}")
    _inner_contig(ba, (1,))
    if ba.device != ctx.device:
        raise ValueError(f"blocks is on {_devstr(ba.device)}, the inputs on {_devstr(ctx.device)}")
    return ba


def blocks_topk(q, kv, kv_scale, weights, ks, ke, n_blocks, *, block_size=8, pin_newest=True, by_index=True,
                topk=0, relative=True, sorted=True, return_scores=False, out=None, backend="auto", algo="fused",
                workspace=None, stats=None, dtype=None, num_threads=0, stream=None):
    """DeepSeek-V4.1's block publication (the source layer): for each query row, the exact top
    ``n_blocks`` blocks of ``block_size`` consecutive keys, ranked by the block's largest indexer
    score inside the row's range ``[ks, ke)`` (ties by the lower block id, NaN last).

    Inputs as :func:`indexer_topk`. ``pin_newest``: the block holding key ``ke - 1`` (full or
    partial) ranks first with score +inf (SGLang and vLLM force it). ``by_index``: ids ascending (SGLang's
    block table), else by rank. A row with at most ``n_blocks`` blocks returns them all, ascending.
    ``topk > 0`` also returns the row's ordinary top-k from the same scores (``relative``,
    ``sorted`` as in :func:`indexer_topk`).

    Returns ``blocks`` (int32 ``[T, n_blocks]``, absolute block ids ``s // block_size``, -1
    padding), then ``block_scores`` with ``return_scores``, then ``indices`` (and ``scores``) of
    the ordinary top-k when ``topk > 0``. ``out``: the blocks' output array (int32 ``[T,
    n_blocks]``, rows may be strided), written in place and returned. Backends: ref, cpu and cuda.
    """
    a, ctx, ia, sca, keep = _indexer_prepare(q, kv, kv_scale, weights, ks, ke, topk if topk > 0 else 1, relative,
                                             sorted, return_scores and topk > 0, None, None, backend, algo, dtype,
                                             num_threads, stream)
    T = a.T
    nb = _check_k(n_blocks, "blocks")
    bo, bs = _outputs2((out, None), ("out blocks", "out block scores"),
                       ((T, nb), (T, nb) if return_scores else None), ("int32", "float32"), ctx, T, nb)
    b = _ffi.ltk_blocks_args()
    b.ix = a
    if topk <= 0:
        b.ix.k, b.ix.out_idx, b.ix.out_scores, b.ix.out_stride = 0, None, None, 0
    b.ix.flags = (_flags(sorted, relative) | (_ffi.FLAG_PIN_NEWEST if pin_newest else 0)
                  | (_ffi.FLAG_BY_INDEX if by_index else 0))
    b.block_size, b.block_k = int(block_size), nb
    b.out_blocks = bo.ptr or None
    b.out_block_scores = bs.ptr if bs is not None else None
    b.blocks_stride = _row_stride(bo, bs)
    _run("blocks_topk", ctx, _ffi.entry("ltk_blocks_topk"), _ffi.entry("ltk_blocks_workspace_size"), b, T,
         workspace, stats)
    del keep
    res = [bo.obj] + ([bs.obj] if bs is not None else [])
    if topk > 0:
        res += [ia.obj] + ([sca.obj] if sca is not None else [])
    return res[0] if len(res) == 1 else tuple(res)


def candidates_topk(q, kv, kv_scale, weights, ks, ke, blocks, topk, *, block_size=8, relative=True, sorted=False,
                    by_index=False, return_scores=False, out=None, backend="auto", algo="fused", workspace=None,
                    stats=None, dtype=None, num_threads=0, stream=None):
    """DeepSeek-V4.1's consumer layers: the exact top-k among the keys of each row's listed blocks.

    Inputs as :func:`indexer_topk`, plus ``blocks`` (int32 ``[T, n]``, block ids of ``block_size``
    keys, any order; repeats count once; -1 and ids outside the keys list nothing). Only a listed
    block's keys inside ``[ks, ke)`` are candidates. Returns what :func:`indexer_topk` returns
    (``by_index``: ascending keys). Backends: ref, cpu and cuda.
    """
    a, ctx, ia, sca, keep = _indexer_prepare(q, kv, kv_scale, weights, ks, ke, topk, relative, sorted,
                                             return_scores, None, out, backend, algo, dtype, num_threads, stream)
    ba = _block_list(blocks, a.T, ctx)
    c = _ffi.ltk_candidates_args()
    c.ix = a
    c.ix.flags |= _ffi.FLAG_BY_INDEX if by_index else 0
    c.block_size, c.n_blocks = int(block_size), ba.shape[1]
    c.blocks, c.blocks_stride = ba.ptr or None, ba.stride(0)
    _run("candidates_topk", ctx, _ffi.entry("ltk_candidates_topk"), _ffi.entry("ltk_candidates_workspace_size"), c,
         a.T, workspace, stats)
    del keep
    if sca is not None:
        return ia.obj, sca.obj
    return ia.obj



def decode_blocks_topk(q, kv_cache, weights, lens, block_table, n_blocks, *, block_size=8, pin_newest=True,
                       by_index=True, topk=0, physical=False, sorted=True, return_scores=False, out=None,
                       block_kv=None, max_len=0, backend="auto", algo="fused", stats=None, dtype=None, num_threads=0):
    """The block publication of :func:`blocks_topk` over :func:`decode_topk`'s paged FP8 cache
    (``ltk_decode_blocks_topk``): row ``t`` sees positions ``[0, len(t))`` of its request, block
    ``j`` is positions ``[j * block_size, (j + 1) * block_size)``. Inputs as :func:`decode_topk`;
    ``pin_newest``, ``by_index``, ``topk`` as :func:`blocks_topk` (the ordinary top-k as
    :func:`decode_topk` returns it, ``physical`` slots included). Returns ``blocks`` (int32
    ``[B * next_n, n_blocks]``, logical block ids, -1 padding), then ``block_scores`` with
    ``return_scores``, then ``indices`` (and ``scores``) when ``topk > 0``; ``out`` as
    :func:`blocks_topk`'s. Backends: ref, cpu and cuda (q e4m3)."""
    a, ctx, ia, sca = _decode_prepare(q, kv_cache, weights, lens, block_table, topk if topk > 0 else 1, block_kv,
                                      max_len, physical, sorted, return_scores and topk > 0, None, backend, algo, dtype,
                                      num_threads, None)
    rows = a.B * a.next_n
    nb = _check_k(n_blocks, "blocks")
    bo, bs = _outputs2((out, None), ("out blocks", "out block scores"),
                       ((rows, nb), (rows, nb) if return_scores else None), ("int32", "float32"), ctx, rows, nb)
    d = _ffi.ltk_decode_blocks_args()
    d.dx = a
    if topk <= 0:
        d.dx.k, d.dx.out_idx, d.dx.out_scores, d.dx.out_stride = 0, None, None, 0
    d.dx.flags |= (_ffi.FLAG_PIN_NEWEST if pin_newest else 0) | (_ffi.FLAG_BY_INDEX if by_index else 0)
    d.block_size, d.block_k = int(block_size), nb
    d.out_blocks = bo.ptr or None
    d.out_block_scores = bs.ptr if bs is not None else None
    d.blocks_stride = _row_stride(bo, bs)
    _run("decode_blocks_topk", ctx, _ffi.entry("ltk_decode_blocks_topk"), None, d, rows, None, stats)
    res = [bo.obj] + ([bs.obj] if bs is not None else [])
    if topk > 0:
        res += [ia.obj] + ([sca.obj] if sca is not None else [])
    return res[0] if len(res) == 1 else tuple(res)


def decode_candidates_topk(q, kv_cache, weights, lens, block_table, blocks, topk, *, block_size=8, physical=False,
                           sorted=False, by_index=False, return_scores=False, out=None, block_kv=None, max_len=0,
                           backend="auto", algo="fused", stats=None, dtype=None, num_threads=0):
    """The consumer of :func:`candidates_topk` over :func:`decode_topk`'s paged FP8 cache
    (``ltk_decode_candidates_topk``): ``blocks`` (int32 ``[B * next_n, n]``, logical block ids of
    ``block_size`` positions, any order, repeats once, -1 padding) lists each row's candidates; the
    exact top ``topk`` of them returned as :func:`decode_topk` returns (positions, or ``physical``
    slots; ``by_index``: ascending positions). Backends: ref, cpu and cuda (q e4m3; there
    ``block_size`` must divide ``block_kv`` into a power of two)."""
    a, ctx, ia, sca = _decode_prepare(q, kv_cache, weights, lens, block_table, topk, block_kv, max_len, physical,
                                      sorted, return_scores, out, backend, algo, dtype, num_threads, None)
    rows = a.B * a.next_n
    ba = _block_list(blocks, rows, ctx)
    d = _ffi.ltk_decode_candidates_args()
    d.dx = a
    if by_index:
        d.dx.flags |= _ffi.FLAG_BY_INDEX
    d.block_size, d.n_blocks = int(block_size), ba.shape[1]
    d.blocks, d.blocks_stride = ba.ptr or None, ba.stride(0)
    _run("decode_candidates_topk", ctx, _ffi.entry("ltk_decode_candidates_topk"), None, d, rows, None, stats)
    if sca is not None:
        return ia.obj, sca.obj
    return ia.obj

def _split_q(q):
    if isinstance(q, (tuple, list)):
        if len(q) != 2:
            raise ValueError("q: expected a tensor or a (q, q_scale) pair")
        q, sf = q
        if sf is not None:
            raise _ffi.UnsupportedError(_ffi.LTK_EUNSUPPORTED,
                                        "fp8_mqa_topk: a q scale (the FP4 q path) is not supported; "
                                        "pass (q_fp8, None) with the q scale folded into weights")
    return q


def _split_kv(kv):
    if isinstance(kv, (tuple, list)):
        if len(kv) != 2:
            raise ValueError("kv: expected a (k, k_scale) pair")
        return kv[0], kv[1]
    return kv, None


def fp8_mqa_topk(q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, topk, *, clean_logits=False,
                 max_seqlen_k=0, logits_dtype=None, relative=True, sorted=False, return_scores=False, state=None,
                 out=None, backend="auto", algo="fused", workspace=None, stats=None, dtype=None, num_threads=0,
                 stream=None):
    """DeepGEMM ``fp8_fp4_mqa_logits`` + vLLM ``top_k_per_row_prefill`` in one exact call.

    Takes the arguments the way vLLM passes them to DeepGEMM::

        logits = fp8_fp4_mqa_logits((q, None), (k, k_scale), weights, ks, ke, clean_logits=False)
        top_k_per_row_prefill(logits, ks, ke, topk_indices, T, logits.stride(0), logits.stride(1), topk)

    becomes::

        topk_indices = litetopk.fp8_mqa_topk((q, None), (k, k_scale), weights, ks, ke, topk)

    Parameters
    ----------
    q : tensor [T, H, D] float8_e4m3fn, or the pair ``(q, None)``
        A non-None second element (FP4 q scales) raises :class:`UnsupportedError`.
    kv : pair ``(k, k_scale)``, or a tensor ``k``
        ``k`` float8_e4m3fn [S, D]; ``k_scale`` float32 [S] or [S, 1] (or the raw uint8 [S, 4]).
    weights : float32 [T, H]
        Head weights with ``q_scale * D**-0.5 * H**-0.5`` folded in (as vLLM prepares them).
    cu_seq_len_k_start, cu_seq_len_k_end : int32 [T]
        ``ks``, ``ke``: half-open key range per row.
    topk : int
        Keys per row (2048 for DeepSeek-V3.2 / GLM-5, 512 or 1024 for V4).
    clean_logits, max_seqlen_k, logits_dtype
        Accepted for signature compatibility and ignored: no logits are materialised.
    dtype : None or "e4m3"
        The element type of raw ``uint8`` storage of ``q`` and ``k`` (numpy has no float8 dtype;
        an ``ml_dtypes.float8_e4m3fn`` array or a torch ``float8_e4m3fn`` tensor needs none).
    relative, sorted, return_scores, state, out, backend, algo, workspace, stats, num_threads, stream
        As in :func:`indexer_topk`. ``out`` may be vLLM's ``topk_indices_buffer[:T]``; it needs no
        ``-1`` pre-fill, every slot is written.

    Returns
    -------
    indices : int32 tensor [T, topk]
        What ``top_k_per_row_prefill`` writes: indices relative to ``ks``, unsorted by default,
        ``-1`` padding, ``0..len-1`` for rows with ``ke - ks <= topk``. Unlike it, the set is exact and
        ties resolve to the lower index.
    """
    q = _split_q(q)
    k, k_scale = _split_kv(kv)
    return indexer_topk(q, k, k_scale, weights, cu_seq_len_k_start, cu_seq_len_k_end, topk, relative=relative,
                        sorted=sorted, return_scores=return_scores, state=state, out=out, backend=backend, algo=algo,
                        workspace=workspace, stats=stats, dtype=dtype, num_threads=num_threads, stream=stream)


# ---- decode ------------------------------------------------------------------------------------------
def _decode_prepare(q, kv_cache, weights, lens, block_table, topk, block_kv, max_len, physical, sorted_,
                    return_scores, out, backend, algo, dtype, num_threads, stream):
    qa = wrap(q, "q", ndim=4)
    ca = wrap(kv_cache, "kv_cache", ndim=(2, 4))
    wa = wrap(weights, "weights", ndim=2)
    la = wrap(lens, "lens", ndim=(1, 2))
    ta = wrap(block_table, "block_table", ndim=2)
    topk = _check_k(topk, "indexer")
    B, next_n, H, D = qa.shape
    rows = B * next_n
    code = float_code(qa, dtype, _INDEXER_DTYPES, "decode")
    require_dtype(wa, "float32")
    require_dtype(ta, "int32")
    require_dtype(la, "int32")
    if ca.dname not in ("uint8", "int8") and ca.itemsize != 1:
        raise TypeError(f"kv_cache: expected uint8 bytes (or float8_e4m3fn viewed as uint8), got {ca.dname}")
    if ca.ndim == 4:  # vLLM's view [num_blocks, block_kv, 1, D + 4]
        nb, bk, one, width = ca.shape
        if one != 1 or width != D + 4:
            raise ValueError(f"kv_cache: expected shape (num_blocks, block_kv, 1, {D + 4}), got {ca.shape}")
        if block_kv is not None and block_kv != bk:
            raise ValueError(f"block_kv={block_kv} but kv_cache holds blocks of {bk}")
        block_kv = bk
        if ca.stride(3) not in (0, 1) or (nb > 1 and ca.strides[0] < bk * (D + 4)):
            raise ValueError("kv_cache: each block's bytes must be contiguous")
    else:  # [num_blocks, block bytes]
        nb = ca.shape[0]
        if block_kv is None:
            block_kv = ca.shape[1] // (D + 4)
        _inner_contig(ca, (1,))
        if ca.shape[1] < block_kv * (D + 4):
            raise ValueError(f"kv_cache: rows of {ca.shape[1]} bytes hold no block of {block_kv} x ({D} + 4)")
    if wa.shape != (rows, H):
        raise ValueError(f"weights: expected shape ({rows}, {H}) = (B * next_n, H), got {wa.shape}")
    if la.shape not in ((B,), (B, next_n)):
        raise ValueError(f"lens: expected ({B},) (seq_lens) or ({B}, {next_n}) (a length per row), got {la.shape}")
    if la.ndim == 2 and (la.stride(1) not in (0, 1) or (B > 1 and la.strides[0] != next_n)):
        raise ValueError("lens: must be contiguous")
    if la.ndim == 1 and la.stride(0) not in (0, 1):
        raise ValueError("lens: must be contiguous")
    if ta.shape[0] != B:
        raise ValueError(f"block_table: expected {B} rows, got {ta.shape}")
    _inner_contig(ta, (1,))
    _inner_contig(qa, (3,))
    if qa.stride(2) not in (0, D) or (next_n > 1 and qa.strides[1] != qa.strides[2] * H and H > 1):
        raise ValueError("q: the heads of a row must be packed ([B, next_n, H, D] with stride(2) == D)")
    if B > 1 and qa.strides[0] != next_n * qa.strides[1]:
        raise ValueError("q: rows of different requests must be evenly strided (stride(0) == next_n * stride(1))")
    _inner_contig(wa, (1,))
    device = same_device([qa, ca, wa, la, ta])
    ctx = _Ctx(device, backend, algo, num_threads, stream, qa)
    ia, sca = _index_outputs(out, return_scores, ctx, rows, topk)
    a = _ffi.ltk_decode_args()
    a.B, a.next_n, a.H, a.D, a.k = B, next_n, H, D, topk
    a.dtype = code
    a.q, a.q_stride = qa.ptr or None, qa.stride(1) if next_n > 1 else (qa.stride(0) if B > 1 else H * D)
    a.kv_cache, a.num_blocks, a.block_kv = ca.ptr or None, nb, block_kv
    a.block_stride = ca.strides[0] if nb > 1 else 0
    a.block_table, a.bt_stride, a.max_blocks = ta.ptr or None, ta.stride(0) if B > 1 else ta.shape[1], ta.shape[1]
    if la.ndim == 2:
        a.lens = la.ptr or None
    else:
        a.seq_lens = la.ptr or None
    cap = ta.shape[1] * block_kv
    a.max_len = min(int(max_len), cap) if max_len else 0
    a.weights, a.w_stride = wa.ptr or None, wa.stride(0)
    a.out_idx = ia.ptr or None
    a.out_scores = sca.ptr if sca is not None else None
    a.out_stride = _row_stride(ia, sca)
    a.flags = (0 if sorted_ else _ffi.FLAG_UNSORTED) | (_ffi.FLAG_PHYSICAL if physical else 0)
    return a, ctx, ia, sca


def decode_topk(q, kv_cache, weights, lens, block_table, topk, *, block_kv=None, max_len=0, physical=False,
                sorted=False, return_scores=False, out=None, backend="auto", algo="fused", workspace=None, stats=None,
                dtype=None, num_threads=0, stream=None):
    """Decode-stage indexer top-k over a paged FP8 cache (``ltk_decode_topk``), no logits written.

    Row ``t = b * next_n + r`` scores positions ``i < len(t)`` of request ``b``::

        I[t, i] = scale(b, i) * sum_h weights[t, h] * max(0, q[b, r, h, :] . key(b, i))

    Parameters
    ----------
    q : array [B, next_n, H, D]
        float8_e4m3fn (also bfloat16/float32 on the CPU backend; raw uint8 with ``dtype="e4m3"``).
    kv_cache : uint8 array [num_blocks, block_kv, 1, D + 4] (vLLM's view) or [num_blocks, bytes]
        Each block: ``block_kv * D`` e4m3 key bytes, then ``block_kv`` fp32 scales.
    weights : float32 [B * next_n, H]
    lens : int32 [B, next_n] (a length per row) or [B] (``seq_lens``: row r sees
        ``seq_len - next_n + r + 1`` positions, vLLM's convention)
    block_table : int32 [B, max_blocks]
    topk : int
    block_kv : int, optional
        Needed only with the 2-D cache view.
    max_len : int, default 0
        Capacity: every length <= max_len (0: ``max_blocks * block_kv``). The workspace depends on it,
        never on the lengths, so a captured CUDA graph replays for any lengths below it.
    physical : bool, default False
        Return physical cache slots ``block_table[b, i // block_kv] * block_kv + i % block_kv``
        (SGLang, FlashMLA) instead of logical positions (vLLM).
    sorted, return_scores, out, backend, algo, workspace, stats, dtype, num_threads, stream
        As in :func:`indexer_topk`.

    Returns
    -------
    indices : int32 [B * next_n, topk], ``-1`` padded; a row with ``len <= topk`` is ``0..len-1`` when
        unsorted without scores (``top_k_per_row_decode``'s rule). With ``return_scores``, also the
        float32 scores.

    Notes
    -----
    The CPU and ref backends check every length and table entry (``InvalidArgumentError``). The CUDA
    backend cannot read them without a synchronisation: it clamps each length to ``max_len`` and
    treats a table entry outside ``[0, num_blocks)`` as an unmapped block (nothing read from it; its
    positions score NaN, ranked last; their physical slots are -1). q must be e4m3 there.
    """
    key = None
    if stats is None and stream is None:
        sk = _fast.scalars_key((topk, block_kv, max_len, physical, sorted, return_scores, backend, algo, dtype,
                                num_threads))
        o = _out_pair(out)
        if sk is not None and o is not None:
            arrs = (q, kv_cache, weights, lens, block_table, o[0], o[1], workspace)
            key, r = _lookup("decode", sk, arrs)
            if r is not _fast.MISS:
                return r
    a, ctx, ia, sca = _decode_prepare(q, kv_cache, weights, lens, block_table, topk, block_kv, max_len, physical,
                                      sorted, return_scores, out, backend, algo, dtype, num_threads, stream)
    run_fn = _ffi.entry("ltk_decode_topk")
    _run("decode_topk", ctx, run_fn, _ffi.entry("ltk_decode_workspace_size"), a, a.B * a.next_n, workspace, stats)
    if key is not None:
        rows = a.B * a.next_n
        allocs = [(5, (rows, a.k), "int32")] if arrs[5] is None else []
        if sca is not None and arrs[6] is None:
            allocs.append((6, (rows, a.k), "float32"))
        _fast.remember(key, lambda: _fast.Plan(
            "decode_topk", run_fn, a, ctx, arrs,
            ("q", "kv_cache", "weights", "lens" if lens.ndim == 2 else "seq_lens", "block_table", "out_idx", "out_scores",
             None), allocs, (5, 6) if sca is not None else (5,), ws_slot=7))
    if sca is not None:
        return ia.obj, sca.obj
    return ia.obj


def fp8_paged_mqa_topk(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len, topk, *,
                       clean_logits=False, physical=False, sorted=False, return_scores=False, out=None,
                       backend="auto", algo="fused", workspace=None, stats=None, dtype=None, num_threads=0,
                       stream=None):
    """DeepGEMM ``fp8_paged_mqa_logits`` + vLLM ``top_k_per_row_decode`` in one exact call.

    vLLM's decode step::

        logits = fp8_paged_mqa_logits(q, kv_cache, weights, seq_lens, block_table, schedule_meta,
                                      max_model_len, clean_logits=False)
        top_k_per_row_decode(logits, next_n, seq_lens, topk_indices, B * next_n, logits.stride(0),
                             logits.stride(1), topk)

    becomes::

        topk_indices = litetopk.fp8_paged_mqa_topk(q, kv_cache, weights, seq_lens, block_table,
                                                   schedule_meta, max_model_len, topk)

    ``q`` may be the pair ``(q, None)``; ``schedule_meta`` and ``clean_logits`` are accepted and not
    needed; ``max_context_len`` is the capacity (``max_len`` of :func:`decode_topk`, clipped to the
    block table). ``physical=True`` returns slots for SGLang / FlashMLA instead of positions.
    """
    q = _split_q(q)
    return decode_topk(q, kv_cache, weights, context_lens, block_table, topk, max_len=max_context_len,
                       physical=physical, sorted=sorted, return_scores=return_scores, out=out, backend=backend,
                       algo=algo, workspace=workspace, stats=stats, dtype=dtype, num_threads=num_threads,
                       stream=stream)


# ---- kNN -----------------------------------------------------------------------------------------------
def _knn_prepare(queries, base, k, metric, sorted_, out, backend, algo, dtype, num_threads, stream):
    qa = wrap(queries, "queries", ndim=2)
    ba = wrap(base, "base", ndim=2)
    k = _check_k(k, "knn")
    if not isinstance(metric, str) or metric.lower() not in _ffi.METRICS:
        raise ValueError(f"metric={metric!r}: expected one of {list(_ffi.METRICS)}")
    B, D = qa.shape
    N = ba.shape[0]
    code = float_code(qa, dtype, _SCORE_DTYPES, "kNN")
    if float_code(ba, dtype if dtype is not None else _raw_hint(ba, code), _SCORE_DTYPES, "kNN") != code:
        raise TypeError(f"queries ({qa.dname}) and base ({ba.dname}) must have the same element type")
    if ba.shape[1] != D:
        raise ValueError(f"base: expected D={D} columns like queries, got shape {ba.shape}")
    _inner_contig(qa, (1,))
    _inner_contig(ba, (1,))
    device = same_device([qa, ba])
    ctx = _Ctx(device, backend, algo, num_threads, stream, qa)
    if out is None:
        out = (None, None)
    elif not isinstance(out, (tuple, list)) or len(out) != 2:
        raise ValueError("out: expected (scores, indices)")
    sca, ia = _outputs2(out, ("out scores", "out indices"), ((B, k), (B, k)), ("float32", "int64"), ctx, B, k)
    a = _ffi.ltk_knn_args()
    a.B, a.N, a.D, a.k = B, N, D, k
    a.dtype = code
    a.metric = _ffi.METRICS[metric.lower()]
    a.queries, a.q_stride = qa.ptr or None, qa.stride(0)
    a.base, a.base_stride = ba.ptr or None, ba.stride(0)
    a.out_idx, a.out_scores = ia.ptr or None, sca.ptr or None
    a.out_stride = _row_stride(ia, sca)
    a.flags = _flags(sorted_)
    return a, ctx, sca, ia


def knn_topk(queries, base, k, metric="ip", *, sorted=True, out=None, backend="auto", algo="fused",
             workspace=None, stats=None, dtype=None, num_threads=0, stream=None):
    """Exact brute-force k nearest neighbours of each query in ``base``.

    Parameters
    ----------
    queries : array [B, D]
        float32, float16 or bfloat16; last dimension contiguous.
    base : array [N, D]
        Same element type; last dimension contiguous.
    k : int
        1 <= k <= 16384; ``k > N`` pads.
    metric : {"ip", "l2", "cos"}
        "ip": inner product, larger is better. "l2": squared distance ``|q|^2 + |x|^2 - 2<q, x>``,
        SMALLER is better. "cos": cosine similarity (0 when a norm is 0), larger is better.
    sorted : bool, default True
        Best first (ties by lower index); False leaves the order within a row unspecified.
    out : (scores, indices), optional
        float32 and int64 arrays [B, k] with the same row stride.
    backend, algo, workspace, stats, dtype, num_threads, stream
        As in :func:`indexer_topk`.

    Returns
    -------
    scores : float32 array [B, k]
        Padding ``-inf`` (``+inf`` for "l2").
    indices : int64 array [B, k]
        Row indices into ``base``; padding ``-1``.
    """
    key = None
    if stats is None and stream is None and (out is None or ((type(out) is tuple or type(out) is list)
                                                             and len(out) == 2)):
        sk = _fast.scalars_key((k, metric, sorted, backend, algo, dtype, num_threads))
        if sk is not None:
            arrs = (queries, base) + ((None, None) if out is None else tuple(out)) + (workspace,)
            key, r = _lookup("knn", sk, arrs)
            if r is not _fast.MISS:
                return r
    a, ctx, sca, ia = _knn_prepare(queries, base, k, metric, sorted, out, backend, algo, dtype, num_threads, stream)
    L = _ffi.lib()
    _run("knn_topk", ctx, L.ltk_knn_topk, L.ltk_knn_workspace_size, a, a.B, workspace, stats)
    if key is not None:
        allocs = [(i, (a.B, a.k), dn) for i, dn in ((2, "float32"), (3, "int64")) if arrs[i] is None]
        _fast.remember(key, lambda: _fast.Plan("knn_topk", L.ltk_knn_topk, a, ctx, arrs,
                                               ("queries", "base", "out_scores", "out_idx", None), allocs, (2, 3),
                                               ws_slot=4))
    return sca.obj, ia.obj


# ---- select -----------------------------------------------------------------------------------------
def _select_prepare(scores, k, starts, ends, sorted_, relative, out, backend, algo, dtype, num_threads, stream):
    sa = wrap(scores, "scores", ndim=(1, 2))
    one_d = sa.ndim == 1
    k = _check_k(k, "select")
    rows, cols = (1, sa.shape[0]) if one_d else sa.shape
    code = float_code(sa, dtype, _SCORE_DTYPES, "select")
    if one_d:
        if sa.stride(0) not in (0, 1):
            raise ValueError(f"scores: must be contiguous (stride {sa.strides[0]})")
        row_stride = 0
    else:
        _inner_contig(sa, (1,))
        row_stride = sa.stride(0)
        if rows > 1 and cols > 0 and row_stride < cols:
            raise ValueError(f"scores: stride(0)={row_stride} < cols={cols}")
    device = same_device([sa])
    on_host = device[0] == "cpu"
    if one_d and (starts is not None or ends is not None):
        starts = None if starts is None else _as_len1(starts)
        ends = None if ends is None else _as_len1(ends)
    sta, ena = _wrap_ranges(starts, ends, ("starts", "ends"), rows, cols, on_host, sa)
    ctx = _Ctx(device, backend, algo, num_threads, stream, sa)
    if out is None:
        out = (None, None)
    elif not isinstance(out, (tuple, list)) or len(out) != 2:
        raise ValueError("out: expected (values, indices)")
    oshape = (k,) if one_d else (rows, k)
    if one_d:
        vals = [check_out(o, n, oshape, d, ctx.device) if o is not None else None
                for o, n, d in zip(out, ("out values", "out indices"), ("float32", "int32"))]
        va = vals[0] or check_out(ctx.alloc(oshape, "float32"), "out values", oshape, "float32", ctx.device)
        ia = vals[1] or check_out(ctx.alloc(oshape, "int32"), "out indices", oshape, "int32", ctx.device)
        for x in (va, ia):
            if x.stride(0) not in (0, 1):
                raise ValueError(f"{x.name}: must be contiguous")
        ostride = 0
    else:
        va, ia = _outputs2(out, ("out values", "out indices"), (oshape, oshape), ("float32", "int32"), ctx, rows, k)
        ostride = _row_stride(ia, va)
    a = _ffi.ltk_select_args()
    a.rows, a.cols, a.k = rows, cols, k
    a.dtype = code
    a.scores, a.row_stride = sa.ptr or None, row_stride
    a.starts = sta.ptr if sta is not None else None
    a.ends = ena.ptr if ena is not None else None
    a.out_idx, a.out_scores = ia.ptr or None, va.ptr or None
    a.out_stride = ostride
    a.flags = _flags(sorted_, relative)
    return a, ctx, va, ia, (sta, ena)


def _as_len1(x):
    if isinstance(x, int):
        return [x]
    return x


def select_topk(scores, k, starts=None, ends=None, *, sorted=True, relative=True, out=None, backend="auto",
                algo="fused", workspace=None, stats=None, dtype=None, num_threads=0, stream=None):
    """Exact, deterministic top-k of each row of a score matrix.

    A drop-in for ``torch.topk(scores, k, dim=-1)`` / FlashInfer ``top_k`` on materialised scores,
    with per-row ranges (``top_k_ragged_transform``-style) and a total order, so the result is the
    same set on every backend and every run.

    Parameters
    ----------
    scores : array [rows, cols] or [cols]
        float32, float16 or bfloat16; last dimension contiguous, any row stride.
    k : int
        1 <= k <= 65536; rows with fewer valid entries are padded.
    starts, ends : int32 array [rows], optional
        Valid range ``[starts[r], ends[r])`` of each row within ``[0, cols)``; both or neither.
    sorted : bool, default True
        Best first; False leaves the order within a row unspecified (the set is unchanged).
    relative : bool, default True
        Indices relative to ``starts[r]``; False gives column indices.
    out : (values, indices), optional
        float32 and int32 arrays ``[rows, k]`` with the same row stride.
    backend, algo, workspace, stats, dtype, num_threads, stream
        As in :func:`indexer_topk`.

    Returns
    -------
    values : float32 array [rows, k]
        The selected scores (exact: widened from the input type), ``-inf`` padding.
    indices : int32 array [rows, k]
        ``-1`` padding.

    Notes
    -----
    Order: score descending, ties by the lower index, ``-0.0 == +0.0``, NaN after ``-inf``. Unlike
    ``torch.topk`` (int64 indices, ties unspecified, NaN ranked largest) the indices are int32, ties
    are resolved, and NaN ranks last.
    """
    key = None
    if stats is None and stream is None and (out is None or ((type(out) is tuple or type(out) is list)
                                                             and len(out) == 2)):
        sk = _fast.scalars_key((k, sorted, relative, backend, algo, dtype, num_threads))
        if sk is not None:
            # int starts/ends of a 1-D call and Python lists take the full path (scan refuses them)
            arrs = (scores, starts, ends) + ((None, None) if out is None else tuple(out)) + (workspace,)
            key, r = _lookup("select", sk, arrs)
            if r is not _fast.MISS:
                return r
    a, ctx, va, ia, keep = _select_prepare(scores, k, starts, ends, sorted, relative, out, backend, algo, dtype,
                                           num_threads, stream)
    L = _ffi.lib()
    _run("select_topk", ctx, L.ltk_select_topk, L.ltk_select_workspace_size, a, a.rows, workspace, stats)
    del keep
    if key is not None:
        oshape = tuple(va.shape)
        allocs = [(i, oshape, dn) for i, dn in ((3, "float32"), (4, "int32")) if arrs[i] is None]
        ranges = ((1, 2, a.cols),) if starts is not None and not ctx.is_cuda else ()
        _fast.remember(key, lambda: _fast.Plan("select_topk", L.ltk_select_topk, a, ctx, arrs,
                                               ("scores", "starts", "ends", "out_scores", "out_idx", None), allocs,
                                               (3, 4), ws_slot=5, ranges=ranges))
    return va.obj, ia.obj


def merge_topk(scores, ids, k, *, sorted=True, out=None, backend="auto", workspace=None, stats=None, num_threads=0,
               stream=None):
    """Exact global top-k of key-sharded candidates: each rank's exact local top-k, global ids.

    The merge of vLLM's decode-context-parallel indexer (``_merge_dcp_topk_global`` after its
    all-gather): a key of the global top-k has at most k - 1 keys above it, so it is in its own
    rank's local top-k, and the top k of the union is the global answer.

    Parameters
    ----------
    scores : float32 array [rows, n] or [G, rows, n]
        Candidate scores: a row's candidates side by side (vLLM gathers ``[rows, G * k]``), or rank
        by rank (an all-gather into dimension 0). Last dimension contiguous, any other strides.
    ids : int32 array, the same shape and strides
        Global ids; an id < 0 is no candidate (padding).
    k : int
        1 <= k <= 65536; a row with fewer candidates is padded.
    sorted : bool, default True
        Best first; False leaves the order within a row unspecified (the set is unchanged).
    out : (values, indices), optional
        float32 and int32 arrays ``[rows, k]`` with the same row stride.
    backend, workspace, stats, num_threads, stream
        As in :func:`indexer_topk`. Backends: ref, cpu and cuda (k <= 16384 there).

    Returns
    -------
    values : float32 array [rows, k]
        The candidates' scores (``-0.0`` as ``+0.0``), ``-inf`` padding.
    indices : int32 array [rows, k]
        Global ids, ``-1`` padding.

    Notes
    -----
    Order: score descending, ties by the lower **id** (not by the candidate's position), NaN after
    ``-inf``: the same set as one unsharded call, bit for bit, whatever the ranks' layout (contiguous
    or interleaved shards). Each id is taken as given (an id listed twice may come back twice).
    """
    sa = wrap(scores, "scores", ndim=(2, 3))
    da = wrap(ids, "ids", ndim=(2, 3))
    require_dtype(sa, "float32")
    require_dtype(da, "int32")
    if da.shape != sa.shape or da.strides != sa.strides:
        raise ValueError(f"ids: shape {da.shape} / strides {da.strides} must match scores' "
                         f"{sa.shape} / {sa.strides}")
    k = _check_k(k, "merge")
    if sa.ndim == 2:
        rows, n = sa.shape
        lists, list_len, rstride, lstride = 1, n, sa.stride(0), 0
        _inner_contig(sa, (1,))
    else:
        lists, rows, list_len = sa.shape
        rstride, lstride = sa.stride(1), sa.stride(0)
        _inner_contig(sa, (2,))
    if lists < 1 or list_len < 1:
        raise ValueError(f"scores: no candidates (shape {sa.shape})")
    # a stride of 0 means "dense" to the C call: give the real stride unless the dimension is 1
    if rows > 1 and rstride == 0 or lists > 1 and lstride == 0:
        raise ValueError("scores: a broadcast (zero-stride) dimension is not supported")
    device = same_device([sa, da])
    ctx = _Ctx(device, backend, "fused", num_threads, stream, sa)
    va, ia = _outputs2(out if out is not None else (None, None), ("out values", "out indices"),
                       ((rows, k), (rows, k)), ("float32", "int32"), ctx, rows, k)
    a = _ffi.ltk_merge_args()
    a.rows, a.lists, a.list_len, a.k = rows, lists, list_len, k
    a.scores, a.ids = sa.ptr or None, da.ptr or None
    a.row_stride = rstride if rows > 1 else list_len * lists
    a.list_stride = lstride if lists > 1 else list_len
    a.out_idx, a.out_scores = ia.ptr or None, va.ptr or None
    a.out_stride = _row_stride(ia, va)
    a.flags = 0 if sorted else _ffi.FLAG_UNSORTED
    _run("merge_topk", ctx, _ffi.entry("ltk_topk_merge"), _ffi.entry("ltk_merge_workspace_size"), a, rows, workspace,
         stats)
    return va.obj, ia.obj


def stable_topk_from_candidates(candidate_scores, candidate_ids, topk_tokens):
    """vLLM's DCP merge step (``_stable_topk_from_candidates``): int32 global ids [rows, topk_tokens],
    -1 padding, from the all-gathered ``[rows, G * k]`` scores and ids (merge_topk's order)."""
    return merge_topk(candidate_scores, candidate_ids, topk_tokens)[1]


# ---- workspace size -----------------------------------------------------------------------------------
def workspace_size(op, *args, **kwargs) -> int:
    """Bytes of workspace an operation needs for these arguments.

    Parameters
    ----------
    op : {"indexer", "fp8_mqa", "decode", "fp8_paged_mqa", "knn", "select", "prefill"}
    *args, **kwargs
        Exactly the arguments of :func:`indexer_topk`, :func:`fp8_mqa_topk`, :func:`decode_topk`,
        :func:`fp8_paged_mqa_topk`, :func:`knn_topk`, :func:`select_topk` or :func:`prefill`
        (``backend``, ``algo``, ``num_threads``, flags and output options matter).

    Returns
    -------
    int
        Allocate a ``torch.empty(n, dtype=torch.uint8, device=...)`` (or a numpy uint8 array) of at
        least this size and pass it as ``workspace=`` to make the call allocation-free.
    """
    L = _ffi.lib()
    kwargs.pop("workspace", None)
    kwargs.pop("stats", None)
    if op in ("indexer", "fp8_mqa"):
        if op == "fp8_mqa":
            q, kv, w, ks, ke, topk = _pad_args(args, kwargs, ("q", "kv", "weights", "cu_seq_len_k_start",
                                                                "cu_seq_len_k_end", "topk"))
            for ign in ("clean_logits", "max_seqlen_k", "logits_dtype"):
                kwargs.pop(ign, None)
            k, k_scale = _split_kv(kv)
            args = (_split_q(q), k, k_scale, w, ks, ke, topk)
        p = _bind(("q", "kv", "kv_scale", "weights", "ks", "ke", "topk"), args, kwargs,
                  dict(relative=True, sorted=False, return_scores=False, state=None, out=None, backend="auto",
                       algo="fused", dtype=None, num_threads=0, stream=None))
        a, ctx, *_ = _indexer_prepare(p["q"], p["kv"], p["kv_scale"], p["weights"], p["ks"], p["ke"], p["topk"],
                                      p["relative"], p["sorted"], p["return_scores"], p["state"], p["out"],
                                      p["backend"], p["algo"], p["dtype"], p["num_threads"], p["stream"])
        return _workspace_bytes(ctx, L.ltk_indexer_workspace_size, a)
    if op in ("decode", "fp8_paged_mqa"):
        if op == "fp8_paged_mqa":
            q, kv, w, lens, bt, _meta, mcl, topk = _pad_args(args, kwargs, ("q", "kv_cache", "weights", "context_lens",
                                                                         "block_table", "schedule_meta",
                                                                         "max_context_len", "topk"))
            kwargs.pop("clean_logits", None)
            args, kwargs["max_len"] = (_split_q(q), kv, w, lens, bt, topk), mcl
        p = _bind(("q", "kv_cache", "weights", "lens", "block_table", "topk"), args, kwargs,
                  dict(block_kv=None, max_len=0, physical=False, sorted=False, return_scores=False, out=None,
                       backend="auto", algo="fused", dtype=None, num_threads=0, stream=None))
        a, ctx, *_ = _decode_prepare(p["q"], p["kv_cache"], p["weights"], p["lens"], p["block_table"], p["topk"],
                                     p["block_kv"], p["max_len"], p["physical"], p["sorted"], p["return_scores"],
                                     p["out"], p["backend"], p["algo"], p["dtype"], p["num_threads"], p["stream"])
        return _workspace_bytes(ctx, _ffi.entry("ltk_decode_workspace_size"), a)
    if op == "knn":
        p = _bind(("queries", "base", "k", "metric"), args, kwargs,
                  dict(metric="ip", sorted=True, out=None, backend="auto", algo="fused", dtype=None, num_threads=0,
                       stream=None))
        a, ctx, *_ = _knn_prepare(p["queries"], p["base"], p["k"], p["metric"], p["sorted"], p["out"], p["backend"],
                                  p["algo"], p["dtype"], p["num_threads"], p["stream"])
        return _workspace_bytes(ctx, L.ltk_knn_workspace_size, a)
    if op == "select":
        p = _bind(("scores", "k", "starts", "ends"), args, kwargs,
                  dict(starts=None, ends=None, sorted=True, relative=True, out=None, backend="auto", algo="fused",
                       dtype=None, num_threads=0, stream=None))
        a, ctx, *_ = _select_prepare(p["scores"], p["k"], p["starts"], p["ends"], p["sorted"], p["relative"], p["out"],
                                     p["backend"], p["algo"], p["dtype"], p["num_threads"], p["stream"])
        return _workspace_bytes(ctx, L.ltk_select_workspace_size, a)
    if op == "prefill":
        p = _bind(("q", "kv", "kv_scale", "weights", "topk"), args, kwargs,
                  dict(m=1, chunk=0, sample_size=0, sorted=False, return_scores=False, out=None, store=True,
                       callback=None, progress=False, backend="auto", algo="fused", dtype=None, num_threads=0,
                       stream=None, return_workspace_bytes=False))
        a, ctx, *_ = _prefill_prepare(p["q"], p["kv"], p["kv_scale"], p["weights"], p["topk"], p["m"], p["chunk"],
                                      p["sample_size"], p["sorted"], p["return_scores"], p["out"], p["store"],
                                      p["callback"], p["progress"], p["backend"], p["algo"], p["dtype"],
                                      p["num_threads"], p["stream"])
        if not p["store"]:
            a.callback = _ffi.PREFILL_CALLBACK(lambda *x: 0)  # the size query only checks that one is set
        return _workspace_bytes(ctx, _ffi.entry("ltk_prefill_workspace_size"), a)
    raise ValueError(f"op={op!r}: expected 'indexer', 'fp8_mqa', 'knn', 'select' or 'prefill'")


def _pad_args(args, kwargs, names):
    vals = list(args) + [None] * (len(names) - len(args))
    if len(args) > len(names):
        raise TypeError(f"too many positional arguments ({len(args)})")
    for i, n in enumerate(names):
        if n in kwargs:
            if i < len(args):
                raise TypeError(f"got multiple values for argument '{n}'")
            vals[i] = kwargs.pop(n)
    return vals


def _bind(names, args, kwargs, defaults):
    if len(args) > len(names):
        raise TypeError(f"too many positional arguments ({len(args)})")
    p = dict(defaults)
    for n, v in zip(names, args):
        p[n] = v
    for n, v in kwargs.items():
        if n in names[:len(args)]:
            raise TypeError(f"got multiple values for argument '{n}'")
        if n not in p and n not in names:
            raise TypeError(f"unexpected keyword argument '{n}'")
        p[n] = v
    for n in names:
        if n not in p:
            raise TypeError(f"missing argument '{n}'")
    return p


# ---- state ---------------------------------------------------------------------------------------------
class IndexerState:
    """Cross-chunk hot set of one request (``ltk_indexer_state``).

    Passed as ``state=`` to consecutive :func:`indexer_topk` / :func:`fp8_mqa_topk` calls of the same
    request (its prefill chunks, in order): each call samples its initial threshold from the keys the
    previous call voted for most and then replaces the set with its own. Results are exact whatever
    the set holds; a good set only saves time.

    Parameters
    ----------
    sample_size : int
        Keys kept (e.g. ``3 * topk``), 1 .. 2**20.
    backend : {"auto", "cpu", "ref", "cuda"}
        Must be the backend of the calls it is used with. "auto" is the C library's choice: "cuda"
        when built with CUDA and a device is present, else "cpu".
    device : int or torch.device, optional
        CUDA device to hold the state (default: the current one).

    Notes
    -----
    A CUDA state is updated on each call's stream; :meth:`get`, :meth:`set` and :meth:`reset` copy
    between host and device and first synchronise the current torch stream. Do not share one state
    between requests or concurrent streams. Use as a context manager or call :meth:`close`.
    """

    def __init__(self, sample_size: int, backend: str = "auto", device=None):
        self._handle = ctypes.c_void_p(None)
        if isinstance(sample_size, bool):
            raise TypeError("sample_size must be an int")
        sample_size = operator.index(sample_size)
        if sample_size < 1 or sample_size > _ffi.STATE_MAX_SIZE:
            raise ValueError(f"sample_size={sample_size} out of [1, 2^20]")
        L = _ffi.lib()
        b = _backend_code(backend)
        if b == _ffi.BACKEND_AUTO:
            b = L.ltk_backend_resolve(_ffi.BACKEND_AUTO)
        self._backend = int(b)
        self._device = None
        if self._backend == _ffi.BACKEND_CUDA:
            t = _torch()
            if device is not None and t is not None:
                d = t.device("cuda", device) if isinstance(device, int) else t.device(device)
                self._device = d if d.index is not None else t.device("cuda", t.cuda.current_device())
            elif t is not None and t.cuda.is_available():
                self._device = t.device("cuda", t.cuda.current_device())
        self.sample_size = sample_size
        with self._guard():
            _ffi.check(L.ltk_indexer_state_create(self._backend, sample_size, ctypes.byref(self._handle)),
                       "IndexerState")

    @property
    def backend(self) -> str:
        return _ffi.BACKEND_NAMES[self._backend]

    def _guard(self):
        if self._device is not None:
            return _torch().cuda.device(self._device)
        return contextlib.nullcontext()

    def _check_open(self):
        if not self._handle.value:
            raise ValueError("IndexerState is closed")

    def _sync(self):
        # the C state functions copy on the legacy stream; order them after the torch stream's work
        if self._device is not None:
            _torch().cuda.current_stream(self._device).synchronize()

    def get(self) -> np.ndarray:
        """The hot keys (absolute indices, best first) as a host int32 array."""
        self._check_open()
        buf = np.empty(self.sample_size, np.int32)
        n = ctypes.c_int32(0)
        self._sync()
        with self._guard():
            _ffi.check(_ffi.lib().ltk_indexer_state_get(self._handle, buf.ctypes.data, self.sample_size,
                                                        ctypes.byref(n)), "IndexerState.get")
        return buf[: n.value].copy()

    def set(self, indices) -> None:
        """Replaces the hot set (absolute key indices; duplicates and negatives are dropped, at most
        ``sample_size`` kept, out-of-range ones ignored at use)."""
        self._check_open()
        if _torch() is not None and isinstance(indices, _torch().Tensor):
            indices = indices.detach().cpu().numpy()
        try:
            arr = np.ascontiguousarray(np.asarray(indices).reshape(-1))
        except (TypeError, ValueError) as e:
            raise TypeError(f"indices: {e}") from None
        if arr.size and arr.dtype.kind not in "iu":
            raise TypeError(f"indices: expected integers, got {arr.dtype}")
        if arr.size and (arr.max() > np.iinfo(np.int32).max or arr.min() < np.iinfo(np.int32).min):
            raise ValueError("indices: values must fit int32")
        arr = arr.astype(np.int32)
        self._sync()
        with self._guard():
            _ffi.check(_ffi.lib().ltk_indexer_state_set(self._handle, arr.ctypes.data if arr.size else None,
                                                        int(arr.size)), "IndexerState.set")

    def reset(self) -> None:
        """Back to cold start (empty hot set)."""
        self._check_open()
        self._sync()
        with self._guard():
            _ffi.check(_ffi.lib().ltk_indexer_state_reset(self._handle), "IndexerState.reset")

    def close(self) -> None:
        """Frees the state (idempotent)."""
        h = getattr(self, "_handle", None)
        if h is not None and h.value:
            if self._device is not None:
                self._sync()  # a pending call may still update it on its stream
            _ffi.lib().ltk_indexer_state_free(h)
            self._handle = ctypes.c_void_p(None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __len__(self):
        return len(self.get())

    def __repr__(self):
        state = "closed" if not self._handle.value else f"sample_size={self.sample_size}"
        return f"IndexerState({state}, backend='{self.backend}')"


# ---- info ------------------------------------------------------------------------------------------------
def info() -> str:
    """The library's build and backend report (``ltk_info``), plus the library path."""
    buf = ctypes.create_string_buffer(8192)
    _ffi.check(_ffi.lib().ltk_info(buf, len(buf)), "info")
    return buf.value.decode("utf-8", "replace") + f"library: {_ffi.library_path()}\n"


def backend_available(backend: str) -> bool:
    """True if ``backend`` ("ref", "cpu", "cuda") is compiled in and usable on this machine."""
    return bool(_ffi.lib().ltk_backend_available(_backend_code(backend)))


def backends() -> dict:
    """Availability of every backend, e.g. ``{"ref": True, "cpu": True, "cuda": False}``."""
    return {n: backend_available(n) for n in ("ref", "cpu", "cuda")}


# ---- whole-sequence prefill driver ---------------------------------------------------------------------
class _DeviceView:
    """__cuda_array_interface__ over a device pointer the library hands to the callback (no copy)."""

    def __init__(self, ptr, shape, typestr, strides):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                         "strides": strides, "version": 2}


def _view(ctx, ptr, rows, k, stride, dname):
    """The callback's chunk rows as an array of the caller's framework (aliasing library memory)."""
    if not ptr:
        return None
    item = 4
    if ctx.is_cuda:
        t = _torch()
        typestr = "<i4" if dname == "int32" else "<f4"
        return t.as_tensor(_DeviceView(ptr, (rows, k), typestr, (stride * item, item)),
                           device=t.device("cuda", ctx.device[1]))
    ctype = ctypes.c_int32 if dname == "int32" else ctypes.c_float
    n = (rows - 1) * stride + k if rows else 0
    flat = np.ctypeslib.as_array((ctype * max(n, 1)).from_address(ptr))
    arr = np.lib.stride_tricks.as_strided(flat, (rows, k), (stride * item, item))
    if ctx.like.is_torch:
        return _torch().from_numpy(arr)
    return arr


def _prefill_prepare(q, kv, kv_scale, weights, topk, m, chunk, sample_size, sorted_, return_scores, out, store,
                     callback, progress, backend, algo, dtype, num_threads, stream):
    qa = wrap(q, "q", ndim=3)
    kva = wrap(kv, "kv", ndim=2)
    wa = wrap(weights, "weights", ndim=2)
    sa = wrap(kv_scale, "kv_scale", ndim=(1, 2), optional=True)
    topk = _check_k(topk, "indexer")
    m = operator.index(m)
    if m < 1:
        raise ValueError(f"m={m} < 1")
    chunk = operator.index(chunk)
    if chunk < 0:
        raise ValueError(f"chunk={chunk} < 0")
    sample_size = operator.index(sample_size)
    if sample_size < 0 or sample_size > _ffi.STATE_MAX_SIZE:
        raise ValueError(f"sample_size={sample_size} out of [0, 2^20]")
    L, H, D = qa.shape
    S = L // m
    code = float_code(qa, dtype, _INDEXER_DTYPES, "the indexer")
    if float_code(kva, dtype if dtype is not None else _raw_hint(kva, code), _INDEXER_DTYPES, "the indexer") != code:
        raise TypeError(f"q ({qa.dname}) and kv ({kva.dname}) must have the same element type")
    require_dtype(wa, "float32")
    if kva.shape != (S, D):
        raise ValueError(f"kv: expected shape ({S}, {D}) = (L // m, D), got {kva.shape}")
    if wa.shape != (L, H):
        raise ValueError(f"weights: expected shape ({L}, {H}), got {wa.shape}")
    if sa is not None:
        require_dtype(sa, "float32")
        if sa.shape not in ((S,), (S, 1)) or sa.stride(0) not in (0, 1):
            raise ValueError(f"kv_scale: expected a contiguous ({S},), got shape {sa.shape}")
    _inner_contig(qa, (2,))
    if qa.stride(1) not in (0, D):
        raise ValueError(f"q: heads must be packed (stride(1) == D={D}, got {qa.strides[1]})")
    _inner_contig(kva, (1,))
    _inner_contig(wa, (1,))
    device = same_device([qa, kva, wa, sa])
    ctx = _Ctx(device, backend, algo, num_threads, stream, qa)
    if callback is not None and not callable(callback):
        raise TypeError("callback must be callable")
    if not store and callback is None:
        raise ValueError("store=False needs a callback: the results would be lost")
    if store:
        ia, sca = _index_outputs(out, return_scores, ctx, L, topk)
    else:
        if out is not None or return_scores:
            raise ValueError("store=False writes no outputs: drop out= and return_scores")
        ia = sca = None
    a = _ffi.ltk_prefill_args()
    a.L, a.m, a.H, a.D, a.k = L, m, H, D, topk
    a.dtype = code
    _set_inputs(a, qa, kva, sa, wa)
    a.chunk, a.sample_size = chunk, sample_size  # 0: the driver's defaults (8192 rows, 3 * topk)
    a.out_idx = ia.ptr if ia is not None and ia.ptr else None
    a.out_scores = sca.ptr if sca is not None and sca.ptr else None
    a.out_stride = _row_stride(ia, sca)
    a.flags = 0 if sorted_ else _ffi.FLAG_UNSORTED
    a.progress = 1 if progress else 0
    return a, ctx, ia, sca


def prefill(q, kv, kv_scale, weights, topk, *, m=1, chunk=0, sample_size=0, sorted=False, return_scores=False,
            out=None, store=True, callback=None, progress=False, backend="auto", algo="fused", workspace=None,
            dtype=None, num_threads=0, stream=None, return_workspace_bytes=False):
    """Indexer top-k over a whole sequence, chunk by chunk, with the hot set carried between chunks.

    Token ``t`` sees the (CSA-compressed) keys ``j < (t + 1) // m`` (``m = 1``: causal DSA, ``j <= t``).
    Memory besides the outputs is bounded independently of ``L`` (one chunk's workspace).

    Parameters
    ----------
    q : array [L, H, D]
        Indexer queries of every token (float8_e4m3fn, bfloat16 or float32; layout as in
        :func:`indexer_topk`).
    kv : array [L // m, D]
        Compressed indexer keys, same element type.
    kv_scale : float32 array [L // m], or None
    weights : float32 array [L, H]
    topk : int
        1 <= topk <= 8192.
    m : int, default 1
        Compression ratio (4 for DeepSeek-V4 CSA).
    chunk : int, default 0
        Query rows per chunk (0 = 8192).
    sample_size : int, default 0
        Hot-set size (0 = 3 * topk).
    sorted, return_scores
        As in :func:`indexer_topk`. Indices are absolute key positions, ``-1`` padded.
    out : array [L, topk] int32, or (indices, scores), optional
    store : bool, default True
        False (with a callback) writes no ``[L, topk]`` output: each chunk's rows live only in the
        workspace during the callback, so the whole run needs memory independent of ``L``.
    callback : callable ``f(first_row, indices, scores)``, optional
        Called after each chunk with that chunk's rows ``[rows, topk]`` (``scores`` None unless
        requested): arrays of the caller's framework that alias library memory, valid only during the
        call; on CUDA, device tensors whose values are produced on the call's stream (enqueue work on
        that stream to consume them). An exception raised in the callback stops the run and
        propagates.
    progress : bool
        One line per chunk on stderr.
    backend, algo, workspace, dtype, num_threads, stream
        As in :func:`indexer_topk`. The CUDA driver waits for each chunk before staging the next
        chunk's ranges, so the call is not graph-capturable.
    return_workspace_bytes : bool
        Also return the bytes of auxiliary memory used (the workspace).

    Returns
    -------
    indices : int32 array [L, topk] (None with ``store=False``)
    scores : float32 array [L, topk], only with ``return_scores``
    workspace_bytes : int, only with ``return_workspace_bytes``
    """
    key = None
    if callback is None and stream is None:
        sk = _fast.scalars_key((topk, m, chunk, sample_size, sorted, return_scores, store, progress, backend, algo,
                                dtype, num_threads, return_workspace_bytes))
        o = _out_pair(out)
        if sk is not None and o is not None:
            arrs = (q, kv, kv_scale, weights, o[0], o[1], workspace)
            key, r = _lookup("prefill", sk, arrs, call=_prefill_fast)
            if r is not _fast.MISS:
                return r
    a, ctx, ia, sca = _prefill_prepare(q, kv, kv_scale, weights, topk, m, chunk, sample_size, sorted, return_scores,
                                       out, store, callback, progress, backend, algo, dtype, num_threads, stream)
    run_fn = _ffi.entry("ltk_prefill_run")
    ws_fn = _ffi.entry("ltk_prefill_workspace_size")
    failure = []
    if callback is not None:
        def trampoline(first_row, rows, idx_ptr, sc_ptr, stride, user):
            try:
                callback(int(first_row), _view(ctx, idx_ptr, rows, a.k, stride, "int32"),
                         _view(ctx, sc_ptr, rows, a.k, stride, "float32"))
                return 0
            except BaseException as e:  # an exception must not unwind through C frames
                failure.append(e)
                return 1
        a.callback = _ffi.PREFILL_CALLBACK(trampoline)
    need = _workspace_bytes(ctx, ws_fn, a)
    ws_keep = None
    if workspace is None and ctx.is_cuda and need:
        with ctx.on_stream():
            ws_keep = _torch().empty(need, dtype=_torch().uint8, device=_torch().device("cuda", ctx.device[1]))
        workspace = ws_keep
    try:
        _run("prefill", ctx, run_fn, ws_fn, a, a.L, workspace, None)
    except LiteTopKErrorTypes as e:
        if failure:
            raise failure[0] from e
        raise
    if failure:
        raise failure[0]
    if key is not None:
        allocs = [(4, (a.L, a.k), "int32")] if arrs[4] is None else []
        if sca is not None and arrs[5] is None:
            allocs.append((5, (a.L, a.k), "float32"))
        # the size is a function of the key: the shapes, options and which pointers are NULL
        extra = (sca is not None, need, return_workspace_bytes)
        _fast.remember(key, lambda: _fast.Plan(
            "prefill", run_fn, a, ctx, arrs, ("q", "kv", "kv_scale", "weights", "out_idx", "out_scores", None), allocs,
            (4, 5) if sca is not None else (4,), ws_slot=6, extra=extra))
    res = None if ia is None else (ia.obj if sca is None else (ia.obj, sca.obj))
    if return_workspace_bytes:
        return res, need
    return res


def _prefill_fast(plan, arrs, ptrs):
    """prefill() through a cached plan: as the full path, a CUDA call without a workspace gets one
    from torch's allocator on the current stream."""
    scores, need, ret_bytes = plan.extra
    if arrs[6] is None and plan.cuda is not None and need:
        t = _torch()
        arrs = arrs[:6] + (t.empty(need, dtype=t.uint8, device=t.device("cuda", plan.cuda)),)
        ptrs = list(ptrs)
        ptrs[6] = arrs[6].data_ptr()
        plan.ws_bytes = need  # (the plan's workspace slot was None when cached: no size recorded)
    r = plan.call(arrs, ptrs)
    if r is _fast.MISS:
        return r
    return (r, need) if ret_bytes else r


LiteTopKErrorTypes = _ffi.LiteTopKError
