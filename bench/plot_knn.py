#!/usr/bin/env python3
"""Figure-5(b)-style plot of a gpu_knn_torch.py run (no torch needed): time vs corpus size per k for
litetopk fused / materialize and cuBLAS + torch.topk, with one corpus read at the run's copy
bandwidth; and the batch sweep (ms per query) at the largest N.
    python3 bench/plot_knn.py bench/results/h200/final-bbe22e3/knn.jsonl --out knn_h200.png
"""
import argparse
import json


def plot(recs, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cg = recs[0]["copy_GBps"]
    loops = sorted({r.get("main_loop", "") for r in recs})
    if len(loops) > 1:  # one main loop per plot: the default (wgmma) when a run compared several
        recs = [r for r in recs if r.get("main_loop", "wgmma") == "wgmma" or r["algo"] == "torch"]
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.5))
    ks = sorted({r["k"] for r in recs if r.get("sweep") is None})
    Ns = sorted({r["N"] for r in recs if r.get("sweep") is None})
    for algo, mk in (("fused", "o-"), ("materialize", "s--"), ("torch", "^:")):
        for k in ks:
            ys = [next((r["median_ms"] for r in recs if r["algo"] == algo and r["N"] == N and r["k"] == k
                        and r.get("sweep") is None), None) for N in Ns]
            ax[0].plot([n / 1e6 for n in Ns], ys, mk, label="%s k=%d" % (algo, k))
    ax[0].plot([n / 1e6 for n in Ns], [n * 768 * 2 / (cg * 1e6) for n in Ns], "k-", lw=2, label="corpus read @ copy BW")
    ax[0].set_xlabel("corpus size N (millions), B=64, D=768 bf16")
    ax[0].set_ylabel("time (ms)")
    ax[0].legend(fontsize=6, ncol=2)
    ax[0].set_title("exact kNN top-k on H200")
    sw = [r for r in recs if r.get("sweep") == "B"]
    ax[1].loglog([r["B"] for r in sw], [r["ms_per_query"] for r in sw], "o-")
    ax[1].set_xlabel("queries B (N=5M, k=1024)")
    ax[1].set_ylabel("ms per query")
    ax[1].set_title("batch sweep")
    fig.tight_layout()
    fig.savefig(png, dpi=110)




if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("jsonl")
    ap.add_argument("--out", default="knn_h200.png")
    a = ap.parse_args()
    plot([json.loads(l) for l in open(a.jsonl) if l.strip()], a.out)
