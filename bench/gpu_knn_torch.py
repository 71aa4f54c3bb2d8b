#!/usr/bin/env python3
"""GPU kNN matrix of issue 5: litetopk fused / materialize vs cuBLAS GEMM + torch.topk, one process.

B=64, D=768 bf16, N in {1M, 2M, 4M, 5M}, k in {128, 1024, 4096, 8192}; then a B sweep at N=5M,
k=1024 with the bf16 GEMM rate measured in the same run. JSON lines (op "knn"), each with copy_GBps
(device-to-device copy bandwidth of this run) and floor_ms = corpus bytes / copy bandwidth. Library
calls are timed through GpuCalls.knn_prepared (arguments built once, then the C entry point), as a
C or C++ caller makes them; each is timed alone (events around one call, then a sync), like the CLI.
Each record names the kNN main loop in main_loop: "wgmma" (the sm_90a wgmma + TMA loop, the default
on sm_90) or, under LTK_CUDA_PORTABLE=1, "mma.sync" (the portable loop that other GPUs run). The
library reads LTK_CUDA_PORTABLE once per process (src/ltk-tune.h), so each loop takes its own run.
  python3 bench/gpu_knn_torch.py --json bench/results/h200/knn.jsonl [--quick] [--plot FILE.png]
"""
import argparse
import os
import json
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from gpu_bench_util import GpuCalls, commit, copy_gbps, time_ms  # noqa: E402
from benchio import emit_jsonl  # noqa: E402
from litetopk import _ffi  # noqa: E402  (python/ put on sys.path by gpu_bench_util)

# the main loop this process runs (the tune table's rule for LTK_CUDA_PORTABLE: set and not "0")
MAIN_LOOP = "mma.sync" if os.environ.get("LTK_CUDA_PORTABLE", "0") not in ("", "0") else "wgmma"


