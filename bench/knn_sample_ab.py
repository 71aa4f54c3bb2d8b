#!/usr/bin/env python3
"""A/B of the kNN threshold's sample size and candidate target in one process (the library reads
LTK_CUDA_KNN_SAMPLE_MUL and LTK_CUDA_KNN_CAND_PCT at every call): for each shape and k, every
setting in turn, several rounds, median of the rounds' medians; with the fused call's candidates a
query, fallback rows, and whether the answer equals the first setting's bit for bit.
    python3 bench/knn_sample_ab.py --N 1048576 --k 128,1024,4096,8192 --set 32:200,16:300
"""
import argparse
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_ltk_ctypes import Lib, Stats, commit, copy_gbps, time_ms  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--B", type=int, default=64)
ap.add_argument("--N", default="1048576")
ap.add_argument("--D", type=int, default=768)
ap.add_argument("--k", default="128,1024,4096,8192")
ap.add_argument("--set", default="32:200,16:300", help="SAMPLE_MUL:CAND_PCT pairs")
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--json", default=None)
a = ap.parse_args()
torch.manual_seed(0)
lib = Lib()
cg = copy_gbps()
out = open(a.json, "a") if a.json else None
sets = [tuple(int(v) for v in s.split(":")) for s in a.set.split(",")]
Ns = [int(v) for v in a.N.split(",")]
xall = torch.randn(max(Ns), a.D, device="cuda", dtype=torch.bfloat16)
q = torch.randn(a.B, a.D, device="cuda", dtype=torch.bfloat16)


def use(s):
    os.environ["LTK_CUDA_KNN_SAMPLE_MUL"], os.environ["LTK_CUDA_KNN_CAND_PCT"] = str(s[0]), str(s[1])


for N in Ns:
    x = xall[:N]
    floor = N * a.D * 2 / (cg * 1e6)
    for k in [int(v) for v in a.k.split(",")]:
        oi = torch.empty(a.B, k, dtype=torch.int64, device="cuda")
        osc = torch.empty(a.B, k, dtype=torch.float32, device="cuda")
        first, info, times = None, {}, {s: [] for s in sets}
        for s in sets:
            use(s)
            st = Stats()
            oi.fill_(-7)
            lib.knn(q, x, k, oi, osc, algo="fused", stats=st)
            res = (oi.clone(), osc.clone())
            if first is None:
                first = res
            same = bool(torch.equal(first[0], res[0])) and bool(torch.equal(first[1], res[1]))
            info[s] = dict(candidates_mean=st.candidates / a.B, candidates_max=st.candidates_max,
                           fallback_rows=st.fallback_rows, same_as_first=same)
        for _ in range(a.rounds):
            for s in sets:
                use(s)
                times[s].append(time_ms(lambda: lib.knn(q, x, k, oi, osc, algo="fused"), reps=10))
        for s in sets:
            ms = statistics.median(times[s])
            r = dict(op="knn", algo="fused", B=a.B, N=N, D=a.D, k=k, sample_mul=s[0], cand_pct=s[1], median_ms=ms,
                     x_floor=ms / floor, copy_GBps=cg, rounds=[round(t, 4) for t in times[s]], commit=commit(), **info[s])
            print(json.dumps(r), flush=True)
            if out:
                out.write(json.dumps(r) + "\n")
        del oi, osc
        torch.cuda.empty_cache()
for v in ("LTK_CUDA_KNN_SAMPLE_MUL", "LTK_CUDA_KNN_CAND_PCT"):
    os.environ.pop(v, None)
