#!/usr/bin/env python3
"""Decode-stage indexer top-k on the GPU: litetopk.fp8_paged_mqa_topk against the baseline a user
writes today with torch alone, same process, same tensors (issue 21's "3x" line).

The baseline, per request: gather its pages of the FP8 cache (keys and scales), the FP8 scores of
its next_n x H query-heads against its keys with `torch._scaled_mm` (fp32 out), ReLU, the head
weights, the head sum, the key scales, then `torch.topk` over its positions. The cache is the
vLLM layout (blocks of block_kv x D e4m3 key bytes then block_kv fp32 scales), the table shuffled,
keys randn quantised per key (scale amax / 448), queries randn e4m3, weights randn / sqrt(D H).

    python3 bench/decode_torch.py --B 1,8,64 --ctx 65536,1048576 --next-n 1 --json out.jsonl

Check: the baseline's set against litetopk's (recall; its sums run in another order).
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import litetopk  # noqa: E402
from gpu_bench_util import time_ms  # noqa: E402  (CUDA-event median)
from benchio import emit_jsonl  # noqa: E402


def make(B, ctx, next_n, H, D, bkv, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    maxb = (ctx + bkv - 1) // bkv
    nblocks = B * maxb
    x = torch.randn(nblocks * bkv, D, device="cuda", generator=g)
    sc = x.abs().amax(1).clamp_min(1e-4) / 448.0
    keys = (x / sc[:, None]).to(torch.float8_e4m3fn)
    cache = torch.empty(nblocks, bkv * (D + 4), dtype=torch.uint8, device="cuda")
    cache[:, : bkv * D] = keys.view(torch.uint8).view(nblocks, bkv * D)
    cache[:, bkv * D:] = sc.view(nblocks, bkv).contiguous().view(torch.uint8)
    table = torch.randperm(nblocks, device="cuda", generator=g).to(torch.int32).view(B, maxb)
    q = torch.randn(B, next_n, H, D, device="cuda", generator=g).to(torch.float8_e4m3fn)
    w = torch.randn(B * next_n, H, device="cuda", generator=g) / (D * H) ** 0.5
    seq = torch.full((B,), ctx, dtype=torch.int32, device="cuda")
    return cache, table, q, w, seq


def baseline(cache, table, q, w, seq, k, bkv, D):
    B, next_n, H, _ = q.shape
    nblocks = cache.shape[0]
    keys = cache[:, : bkv * D].view(nblocks, bkv, D)
    scales = cache[:, bkv * D:].contiguous().view(torch.float32).view(nblocks, bkv)
    one = torch.ones((), device="cuda", dtype=torch.float32)
    out = torch.empty(B * next_n, k, dtype=torch.int64, device="cuda")
    for b in range(B):
        n = int(seq[b])  # (what a user's loop does: the host reads the length)
        blk = table[b, : (n + bkv - 1) // bkv].long()
        kv = keys[blk].reshape(-1, D)[:n].view(torch.float8_e4m3fn)
        s = scales[blk].reshape(-1)[:n]
        logits = torch._scaled_mm(q[b].reshape(next_n * H, D), kv.t(), scale_a=one, scale_b=one,
                                  out_dtype=torch.float32)
        logits = (logits.relu().view(next_n, H, n) * w[b * next_n:(b + 1) * next_n, :, None]).sum(1) * s
        for r in range(next_n):  # row r sees n - next_n + r + 1 positions
            vis = n - next_n + r + 1
            out[b * next_n + r] = torch.topk(logits[r, :vis], k).indices
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--B", default="1,8,64")
    ap.add_argument("--ctx", default="65536,262144,1048576")
    ap.add_argument("--next-n", type=int, default=1)
    ap.add_argument("--H", type=int, default=64)
    ap.add_argument("--k", type=int, default=2048)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=1 << 24, help="skip B x ctx above this")
    ap.add_argument("--json")
    a = ap.parse_args()
    D = 128
    out = open(a.json, "a") if a.json else None
    for B in [int(x) for x in a.B.split(",")]:
        for ctx in [int(x) for x in a.ctx.split(",")]:
            if B * ctx > a.max_tokens:
                continue
            cache, table, q, w, seq = make(B, ctx, a.next_n, a.H, D, a.block, 1234)
            kv4 = cache.view(cache.shape[0], a.block, 1, D + 4)
            ws = None

            def ours():
                return litetopk.fp8_paged_mqa_topk(q, kv4, w, seq, table, None, ctx, a.k)

            t_ours = time_ms(ours, reps=a.reps)
            t_base = time_ms(lambda: baseline(cache, table, q, w, seq, a.k, a.block, D), reps=max(3, a.reps // 3))
            mine = ours().long()
            ref = baseline(cache, table, q, w, seq, a.k, a.block, D)
            hit = 0
            for t in range(mine.shape[0]):
                hit += torch.isin(mine[t], ref[t]).sum().item()
            recall = hit / (mine.shape[0] * a.k)
            rec = {"op": "decode_torch", "harness": "bench/decode_torch.py", "device": torch.cuda.get_device_name(),
                   "B": B, "ctx": ctx, "next_n": a.next_n, "H": a.H, "k": a.k,
                   "block": a.block, "litetopk_ms": round(t_ours, 4), "torch_ms": round(t_base, 4),
                   "speedup": round(t_base / t_ours, 2), "recall_vs_torch": round(recall, 5),
                   "commit": os.environ.get("LTK_COMMIT", "?")}
            emit_jsonl(rec, out)
            del cache, table, q, w, seq, kv4, ws
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
