#!/usr/bin/env python3
"""Where one kNN call's time goes on the GPU: the kernels of a fused call, their durations and the
idle gaps between them, recorded with the torch profiler (CUPTI) around a few calls of one shape.
    python3 bench/knn_timeline.py --B 64 --N 1048576 --k 1024,8192 [--algo fused]
Prints, for the last call of each k: wall time (first kernel start to last kernel end), busy time,
and one line per kernel (start offset, duration, name)."""
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_bench_util import GpuCalls, knn_shape_args, randn_knn, time_ms  # noqa: E402

ap = knn_shape_args()
ap.add_argument("--algo", default="fused")
ap.add_argument("--host", action="store_true", help="also the CUDA runtime calls of the last call on the host side")
a = ap.parse_args()
x, q = randn_knn(a)
lib = GpuCalls()
for k in [int(v) for v in a.k.split(",")]:
    oi = torch.empty(a.B, k, dtype=torch.int64, device="cuda")
    osc = torch.empty(a.B, k, dtype=torch.float32, device="cuda")
    call = lambda: lib.knn(q, x, k, oi, osc, algo=a.algo)  # noqa: E731
    ms = time_ms(call, reps=10)
    torch.cuda.synchronize()
    acts = [ProfilerActivity.CUDA] + ([ProfilerActivity.CPU] if a.host else [])
    with profile(activities=acts) as prof:
        for _ in range(3):
            call()
            torch.cuda.synchronize()
    allev = list(prof.events())
    ev = [e for e in allev if e.device_type == torch.autograd.DeviceType.CUDA]
    ev.sort(key=lambda e: e.time_range.start)
    # the last call: kernels after the last gap longer than 1 ms (the host sync between calls)
    last = 0
    for i in range(1, len(ev)):
        if ev[i].time_range.start - ev[i - 1].time_range.end > 1000:
            last = i
    ev = ev[last:]
    t0 = ev[0].time_range.start
    busy = sum(e.time_range.end - e.time_range.start for e in ev)
    wall = ev[-1].time_range.end - t0
    print(f"B={a.B} N={a.N} k={k} {a.algo}: event-timed {ms:.3f} ms; kernels {len(ev)}, span {wall / 1e3:.3f} ms, busy {busy / 1e3:.3f} ms")
    prev = t0
    for e in ev:
        s = e.time_range.start - t0
        d = e.time_range.end - e.time_range.start
        gap = e.time_range.start - prev
        prev = max(prev, e.time_range.end)
        print(f"  +{s:8.1f} us  gap {gap:6.1f}  {d:8.1f} us  {e.name[:90]}")
    if a.host:  # the runtime calls from the last call's first kernel launch on (same clock as the GPU's)
        hv = [e for e in allev if e.device_type == torch.autograd.DeviceType.CPU and e.name.startswith("cu")]
        hv.sort(key=lambda e: e.time_range.start)
        hv = [e for e in hv if e.time_range.start >= t0 - 200 and e.time_range.start <= ev[-1].time_range.end]
        print(f"  host: {len(hv)} runtime calls")
        for e in hv:
            print(f"  host +{e.time_range.start - t0:8.1f} us  {e.time_range.end - e.time_range.start:7.1f} us  {e.name[:60]}")
