"""Repeated calls: a per-thread cache from the cheap metadata of a call's arguments to the C argument
and execution records that the full checks built for them, so that a call whose arrays have the same
types, dtypes, shapes, strides, devices and layouts (and the same options) only writes the data
pointers and calls C.

Why: the full path (an Arr per array, every check, fresh ctypes records) was ~55 us of Python a
decode call on the H200's host (bench/host_cost.py: python 83.6 against c 28.1 us) and 18-45 us a
call on a 2-core development VM, tiny shapes, CPU backend, public call minus the bare C call with its
records prebuilt (host_cost.py's `bare`), interleaved batches of 400 calls, OMP_NUM_THREADS=1; a hit
measured there 5-9 us with out= and workspace= given, 8-14 us without (python/README.md, "Host cost").

What a hit still checks, every call, because it is not a function of the key: each pointer's
alignment (torch; numpy's ALIGNED flag is in the key), the host range vectors' values, an
IndexerState being open, LTK_BACKEND=ref for a host call that resolved backend "auto", the current
CUDA device. Anything else the full path checks is a function of the key: the entry exists only
because those checks passed for an equal key. A hit that fails a per-call check takes the full path,
which raises the full path's error.
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading

import numpy as np

from . import _ffi
from ._arrays import np_ptr

MISS = object()
HITS = [0]  # calls answered by a cached plan (bench/host_cost.py reports it: a path that never hits is slow)
MAX_PLANS = 256  # per thread; the oldest entry goes first (a serving loop sees a handful of layouts)
_tls = threading.local()
_ND = np.ndarray
_SCALAR_TYPES = frozenset((int, bool, str, float, type(None)))


class _NoTensor:  # stands in for torch.Tensor until torch is loaded (nothing is of this type)
    pass


_TT = [_NoTensor]


def plans() -> dict:
    try:
        return _tls.plans
    except AttributeError:
        d = _tls.plans = {}
        return d


def clear() -> None:
    """Drops this thread's cached plans (tests; never needed for correctness)."""
    plans().clear()
    lasts().clear()


def lasts() -> dict:
    try:
        return _tls.last
    except AttributeError:
        d = _tls.last = {}
        return d


def find(kind, key):
    """The cached plan of key, or None. Each operation's last hit is tried first, by equality: a
    serving loop repeats one layout, and comparing two keys element by element (identical dtypes,
    devices and strings are equal at once) is ~0.2 us where hashing one (its torch.Size, stride
    tuples and devices) is ~1.2 us (timeit on the development VM, decode's eight arrays)."""
    last = lasts()
    e = last.get(kind)
    if e is not None and e[0] == key:
        return e[1]
    p = plans().get(key)
    if p is not None:
        last[kind] = (key, p)
    return p


def scalars_key(vals):
    """The scalar options as a key part: values and their exact types (True == 1 hashes alike, and
    k=True must still be refused), or None when one is not a plain int/bool/str/float/None."""
    ts = tuple(map(type, vals))
    if not _SCALAR_TYPES.issuperset(ts):
        return None
    return vals, ts


def scan(arrs):
    """(key parts, data pointers) of the array arguments (None entries allowed), or None when one is
    neither an exact numpy.ndarray nor an exact torch.Tensor, or reading its metadata fails (the
    full path then handles it, with its own error)."""
    tt = _TT[0]
    meta = []
    ptrs = []
    try:
        for x in arrs:
            tp = type(x)
            if tp is tt:
                # no layout: a tensor of another layout fails one of these reads (sparse, mkldnn and
                # nested ones: data_ptr, stride or shape raise; jagged ones are another type) and takes
                # the full path, which refuses it; the dtype covers quantized and complex tensors
                meta.append((x.dtype, x.shape, x.stride(), x.device))
                ptrs.append(x.data_ptr())
            elif tp is _ND:
                # flags.num: WRITEABLE (outputs) and ALIGNED (depends on the pointer, so on every call)
                meta.append((x.dtype, x.shape, x.strides, x.flags.num))
                ptrs.append(np_ptr(x))
            elif x is None:
                meta.append(None)
                ptrs.append(0)
            else:
                t = sys.modules.get("torch")
                if t is None or tp is not t.Tensor:
                    return None
                _TT[0] = t.Tensor
                return scan(arrs)
    except Exception:
        return None
    return meta, ptrs


_E_STREAM = _ffi.ltk_exec.stream.offset // 8
_E_WS = _ffi.ltk_exec.workspace.offset // 8
_E_WS_BYTES = _ffi.ltk_exec.workspace_bytes.offset // 8


def _void_fields(struct):
    """Byte offsets of the pointer fields of a ctypes structure type, by name (all 8-byte aligned:
    they are written as words of a memoryview, ~40 ns against ~60 ns a ctypes field write)."""
    offs = {n: getattr(struct, n).offset for n, t in struct._fields_ if t is ctypes.c_void_p}
    if any(o % 8 for o in offs.values()) or ctypes.sizeof(struct) % 8 or ctypes.sizeof(ctypes.c_void_p) != 8:
        raise ValueError("plan: pointer fields are not 8-byte words")
    return offs


