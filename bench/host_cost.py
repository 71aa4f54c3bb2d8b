#!/usr/bin/env python3
"""Where a call's time goes on the host, per operation, Python and C, with and without a workspace.

For each case (decode, kNN, select, the indexer (fp8_mqa_topk) and prefill at the shapes serving runs
them) and each path:
  c        the bare C entry point through ctypes, arguments and execution record built once
  python   the public litetopk call as a user writes it
each with a workspace passed in (c_ws, python_ws: outputs passed as out= too) and without one
(c_nows, python_nows: the library's own pool / torch's allocator), it measures
  enqueue_us  host time of one call while the stream is held by a host function (libc usleep through
              cudaLaunchHostFunc, as `litetopk bench` holds it), so no call waits for the GPU: what
              the host adds (planning, argument building, launches, allocations; a synchronisation
              shows as the held time). Without libcudart at hand, behind torch.cuda._sleep instead,
              which makes each launch several times dearer (a kernel is running)
  alone_ms    CUDA events around one call from an idle GPU, synchronised after each
  enqueue_loop_us  host time a call over 30 calls issued in a row behind one hold (warm host)
  b2b_ms      GPU time a call over 20 calls issued back to back

    python3 bench/host_cost.py --json bench-host.jsonl [--cases decode,knn_small,knn_large,select,indexer,prefill]
                               [--trace] [--profile] [--parts]

--trace also lists, for one call of each path, the CUDA runtime calls it made on the host with their
durations (the torch profiler's CUPTI view, which sees every library in the process): where the
enqueue time goes (launches, attribute sets, allocations, synchronisations).
--parts times, for the decode case, each host step of a cached-plan call on its own (timeit, no
launch): what the binding's share of python minus c is made of.
"""
import argparse
import ctypes as C
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_bench_util import commit, time_ms  # noqa: E402  (puts the checkout's python/ on sys.path)
from benchio import emit_jsonl  # noqa: E402
from decode_torch import make as make_decode  # noqa: E402
import litetopk  # noqa: E402
from litetopk import _ffi, _ops  # noqa: E402


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def _hold_fn():
    """hold(): the current stream waits ~20 ms on the host (cudaLaunchHostFunc(usleep, 20000)); None
    when no libcudart is found (torch's wheels carry one under nvidia/)."""
    import glob
    import site
    paths = []
    for d in site.getsitepackages() + [os.path.dirname(torch.__file__)]:
        paths += glob.glob(os.path.join(d, "nvidia", "*", "lib", "libcudart.so*"))
        paths += glob.glob(os.path.join(d, "nvidia", "cuda_runtime", "lib", "libcudart.so*"))
        paths += glob.glob(os.path.join(d, "lib", "libcudart.so*"))
    for p in paths:
        try:
            rt = C.CDLL(p)
            f = rt.cudaLaunchHostFunc
        except (OSError, AttributeError):
            continue
        f.argtypes = [C.c_void_p, C.c_void_p, C.c_void_p]
        usleep = C.cast(C.CDLL(None).usleep, C.c_void_p)

        def hold():
            rc = f(C.c_void_p(torch.cuda.current_stream().cuda_stream), usleep, C.c_void_p(20000))
            if rc:
                raise RuntimeError(f"cudaLaunchHostFunc: {rc}")
        return hold
    return None


HOLD = None


def enqueue_us(fn, reps):
    ts = []
    for _ in range(reps):
        if HOLD:
            HOLD()
        else:
            torch.cuda._sleep(50_000_000)  # ~25 ms of GPU spin at ~2 GHz: the call enqueues behind it
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) * 1e6)
        torch.cuda.synchronize()
    return median(ts)


