#!/usr/bin/env python3
"""The MiniLM set's exactness, GPU against the CPU backend: `litetopk knn` results of both (indices
.npy with scores beside) compared row by row, and each against float64 scores of the same inputs.
    python3 bench/minilm_compare.py --base B.fbin --queries Q.fbin --metric cos --k 10,100,1000,10000 \
        --res DIR          (DIR/cuda-K.npy, DIR/cpu-K.npy and their .scores.npy, from `litetopk knn`)
Per k it prints and (--json) writes: rows with identical index lists, rows whose sets differ, and
for those whether every difference is a tie (both keys within --tol of the row's float64 k-th
score); keys either side missed (a float64 score above the k-th + tol left out: must be 0); the
largest difference between the two backends' reported scores of a shared key, and between the
reported and the float64 scores."""
import argparse

import numpy as np
from benchio import emit_jsonl, read_fbin


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--metric", default="cos", choices=["ip", "cos"])
    ap.add_argument("--k", default="10,100,1000,10000")
    ap.add_argument("--res", required=True)
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    x = read_fbin(a.base).astype(np.float64)
    q = read_fbin(a.queries).astype(np.float64)
    if a.metric == "cos":
        x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-300)
        q /= np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-300)
    s = q @ x.T  # float64 reference scores [B, N]
    out = open(a.json, "a") if a.json else None
    for k in [int(v) for v in a.k.split(",")]:
        kth = -np.partition(-s, k - 1, axis=1)[:, k - 1]
        r = dict(dataset="minilm", N=x.shape[0], B=q.shape[0], D=x.shape[1], k=k, metric=a.metric, tol=a.tol)
        res = {}
        for b in ("cuda", "cpu"):
            idx = np.load(f"{a.res}/{b}-{k}.npy")
            sc = np.load(f"{a.res}/{b}-{k}.scores.npy")
            ref = np.take_along_axis(s, idx, axis=1)
            # missed: a key whose float64 score beats the k-th by more than tol but is not returned
            above = s > (kth[:, None] + a.tol)
            got = np.zeros_like(above)
            np.put_along_axis(got, idx, True, axis=1)
            r[f"missed_{b}"] = int((above & ~got).sum())
            r[f"below_kth_{b}"] = int((ref < kth[:, None] - a.tol).sum())
            r[f"max_score_err_{b}"] = float(np.abs(ref - sc).max())
            res[b] = (idx, sc)
        (ia, sa), (ib, sb) = res["cuda"], res["cpu"]
        same_rows = (ia == ib).all(axis=1)
        r["rows_identical"] = int(same_rows.sum())
        diff_sets, tie_only = 0, 0
        for i in np.nonzero(~same_rows)[0]:
            da, db = set(ia[i].tolist()) - set(ib[i].tolist()), set(ib[i].tolist()) - set(ia[i].tolist())
            if not da and not db:
                continue  # same set, other order (equal scores)
            diff_sets += 1
            keys = np.array(sorted(da | db))
            tie_only += bool((np.abs(s[i, keys] - kth[i]) <= a.tol).all())
        r["rows_set_differs"] = diff_sets
        r["rows_set_differs_all_ties"] = tie_only
        shared = ia == ib
        r["max_score_diff_cuda_cpu_same_key"] = float(np.abs(sa - sb)[shared].max()) if shared.any() else 0.0
        emit_jsonl(r, out)


if __name__ == "__main__":
    main()