def gemm_tflops():
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    ms = time_ms(lambda: a @ b, reps=10, warmup=3)
    return 2 * 8192 ** 3 / (ms * 1e9)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--plot", default=None)
    ap.add_argument("--profile", action="store_true",
                    help="only a per-kernel breakdown (torch.profiler / CUPTI) of fused calls at N=5M, k=1024")
    ap.add_argument("--sweep-only", action="store_true", help="only the batch sweep at the largest N")
    args = ap.parse_args()
    if args.profile:
        return profile(GpuCalls())
    lib = GpuCalls()
    dev = torch.cuda.get_device_name()
    out = open(args.json, "a") if args.json else None
    cg = copy_gbps()
    tf = gemm_tflops()
    print(json.dumps({"copy_GBps": cg, "gemm_bf16_TFLOPs": tf}), flush=True)
    D, B = 768, 64
    Ns = [1 << 20, 2 << 20, 4 << 20, 5 << 20] if not args.quick else [1 << 20]
    Ks = [128, 1024, 4096, 8192] if not args.quick else [1024]
    torch.manual_seed(0)
    xall = torch.randn(max(Ns), D, device="cuda", dtype=torch.bfloat16)
    q = torch.randn(B, D, device="cuda", dtype=torch.bfloat16)
    recs = []

    def emit(r):
        r.update(main_loop=MAIN_LOOP)
        r.update(op="knn", backend="cuda", D=D, dtype="bf16", metric="ip", device=dev, commit=commit(), copy_GBps=cg,
                 gemm_TFLOPs=tf, harness="bench/gpu_knn_torch.py")
        r["floor_ms"] = r["N"] * D * 2 / (cg * 1e6)
        recs.append(r)
        emit_jsonl(r, out)

    for N in (Ns if not args.sweep_only else []):
        x = xall[:N]
        for k in Ks:
            oi = torch.empty(B, k, dtype=torch.int64, device="cuda")
            osc = torch.empty(B, k, dtype=torch.float32, device="cuda")
            oi2, osc2 = torch.empty_like(oi), torch.empty_like(osc)
            st = _ffi.ltk_stats()
            lib.knn(q, x, k, oi, osc, algo="fused", stats=st)
            lib.knn(q, x, k, oi2, osc2, algo="materialize")
            same = bool(torch.equal(oi, oi2)) and bool(torch.equal(osc, osc2))
            # against torch on fp32 scores of the same bf16 inputs: the k-th value agrees within rounding
            ref = torch.topk((q.float() @ x.float().T), k, dim=1).values
            err = float((ref[:, -1] - osc[:, -1]).abs().max())
            del ref
            for algo in ("fused", "materialize", "score_only"):
                ws = lib.knn(q, x, k, oi, osc, algo=algo)
                ms = time_ms(lib.knn_prepared(q, x, k, oi, osc, algo=algo), reps=10)
                r = dict(algo=algo, B=B, N=N, k=k, median_ms=ms, aux_bytes=ws, fused_eq_materialize=same,
                         kth_abs_err_vs_fp32=err)
                if algo == "fused":
                    r.update(fallback_rows=st.fallback_rows, candidates_mean=st.candidates / B,
                             candidates_max=st.candidates_max)
                emit(r)

            def base():
                s = q @ x.T  # cuBLAS bf16 GEMM, bf16 scores (the public anchor's pipeline)
                return torch.topk(s, k, dim=1)

            ms = time_ms(base, reps=10)
            emit(dict(algo="torch", B=B, N=N, k=k, median_ms=ms, aux_bytes=B * N * 2))
            del oi, osc, oi2, osc2
            torch.cuda.empty_cache()
    # B sweep at N=5M (or the largest N), k=1024
    N = max(Ns)
    x = xall[:N]
    for Bs in ([1, 16, 256, 1024, 4096] if not args.quick else [1, 256]):
        qq = torch.randn(Bs, D, device="cuda", dtype=torch.bfloat16)
        k = 1024
        oi = torch.empty(Bs, k, dtype=torch.int64, device="cuda")
        osc = torch.empty(Bs, k, dtype=torch.float32, device="cuda")
        ws = lib.knn(qq, x, k, oi, osc, algo="fused")
        ms = time_ms(lib.knn_prepared(qq, x, k, oi, osc, algo="fused"), reps=3 if Bs >= 1024 else 10, warmup=1)
        emit(dict(algo="fused", B=Bs, N=N, k=k, median_ms=ms, aux_bytes=ws, sweep="B", ms_per_query=ms / Bs,
                  TFLOPs=2 * Bs * N * D / (ms * 1e9)))
        del qq, oi, osc
        torch.cuda.empty_cache()
    if args.plot:
        from plot_knn import plot
        plot(recs, args.plot)


def profile(lib):
    """Where a fused call's time goes: every kernel of the library, timed by CUPTI."""
    from torch.profiler import ProfilerActivity, profile as tprof
    D, N, k = 768, 5 << 20, 1024
    torch.manual_seed(0)
    x = torch.randn(N, D, device="cuda", dtype=torch.bfloat16)
    for B in (64, 1024):
        q = torch.randn(B, D, device="cuda", dtype=torch.bfloat16)
        oi = torch.empty(B, k, dtype=torch.int64, device="cuda")
        osc = torch.empty(B, k, dtype=torch.float32, device="cuda")
        for algo in ("fused", "score_only"):
            lib.knn(q, x, k, oi, osc, algo=algo)
            torch.cuda.synchronize()
            with tprof(activities=[ProfilerActivity.CUDA]) as pr:
                for _ in range(3):
                    lib.knn(q, x, k, oi, osc, algo=algo)
                torch.cuda.synchronize()
            print("== B=%d N=%d k=%d loop=%s algo=%s (3 calls)" % (B, N, k, MAIN_LOOP, algo))
            print(pr.key_averages().table(sort_by="cuda_time_total", row_limit=14, max_name_column_width=60))


if __name__ == "__main__":
    main()