class Plan:
    """The records of one cached layout and what a call must redo: write `slots` (the scanned arrays,
    in scan order) into `fields`, allocate the missing outputs, run the per-call checks."""

    __slots__ = ("name", "run", "args", "mv", "ex", "emv", "pa", "pe", "offs", "aligns", "allocs",
                 "ws_slot", "ws_bytes", "cuda", "getdev", "stream", "host_ref", "ranges", "state_off", "busy",
                 "extra", "call")

    def __init__(self, name, run_fn, args, ctx, arrs, fields, allocs, outs, ws_slot=None, ranges=(),
                 state_field=None, extra=None):
        """arrs: the scanned arrays (None entries allowed) of the call the full path just checked;
        fields: the args field each one's pointer goes to (None: none); allocs: (slot, shape, dname) of
        the outputs to allocate, those not given; outs: the output slots, in return order; ws_slot:
        the workspace's slot; ranges: (lo slot, hi slot, length) to check on the host."""
        self.name = name
        self.run = run_fn
        self.args = type(args).from_buffer_copy(args)
        self.mv = memoryview(self.args).cast("B").cast("Q")
        self.ex = ctx.exec()
        self.emv = memoryview(self.ex).cast("B").cast("Q")
        self.pa, self.pe = ctypes.byref(self.args), ctypes.byref(self.ex)
        offs = _void_fields(type(args))
        written = set(f for f in fields if f is not None)
        if state_field is not None:
            written.add(state_field)
        for n in offs:  # a pointer the plan would not rewrite must be NULL, or the plan would reuse it
            if n not in written and getattr(args, n) is not None:
                raise ValueError(f"plan: field {n} is set but not rewritten")
        if len(fields) != len(arrs):
            raise ValueError("plan: one field per array")
        self.offs = tuple(offs[f] // 8 if f is not None else -1 for f in fields)
        # torch pointers are checked for alignment on every call; numpy's ALIGNED flag is in the key
        self.aligns = tuple(x.element_size() if type(x) is _TT[0] else 1 for x in arrs)
        like = ctx.like
        if like.is_torch:
            t = sys.modules["torch"]
            dev = "cpu" if ctx.device[0] == "cpu" else t.device("cuda", ctx.device[1])
            # an output is allocated as empty_like of a one-element tensor expanded to its shape: 1.2 us
            # against 2.3 us for torch.empty(shape, dtype=, device=), whose keyword parsing is most of
            # its cost (timeit on the development VM, CPU tensors); empty_like of an expanded (so
            # overlapping) tensor is contiguous, which is checked once here
            al = []
            for i, shape, dn in allocs:
                tmpl = t.empty((1,) * len(shape), dtype=getattr(t, dn), device=dev).expand(shape)
                o = t.empty_like(tmpl)
                if tuple(o.shape) != tuple(shape) or not o.is_contiguous():
                    raise ValueError("plan: empty_like of the template is not a contiguous output")
                al.append((i, tmpl, None))
            self.allocs = tuple(al)
        else:
            self.allocs = tuple((i, shape, np.dtype(dn)) for i, shape, dn in allocs)
        self.ws_slot = ws_slot
        ws = arrs[ws_slot] if ws_slot is not None else None
        self.ws_bytes = 0 if ws is None else _nbytes(ws)
        self.cuda = ctx.device[1] if ctx.is_cuda else None
        self.getdev = self.stream = None
        if self.cuda is not None:
            t = sys.modules["torch"]
            self.getdev = getattr(t._C, "_cuda_getDevice", None) or t.cuda.current_device
            raw = getattr(t._C, "_cuda_getCurrentRawStream", None)
            self.stream = raw or (lambda d: t.cuda.current_stream(d).cuda_stream)
        # a host call that resolved "auto" from LTK_BACKEND: a change of it takes the full path
        self.host_ref = None
        if not ctx.is_cuda and ctx.auto_from_env:
            self.host_ref = ctx.backend == _ffi.BACKEND_REF
        self.ranges = tuple(ranges)
        self.state_off = offs[state_field] // 8 if state_field is not None else -1
        self.busy = False
        self.extra = extra
        self.call = self._compile(len(arrs), outs)

    def _compile(self, n, outs):
        """call(arrs, ptrs, state=None) for this plan: write the scanned pointers into the records,
        run the per-call checks, allocate the missing outputs, call C; the output (one `outs` slot) or
        the tuple of them, or MISS when a per-call check says: take the full path. Written out as
        source once, this plan's constants bound and its loops unrolled. Why: against the
        same steps as loops over the slots (tiny decode shapes, CPU backend and torch CPU tensors,
        the development VM, interleaved batches of 400 calls, six rounds): out= and workspace=
        given 15.3 -> 15.2 us best / 16.0 -> 15.3 median, neither given 16.1 -> 15.8 / 16.9 -> 16.0,
        the bare C call 8.6-8.7 either way."""
        L = ["def call(arrs, ptrs, state=None):",
             "    if plan.busy:",
             "        return MISS"]
        L.append("    " + ", ".join(f"p{i}" for i in range(n)) + (", = ptrs" if n == 1 else " = ptrs"))
        byal = {}
        for i, al in enumerate(self.aligns):
            if al > 1:
                byal.setdefault(al, []).append(i)
        for al, idx in sorted(byal.items()):
            L.append(f"    if ({' | '.join(f'p{i}' for i in idx)}) & {al - 1}:")
            L.append("        return MISS")
        alloc_slots = {i for i, _, _ in self.allocs}
        for i, off in enumerate(self.offs):
            if off >= 0 and i not in alloc_slots:
                L.append(f"    mv[{off}] = p{i}")
        if self.host_ref is not None:
            L.append(f"    if env_ref() != {self.host_ref!r}:")
            L.append("        return MISS")
        if self.cuda is not None:
            L.append(f"    if getdev() != {self.cuda}:")
            L.append("        return MISS")
            L.append(f"    emv[{_E_STREAM}] = stream({self.cuda})")
        for lo, hi, length in self.ranges:
            L.append(f"    if not ranges_ok(arrs[{lo}], arrs[{hi}], {length}):")
            L.append("        return MISS")
        if self.state_off >= 0:
            L.append("    h = state._handle.value")
            L.append("    if not h:")
            L.append("        return MISS")
            L.append(f"    mv[{self.state_off}] = h")
        env = {"plan": self, "MISS": MISS, "mv": self.mv, "emv": self.emv, "env_ref": env_ref,
               "getdev": self.getdev, "stream": self.stream, "ranges_ok": ranges_ok, "run": self.run,
               "pa": self.pa, "pe": self.pe, "check": _ffi.check, "HITS": HITS, "name": self.name,
               "np_empty": np.empty, "np_ptr": np_ptr}
        for i, shape, dt in self.allocs:
            if dt is None:  # torch: shape is the expanded template
                env["empty_like"] = sys.modules["torch"].empty_like
                env[f"t{i}"] = shape
                L.append(f"    o{i} = empty_like(t{i})")
                ptr = f"o{i}.data_ptr()"
            else:
                env[f"s{i}"], env[f"d{i}"] = shape, dt
                L.append(f"    o{i} = np_empty(s{i}, d{i})")
                ptr = f"np_ptr(o{i})"
            if self.offs[i] >= 0:
                L.append(f"    mv[{self.offs[i]}] = {ptr}")
        if self.ws_slot is not None:
            w = self.ws_slot
            L.append(f"    emv[{_E_WS}] = p{w}")
            L.append(f"    emv[{_E_WS_BYTES}] = plan.ws_bytes if p{w} else 0")
        L += ["    plan.busy = True",
              "    try:",
              "        st = run(pa, pe)",
              "    finally:",
              "        plan.busy = False",
              "    if st:",
              "        check(st, name)",
              "    HITS[0] += 1"]
        ret = [f"o{i}" if i in alloc_slots else f"arrs[{i}]" for i in outs]
        L.append("    return " + (ret[0] if len(ret) == 1 else "(" + ", ".join(ret) + ")"))
        exec(compile("\n".join(L) + "\n", f"<litetopk plan {self.name}>", "exec"), env)
        return env["call"]


_ENV = getattr(os.environ, "_data", None)


def env_ref() -> bool:
    """LTK_BACKEND == "ref", read as the full path reads it (os.environ): from its dict, ~40 ns
    against ~600 ns for os.environ.get (timeit here)."""
    if _ENV is not None and os.name == "posix":
        return _ENV.get(b"LTK_BACKEND") == b"ref"
    return os.environ.get("LTK_BACKEND") == "ref"


def _nbytes(w) -> int:
    if type(w) is _ND:
        return int(w.nbytes)
    return w.numel() * w.element_size()


_MIN, _MAX, _ANY, _LESS = np.minimum.reduce, np.maximum.reduce, np.logical_or.reduce, np.less


def ranges_ok(lo, hi, length) -> bool:
    """0 <= lo <= hi <= length everywhere (host int32 vectors, numpy or torch CPU). Short vectors
    through Python lists: 5 rows 1.2 us against 3.1 us for the numpy reductions and 1.3 us more to
    view a torch tensor as numpy (timeit here)."""
    if lo.shape[0] <= 64:
        return all(0 <= a <= b <= length for a, b in zip(lo.tolist(), hi.tolist()))
    if type(lo) is not _ND:
        lo, hi = lo.detach().numpy(), hi.detach().numpy()
    return bool(_MIN(lo) >= 0 and _MAX(hi) <= length and not _ANY(_LESS(hi, lo)))


def remember(key, make):
    """Caches make() under key; a layout the plan cannot represent is simply not cached."""
    d = plans()
    try:
        p = make()
    except ValueError:
        return
    if len(d) >= MAX_PLANS:
        del d[next(iter(d))]
    d[key] = p
