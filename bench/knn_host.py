#!/usr/bin/env python3
"""Where a kNN call's time goes on the host: how long one call takes to enqueue its work, through
the benchmark's ctypes helper (its arguments built anew, or replayed by GpuCalls.knn_prepared) and
through the bare C entry point with its arguments built once, and what that adds to a call timed
alone (events around one call, then a sync: how the tables time) against calls issued back to back
(the GPU never waits for the host).
    python3 bench/knn_host.py --B 64 --N 1048576 --k 1024,8192
Enqueue times are taken while the GPU is kept busy (torch.cuda._sleep), so no call waits on it."""
import ctypes as C
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_bench_util import GpuCalls, knn_args, knn_shape_args, randn_knn, time_ms  # noqa: E402
from litetopk import _ffi  # noqa: E402  (python/ put on sys.path by gpu_bench_util)

ap = knn_shape_args()
ap.add_argument("--reps", type=int, default=30)
a = ap.parse_args()
x, q = randn_knn(a)
lib = GpuCalls()


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def enqueue_us(fn, reps):
    """Host time of fn() while the stream is busy: the GPU is ~20 ms behind, so nothing waits on it."""
    ts = []
    for _ in range(reps):
        torch.cuda._sleep(20_000_000)
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) * 1e6)
        torch.cuda.synchronize()
    return median(ts)


def back_to_back_ms(fn, n=20):
    fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n):
        fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / n


for k in [int(v) for v in a.k.split(",")]:
    oi = torch.empty(a.B, k, dtype=torch.int64, device="cuda")
    osc = torch.empty(a.B, k, dtype=torch.float32, device="cuda")
    uncached = lambda: lib.knn(q, x, k, oi, osc, algo="fused")  # noqa: E731 (builds them every call)
    helper = lib.knn_prepared(q, x, k, oi, osc, algo="fused")  # (replays them)
    # the bare entry point: arguments, execution record and workspace built once
    args = knn_args(q, x, k, oi, osc)
    ex = lib.exec_record(_ffi.ALGO_FUSED)
    ws = lib.workspace("knn_fused")  # (sized by knn_prepared's checked call)
    ex.workspace, ex.workspace_bytes = ws.data_ptr(), ws.numel()
    fn_c, pa, pe = lib.lib.ltk_knn_topk, C.byref(args), C.byref(ex)
    bare = lambda: fn_c(pa, pe)  # noqa: E731
    _ffi.check(bare(), "bare ltk_knn_topk")
    r = dict(k=k)
    r["enqueue_us_uncached"] = enqueue_us(uncached, a.reps)
    r["enqueue_us_helper"] = enqueue_us(helper, a.reps)
    r["enqueue_us_bare"] = enqueue_us(bare, a.reps)
    r["alone_ms_uncached"] = time_ms(uncached, reps=a.reps)
    r["alone_ms_helper"] = time_ms(helper, reps=a.reps)
    r["alone_ms_bare"] = time_ms(bare, reps=a.reps)
    r["back_to_back_ms_helper"] = median([back_to_back_ms(helper) for _ in range(3)])
    r["back_to_back_ms_bare"] = median([back_to_back_ms(bare) for _ in range(3)])
    print(f"B={a.B} N={a.N} k={k}: " + ", ".join(f"{n} {v:.4g}" for n, v in r.items() if n != "k"), flush=True)
