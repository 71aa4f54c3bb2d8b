#!/usr/bin/env python3
"""Plots of the H200 JSON lines (scripts/gpu.sh writes them to $OUT/bench.jsonl).

  python3 bench/plot_h200.py FILE.jsonl [FILE.jsonl ...] --out DIR

Writes, for what the files hold:
  fig5a.png     DSA indexer top-k, T=8192 H=64 k=2048: time vs context S for fused (hot-set state),
                score-only, materialize (bench-cuda-indexer) and the torch baseline (bench/dsa_torch.py),
                like the LiteTopK paper's Figure 5(a); right panel: fused time vs chunk size (CLI).
  prefill.png   whole-sequence prefill (bench/prefill_torch.py): time and peak auxiliary memory vs L
                per shape, for fused, materialize (512 MB logits budget) and the torch partition-merge.
"""
import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(paths):
    recs = []
    for p in paths:
        for line in open(p):
            line = line.strip()
            if line.startswith("{"):
                recs.append(json.loads(line))
    return recs


def last(recs, key, pick):
    """The last record of each key (later runs overwrite earlier ones)."""
    out = {}
    for r in recs:
        if pick(r):
            out[key(r)] = r
    return out


def fig5a(recs, path):
    dsa = [r for r in recs if r.get("op") == "dsa" and r.get("T") == 8192 and r.get("H") == 64]
    if not dsa:
        return False
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
    # bench-cuda-indexer records: "reps" and no "min_ms" (the CLI's records, chunk sweeps included, have both)
    ind = lambda r: "reps" in r and "min_ms" not in r  # noqa: E731
    series = {
        "fused (hot set)": lambda r: ind(r) and r["algo"] == "fused" and r.get("state") == 1,
        "score-only": lambda r: ind(r) and r["algo"] == "score_only",
        "materialize (4 GiB logits)": lambda r: ind(r) and r["algo"] == "materialize",
        "Triton logits + torch.topk (512 MB)": lambda r: r.get("harness") == "bench/dsa_torch.py" and r["algo"] == "torch",
    }
    styles = ["o-", "s--", "^-", "x:"]
    for (name, pick), st in zip(series.items(), styles):
        pts = sorted((r["S"], r["median_ms"]) for r in last(dsa, lambda r: r["S"], pick).values())
        if pts:
            ax.plot([s / 1024 for s, _ in pts], [m for _, m in pts], st, label=name)
    ax.axhline(150, color="grey", lw=0.8, ls="--")
    ax.text(260, 152, "target 150 ms at 1M", fontsize=7, color="grey")
    ax.set_xlabel("context S (K keys)")
    ax.set_ylabel("time for 8192 queries (ms)")
    ax.set_title("DSA indexer top-k, H200: T=8192 H=64 D=128 k=2048", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    ch = last(dsa, lambda r: r["chunk"], lambda r: "min_ms" in r and r["algo"] == "fused" and r.get("S") == 1048576)
    if ch:
        pts = sorted((c, r["median_ms"], r.get("fallback_rows", 0)) for c, r in ch.items())
        bx.plot([p[0] for p in pts], [p[1] for p in pts], "o-")
        for c, m, fb in pts:
            bx.annotate(f"{m:.0f} ms" + (f"\n{fb} fallback rows" if fb else ""), (c, m), fontsize=7,
                        textcoords="offset points", xytext=(4, 4))
        bx.set_xscale("log", base=2)
        bx.set_xlabel("query chunk (rows per call, hot set carried)")
        bx.set_ylabel("time for 8192 queries (ms)")
        bx.set_title("fused, S=1M: chunk size (litetopk bench dsa)", fontsize=9)
        bx.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def prefill(recs, path):
    pre = [r for r in recs if r.get("op") == "prefill" and r.get("backend") in ("cuda", "torch")]
    if not pre:
        return False
    shapes = [s for s in ("v4-flash", "v4-pro", "v32") if any(r.get("shape") == s for r in pre)]
    fig, axes = plt.subplots(2, len(shapes), figsize=(4.2 * len(shapes), 7), squeeze=False)
    for i, shp in enumerate(shapes):
        ax, mx = axes[0][i], axes[1][i]
        for algo, st in (("fused", "o-"), ("materialize", "^-"), ("torch_merge", "x:")):
            sel = last(pre, lambda r: r["L"], lambda r: r.get("shape") == shp and r["algo"] == algo
                       and r.get("chunk", 8192) == 8192)
            pts = sorted((L, r["median_ms"] / 1e3, r["aux_bytes"] / 2 ** 30) for L, r in sel.items())
            if not pts:
                continue
            lab = {"materialize": "materialize (512 MB logits)", "torch_merge": "torch partition-merge"}.get(algo, algo)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], st, label=lab)
            mx.plot([p[0] for p in pts], [p[2] for p in pts], st, label=lab)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        mx.set_xscale("log", base=2)
        ax.set_title(f"prefill indexer, {shp}", fontsize=9)
        ax.set_ylabel("whole sequence (s)")
        mx.set_ylabel("peak auxiliary memory (GiB)")
        mx.set_xlabel("tokens L")
        if shp == "v4-flash":
            ax.axhline(3.0, color="grey", lw=0.8, ls="--")
            mx.axhline(2.0, color="grey", lw=0.8, ls="--")
        for a in (ax, mx):
            a.grid(True, alpha=0.3)
            a.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out", default=".")
    a = ap.parse_args()
    recs = load(a.files)
    os.makedirs(a.out, exist_ok=True)
    for name, fn in (("fig5a.png", fig5a), ("prefill.png", prefill)):
        if fn(recs, os.path.join(a.out, name)):
            print("wrote", os.path.join(a.out, name))


if __name__ == "__main__":
    main()
