#!/usr/bin/env python3
"""GPU select: litetopk (exact, deterministic) vs torch.topk on the same tensors, same process.

JSON lines (docs/design.md format, op "select"): algo "radix" = litetopk, "torch" = torch.topk.
Inputs: torch.randn rows (random) and flat rows (all equal: the adversarial case for radix/bucket
selectors; litetopk stays exact, ties by lower index). Checks each litetopk result against
torch.topk's value set (the k-th value and the count above it) before timing.
  python3 bench/gpu_select_torch.py --json bench/results/h200/select.jsonl [--quick]
"""
import argparse
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from gpu_bench_util import GpuCalls, commit, time_ms  # noqa: E402
from benchio import emit_jsonl  # noqa: E402
from litetopk import _ffi  # noqa: E402  (python/ put on sys.path by gpu_bench_util)

SHAPES = [  # rows, cols, k, dtype
    (1, 1 << 20, 2048, torch.float32),
    (64, 1 << 20, 2048, torch.float32),
    (128, 1 << 20, 2048, torch.float32),
    (512, 1 << 20, 2048, torch.float32),
    (8192, 1 << 20, 2048, torch.float32),
    (8192, 1 << 18, 2048, torch.float32),
    (1, 5 << 20, 1024, torch.float32),
    (64, 5 << 20, 8192, torch.bfloat16),
    (64, 1 << 20, 2048, torch.bfloat16),
]


def check(vals, idx, got_idx, k):
    """The litetopk set must hold exactly the top-k values (multiset) of torch.topk."""
    g = torch.gather(vals, 1, got_idx.long().clamp(min=0))
    a = torch.sort(g.float(), dim=1, descending=True).values
    b = torch.sort(torch.topk(vals, k, dim=1).values.float(), dim=1, descending=True).values
    return bool(torch.equal(a, b))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    lib = GpuCalls()
    dev = torch.cuda.get_device_name()
    out = open(args.json, "a") if args.json else None
    shapes = SHAPES[:3] if args.quick else SHAPES
    for rows, cols, k, dt in shapes:
        for inp in ("randn", "flat"):
            if inp == "flat" and rows * cols > (1 << 27):
                continue
            torch.manual_seed(0)
            x = torch.randn(rows, cols, device="cuda", dtype=dt) if inp == "randn" else torch.full(
                (rows, cols), 0.25, device="cuda", dtype=dt)
            oi = torch.empty(rows, k, dtype=torch.int32, device="cuda")
            os_ = torch.empty(rows, k, dtype=torch.float32, device="cuda")
            reps = 5 if rows * cols >= (1 << 31) else 20
            recs = []
            for flags, sorted_ in ((0, True), (_ffi.FLAG_UNSORTED, False)):
                st = _ffi.ltk_stats()
                lib.select(x, k, oi, os_, flags=flags, stats=st)
                ok = check(x, None, oi, k)
                if inp == "flat" and sorted_:  # ties: the k lowest indices, in order
                    ok = ok and bool(torch.equal(oi[:, :k].cpu(), torch.arange(k, dtype=torch.int32).expand(rows, k)))
                ws = lib.select(x, k, oi, os_, flags=flags)
                ms = time_ms(lambda: lib.select(x, k, oi, os_, flags=flags), reps=reps)
                recs.append(dict(algo="radix", sorted=sorted_, median_ms=ms, aux_bytes=ws, exact=ok,
                                 fallback_rows=st.fallback_rows, candidates_max=st.candidates_max))
            for sorted_ in (True, False):
                ms = time_ms(lambda: torch.topk(x, k, dim=1, sorted=sorted_), reps=max(3, reps // 2))
                recs.append(dict(algo="torch", sorted=sorted_, median_ms=ms))
            tt = {r["sorted"]: r["median_ms"] for r in recs if r["algo"] == "torch"}
            for r in recs:
                r.update(op="select", backend="cuda", rows=rows, cols=cols, k=k, dtype=str(dt).split(".")[-1],
                         input=inp, device=dev, commit=commit(), harness="bench/gpu_select_torch.py", GBps=rows * cols * x.element_size() / (r["median_ms"] * 1e6))
                if r["algo"] == "radix":
                    r["speedup_vs_torch"] = tt[r["sorted"]] / r["median_ms"]
                emit_jsonl(r, out)
            del x, oi, os_
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
