#!/usr/bin/env python3
"""A few kNN calls of one shape, nothing else: a target for a kernel profiler (ncu / nsys).
    ncu --kernel-name regex:ks_score --launch-skip 1 --launch-count 1 python3 bench/knn_once.py --B 64
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_bench_util import GpuCalls, knn_shape_args, randn_knn  # noqa: E402

ap = knn_shape_args(N=5 << 20, k=1024)
ap.add_argument("--algo", default="score_only")
ap.add_argument("--calls", type=int, default=3)
a = ap.parse_args()
x, q = randn_knn(a)
oi = torch.empty(a.B, a.k, dtype=torch.int64, device="cuda")
osc = torch.empty(a.B, a.k, dtype=torch.float32, device="cuda")
lib = GpuCalls()
for _ in range(a.calls):
    lib.knn(q, x, a.k, oi, osc, algo=a.algo)
torch.cuda.synchronize()
