#!/usr/bin/env python3
"""Small corpora (issue 22, the retrieval case): `litetopk.knn_topk` against cuBLAS GEMM + torch.topk, one process.

N in {100K, 200K}, D in {100, 384}, B in {1, 64, 1000}, k in {10, 100, 1000}, float32 and bfloat16
inner products. Both sides take the same torch tensors through their public Python calls, each timed
alone (CUDA events around one call, then a sync; the median of 20 after warm-up). The baseline is what
a torch user writes: `torch.topk(q @ x.T, k)` (its GEMM in the input dtype, as torch runs it). Each
line has the time of both and litetopk's recall against the baseline's set on fp32 scores of the same
inputs (rounding of near-equal scores may swap members at the k-th place: 1.0 means the same set).
Both algos are timed (fused and materialize), to place the crossover between them.
  python3 bench/gpu_knn_small.py --json bench/results/h200/knn.jsonl [--quick]
"""
import argparse
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from gpu_bench_util import commit, time_ms  # noqa: E402  (puts python/ on sys.path)
from benchio import emit_jsonl  # noqa: E402
import litetopk  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    out = open(args.json, "a") if args.json else None
    dev = torch.cuda.get_device_name()
    Ns = [100_000, 200_000] if not args.quick else [100_000]
    Ds = [100, 384]
    Bs = [1, 64, 1000]
    Ks = [10, 100, 1000]
    dts = [torch.float32, torch.bfloat16]
    torch.manual_seed(0)
    for dt in dts:
        for N in Ns:
            for D in Ds:
                x = torch.randn(N, D, device="cuda").div_(D ** 0.5).to(dt)
                for B in Bs:
                    q = torch.randn(B, D, device="cuda").div_(D ** 0.5).to(dt)
                    ref_s = q.float() @ x.float().T
                    for k in Ks:
                        s, i = litetopk.knn_topk(q, x, k)
                        want = torch.topk(ref_s, k, dim=1).indices
                        hit = sum(len(set(a.tolist()) & set(b.tolist())) for a, b in zip(i, want))
                        recall = hit / (B * k)
                        tms = time_ms(lambda: torch.topk(q @ x.T, k, dim=1), reps=20, warmup=3)
                        for algo in ("fused", "materialize"):
                            ms = time_ms(lambda: litetopk.knn_topk(q, x, k, algo=algo), reps=20, warmup=3)
                            emit_jsonl(dict(op="knn", backend="cuda", algo=algo, harness="bench/gpu_knn_small.py",
                                            B=B, N=N, D=D, k=k, dtype=str(dt).replace("torch.", ""), metric="ip",
                                            median_ms=ms, torch_ms=tms, speedup_vs_torch=tms / ms,
                                            recall_vs_torch=recall, device=dev, commit=commit(), path="python"), out)
                    del ref_s, q
                del x
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