def enqueue_loop_us(fn, n=30, reps=5):
    """Host time a call over n calls issued in a row behind one hold (a serving loop whose host runs
    ahead of the GPU: warm caches and clocks), the median over reps loops. Why beside enqueue_us: one
    call after a 20 ms wait pays a cold host (caches, clock), far more for the Python path, which
    touches more code and data, than for the C one."""
    ts = []
    for _ in range(reps):
        if HOLD:
            HOLD()
        else:
            torch.cuda._sleep(50_000_000)
        t = time.perf_counter()
        for _ in range(n):
            fn()
        ts.append((time.perf_counter() - t) * 1e6 / n)
        torch.cuda.synchronize()
    return median(ts)


def b2b_ms(fn, n=20):
    fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n):
        fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / n


def parts_decode(B=64, ctx=65536, next_n=1, k=2048, n=20000):
    """Host cost of each step of a decode call that hits its cached plan (python/litetopk/_fast.py),
    timed alone in a loop of n on the call's own arrays; printed, one line a step (us a call)."""
    import timeit
    from litetopk import _fast
    cache, table, q, w, seq = make_decode(B, ctx, next_n, 64, 128, 64, 1)
    ws = ws_for("decode", q, cache, w, seq, table, k, block_kv=64)
    out = torch.empty(B * next_n, k, dtype=torch.int32, device="cuda")
    litetopk.decode_topk(q, cache, w, seq, table, k, block_kv=64)
    litetopk.decode_topk(q, cache, w, seq, table, k, block_kv=64, out=out, workspace=ws)
    torch.cuda.synchronize()
    sv = (k, 64, 0, False, False, False, "auto", "fused", None, 0)
    a_now = (q, cache, w, seq, table, None, None, None)
    a_ws = (q, cache, w, seq, table, out, None, ws)
    sk = _fast.scalars_key(sv)
    s_now = _fast.scan(a_now)
    key = ("decode", sk, *s_now[0])
    plan = _fast.find("decode", key)
    tmpl = plan.allocs[0][1] if plan and plan.allocs else None
    dev = torch.cuda.current_device()
    steps = {
        "scalars_key": lambda: _fast.scalars_key(sv),
        "out_pair": lambda: _ops._out_pair(None),
        "scan nows": lambda: _fast.scan(a_now),
        "scan ws": lambda: _fast.scan(a_ws),
        "key tuple": lambda: ("decode", sk, *s_now[0]),
        "find (last, equal)": lambda: _fast.find("decode", ("decode", sk, *s_now[0])),
        "getdev": plan.getdev if plan else (lambda: None),
        "stream": (lambda: plan.stream(dev)) if plan else (lambda: None),
        "empty_like out": (lambda: torch.empty_like(tmpl)) if tmpl is not None else (lambda: None),
        "data_ptr": lambda: q.data_ptr(),
        "x.shape": lambda: q.shape,
        "x.stride()": lambda: q.stride(),
        "x.device": lambda: q.device,
        "x.dtype": lambda: q.dtype,
    }
    print(f"  parts decode B={B} ctx={ctx} (plan found: {plan is not None}):")
    for name, fn in steps.items():
        t = min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6
        print(f"    {name:22s} {t:6.3f} us")
    # whole calls, each form of out= / workspace= given, interleaved (the host drifts by a few us
    # between runs): enqueue_loop_us medians over 15 rounds
    a, ctxo, ia, sca = _ops._decode_prepare(q, cache, w, seq, table, k, 64, 0, False, False, False, None, "auto",
                                            "fused", None, 0, None)
    run_fn, ws_fn = _ffi.entry("ltk_decode_topk"), _ffi.entry("ltk_decode_workspace_size")
    calls = {
        "python out= ws=": lambda: litetopk.decode_topk(q, cache, w, seq, table, k, block_kv=64, out=out, workspace=ws),
        "python out=": lambda: litetopk.decode_topk(q, cache, w, seq, table, k, block_kv=64, out=out),
        "python ws=": lambda: litetopk.decode_topk(q, cache, w, seq, table, k, block_kv=64, workspace=ws),
        "python": lambda: litetopk.decode_topk(q, cache, w, seq, table, k, block_kv=64),
        "c ws": bare(run_fn, ws_fn, a, ctxo, True),
        "c": bare(run_fn, ws_fn, a, ctxo, False),
    }
    for fn in calls.values():
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    got = {name: [] for name in calls}
    for _ in range(15):
        for name, fn in calls.items():
            got[name].append(enqueue_loop_us(fn, n=20, reps=1))
    for name in calls:
        print(f"    call {name:18s} {median(got[name]):6.2f} us (enqueue_loop_us, median of 15 interleaved rounds)")
    del ia, sca


def trace(fn, label):
    """The runtime calls (cuda*/cu*) of one call, host durations, from the torch profiler."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        torch.cuda._sleep(20_000_000)
        t0 = time.perf_counter()
        fn()
        wall = (time.perf_counter() - t0) * 1e6
        torch.cuda.synchronize()
    ev = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CPU and e.name.startswith("cu")]
    ev.sort(key=lambda e: e.time_range.start)
    # the call's own: after the _sleep kernel's launch, before torch's closing cudaDeviceSynchronize
    ev = ev[1:]
    while ev and ev[-1].name.startswith("cudaDeviceSynchronize"):
        ev.pop()
    tot = sum(e.time_range.end - e.time_range.start for e in ev)
    print(f"  trace {label}: {wall:.1f} us under the profiler, {len(ev)} runtime calls, {tot:.1f} us inside them")
    if ev:
        t0 = ev[0].time_range.start
        for e in ev:
            print(f"    +{e.time_range.start - t0:7.1f} us {e.time_range.end - e.time_range.start:6.1f} us  {e.name[:70]}")


def bare(run_fn, ws_fn, args, ctx, with_ws):
    """The C entry point with everything built once (the workspace from torch, when with_ws)."""
    e = ctx.exec()
    keep = None
    if with_ws:
        n = C.c_size_t(0)
        _ffi.check(ws_fn(C.byref(args), C.byref(e), C.byref(n)), "workspace size")
        keep = torch.empty(max(n.value, 1), dtype=torch.uint8, device="cuda")
        e.workspace, e.workspace_bytes = keep.data_ptr(), n.value
    pa, pe = C.byref(args), C.byref(e)

    def call():
        _ffi.check(run_fn(pa, pe), "bare call")
    call.keep = (keep, e, args)
    return call


def ws_for(op, *args, **kw):
    return torch.empty(max(litetopk.workspace_size(op, *args, **kw), 1), dtype=torch.uint8, device="cuda")


def case_decode(B=64, ctx=65536, next_n=1, k=2048):
    cache, table, q, w, seq = make_decode(B, ctx, next_n, 64, 128, 64, 1)
    kw = dict(block_kv=64)
    py_nows = lambda: litetopk.decode_topk(q, cache, w, seq, table, k, **kw)  # noqa: E731
    ws = ws_for("decode", q, cache, w, seq, table, k, **kw)
    out = torch.empty(B * next_n, k, dtype=torch.int32, device="cuda")
    py_ws = lambda: litetopk.decode_topk(q, cache, w, seq, table, k, out=out, workspace=ws, **kw)  # noqa: E731
    a, ctxo, ia, sca = _ops._decode_prepare(q, cache, w, seq, table, k, 64, 0, False, False, False, None, "auto",
                                            "fused", None, 0, None)
    run_fn, ws_fn = _ffi.entry("ltk_decode_topk"), _ffi.entry("ltk_decode_workspace_size")
    return (f"decode B={B} ctx={ctx} next_n={next_n} k={k}", py_nows, py_ws,
            bare(run_fn, ws_fn, a, ctxo, True), bare(run_fn, ws_fn, a, ctxo, False), (ia,))


def case_knn(B, N, D, k, dtype):
    torch.manual_seed(0)
    x = torch.randn(N, D, device="cuda", dtype=dtype)
    qq = torch.randn(B, D, device="cuda", dtype=dtype)
    py_nows = lambda: litetopk.knn_topk(qq, x, k)  # noqa: E731
    ws = ws_for("knn", qq, x, k)
    out = (torch.empty(B, k, dtype=torch.float32, device="cuda"), torch.empty(B, k, dtype=torch.int64, device="cuda"))
    py_ws = lambda: litetopk.knn_topk(qq, x, k, out=out, workspace=ws)  # noqa: E731
    a, ctxo, sca, ia = _ops._knn_prepare(qq, x, k, "ip", True, None, "auto", "fused", None, 0, None)
    L = _ffi.lib()
    return (f"knn B={B} N={N} D={D} k={k} {str(dtype)[6:]}", py_nows, py_ws,
            bare(L.ltk_knn_topk, L.ltk_knn_workspace_size, a, ctxo, True),
            bare(L.ltk_knn_topk, L.ltk_knn_workspace_size, a, ctxo, False), (x, qq, sca, ia))


def case_select(rows=64, cols=1 << 20, k=2048):
    s = torch.randn(rows, cols, device="cuda")
    py_nows = lambda: litetopk.select_topk(s, k)  # noqa: E731
    ws = ws_for("select", s, k)
    out = (torch.empty(rows, k, dtype=torch.float32, device="cuda"), torch.empty(rows, k, dtype=torch.int32,
                                                                                 device="cuda"))
    py_ws = lambda: litetopk.select_topk(s, k, out=out, workspace=ws)  # noqa: E731
    r = _ops._select_prepare(s, k, None, None, True, True, None, "auto", "fused", None, 0, None)
    a, ctxo = r[0], r[1]
    L = _ffi.lib()
    return (f"select {rows}x{cols} k={k}", py_nows, py_ws, bare(L.ltk_select_topk, L.ltk_select_workspace_size, a,
                                                                  ctxo, True),
            bare(L.ltk_select_topk, L.ltk_select_workspace_size, a, ctxo, False), (s, r))


def _indexer_inputs(T, S, H=64, D=128, seed=0):
    """FP8 indexer inputs as vLLM holds them (bench/dsa_torch.py's make, without its triton import)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    kf = torch.randn(S, D, generator=g, device="cuda")
    ksc = (kf.abs().amax(dim=1).clamp(min=1e-6) / 448.0).float()
    kv = (kf / ksc[:, None]).to(torch.float8_e4m3fn)
    q = torch.randn(T, H, D, generator=g, device="cuda").to(torch.float8_e4m3fn)
    w = (torch.randn(T, H, generator=g, device="cuda") * (D ** -0.5) * (H ** -0.5)).float()
    return q, kv, ksc, w


def case_indexer(T=256, S=65536, k=2048):
    q, kv, ksc, w = _indexer_inputs(T, S)
    ks = torch.zeros(T, dtype=torch.int32, device="cuda")
    ke = (S - T + 1 + torch.arange(T, device="cuda", dtype=torch.int32)).to(torch.int32)
    py_nows = lambda: litetopk.fp8_mqa_topk((q, None), (kv, ksc), w, ks, ke, k)  # noqa: E731
    ws = ws_for("fp8_mqa", (q, None), (kv, ksc), w, ks, ke, k)
    out = torch.empty(T, k, dtype=torch.int32, device="cuda")
    py_ws = lambda: litetopk.fp8_mqa_topk((q, None), (kv, ksc), w, ks, ke, k, out=out, workspace=ws)  # noqa: E731
    r = _ops._indexer_prepare(q, kv, ksc, w, ks, ke, k, True, False, False, None, None, "auto", "fused", None, 0,
                              None)
    L = _ffi.lib()
    return (f"indexer T={T} S={S} k={k}", py_nows, py_ws,
            bare(L.ltk_indexer_topk, L.ltk_indexer_workspace_size, r[0], r[1], True),
            bare(L.ltk_indexer_topk, L.ltk_indexer_workspace_size, r[0], r[1], False), (q, kv, ksc, w, ks, ke, r))


def case_prefill(L=8192, m=4, k=512):
    """One chunk (chunk = L): the CUDA driver waits for a chunk before staging the next one's ranges,
    so its enqueue_us includes a wait on the held stream; python minus c is still the binding's."""
    q, kv, ksc, w = _indexer_inputs(L, L // m)
    kw = dict(m=m, chunk=L)
    py_nows = lambda: litetopk.prefill(q, kv, ksc, w, k, **kw)  # noqa: E731
    ws = ws_for("prefill", q, kv, ksc, w, k, **kw)
    out = torch.empty(L, k, dtype=torch.int32, device="cuda")
    py_ws = lambda: litetopk.prefill(q, kv, ksc, w, k, out=out, workspace=ws, **kw)  # noqa: E731
    r = _ops._prefill_prepare(q, kv, ksc, w, k, m, L, 0, False, False, None, True, None, False, "auto", "fused",
                              None, 0, None)
    run_fn, ws_fn = _ffi.entry("ltk_prefill_run"), _ffi.entry("ltk_prefill_workspace_size")
    return (f"prefill L={L} m={m} k={k} chunk={L}", py_nows, py_ws, bare(run_fn, ws_fn, r[0], r[1], True),
            bare(run_fn, ws_fn, r[0], r[1], False), (q, kv, ksc, w, r))


CASES = {
    "decode": lambda: case_decode(),
    "decode_b8_1m": lambda: case_decode(B=8, ctx=1 << 20),
    "knn_small": lambda: case_knn(64, 100_000, 100, 10, torch.float32),
    "knn_large": lambda: case_knn(64, 1 << 20, 768, 1024, torch.bfloat16),
    "select": lambda: case_select(),
    "indexer": lambda: case_indexer(),
    "prefill": lambda: case_prefill(),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="decode,knn_small,knn_large,select,indexer,prefill")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--json", default=None)
    ap.add_argument("--trace", action="store_true")
    ap.add_argument("--parts", action="store_true", help="timeit of each host step of a cached decode call")
    ap.add_argument("--profile", action="store_true", help="cProfile of the Python paths' own work (top 12)")
    a = ap.parse_args()
    global HOLD
    HOLD = _hold_fn()
    if a.parts:
        parts_decode()
    out = open(a.json, "a") if a.json else None
    dev = torch.cuda.get_device_name()
    for name in a.cases.split(","):
        what, py_nows, py_ws, c_ws, c_nows, _keep = CASES[name]()
        paths = {"c_ws": c_ws, "c_nows": c_nows, "python_ws": py_ws, "python_nows": py_nows}
        for fn in paths.values():  # warm: pools, caches, attributes, clocks
            for _ in range(3):
                fn()
        torch.cuda.synchronize()
        from litetopk import _fast
        h0 = _fast.HITS[0]
        for _ in range(10):
            py_ws()
        print(f"  {name}: {_fast.HITS[0] - h0} of 10 python_ws calls answered by a cached plan", flush=True)
        for p, fn in paths.items():
            rec = dict(op="host", harness="bench/host_cost.py", case=name, shape=what, path=p.split("_")[0],
                       workspace=p.endswith("_ws"), enqueue_us=enqueue_us(fn, a.reps),
                       enqueue_loop_us=enqueue_loop_us(fn),
                       alone_ms=time_ms(fn, reps=a.reps), b2b_ms=median([b2b_ms(fn) for _ in range(3)]),
                       hold="host function" if HOLD else "torch.cuda._sleep",
                       device=dev, commit=commit(), date=time.strftime("%Y-%m-%d"), torch=torch.__version__)
            emit_jsonl(rec, out)
            if a.trace:
                trace(fn, f"{name} {p}")
            if a.profile and p.startswith("python"):
                import cProfile
                import pstats
                pr = cProfile.Profile()
                pr.enable()
                for _ in range(300):
                    fn()
                pr.disable()
                torch.cuda.synchronize()
                print(f"  profile {name} {p} (300 calls):")
                pstats.Stats(pr).sort_stats("tottime").print_stats(12)
        del _keep, paths, py_nows, py_ws, c_ws, c_nows
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
