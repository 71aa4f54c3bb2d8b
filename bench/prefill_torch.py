"""Whole-sequence prefill indexer: litetopk's fused driver vs the StreamIndex-style partition-merge
in torch (an independent oracle and a peer), on the same synthetic V3.2 / V4 inputs.

Run on a CUDA machine with torch; the library through the Python binding (python/litetopk):

    python3 bench/prefill_torch.py --shape v4-flash --L 65536 --check --json out.jsonl
    python3 bench/prefill_torch.py --shape v32 --L 1048576 --algos fused,materialize --json out.jsonl

Inputs (documented generator, seeded): `n_topics` topic directions U; every compressed key j belongs
to a topic z_j and is k_j = a * U[z_j] + noise; query token t follows a slowly drifting topic
(a new topic every `segment` tokens, so adjacent chunks attend to the same keys: the hot set
matters, as the LiteTopK paper observes for real indexers), each head h sees
q_{t,h} = b * s_h * U[topic(t)] + noise with a per-head sign s_h (ReLU sparsity) — then both are
quantised to e4m3 like DeepSeek's act_quant (per-token amax/448 scale for k, folded q scale in w).
"""
import argparse
import json
import os
import subprocess
import sys
import time

import torch

SHAPES = {
    "v32": dict(H=64, D=128, m=1, k=2048),
    "v4-flash": dict(H=64, D=128, m=4, k=512),
    "v4-pro": dict(H=64, D=128, m=4, k=1024),
}


def make_inputs(L, H, D, m, seed=0, n_topics=64, segment=512, a=1.0, b=1.5, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    S = L // m
    U = torch.randn(n_topics, D, generator=g, device=device)
    U = U / U.norm(dim=1, keepdim=True) * D ** 0.5
    z = torch.randint(0, n_topics, (S,), generator=g, device=device)
    k = a * U[z] + torch.randn(S, D, generator=g, device=device)
    k_scale = (k.abs().amax(dim=1).clamp(min=1e-4) / 448.0).float()
    k8 = (k / k_scale[:, None]).to(torch.float8_e4m3fn)
    # query topics: a new random topic every `segment` tokens
    seg_topic = torch.randint(0, n_topics, ((L + segment - 1) // segment,), generator=g, device=device)
    sign = torch.where(torch.rand(H, generator=g, device=device) < 0.75, 1.0, -1.0)
    q8 = torch.empty(L, H, D, dtype=torch.float8_e4m3fn, device=device)
    w = torch.empty(L, H, dtype=torch.float32, device=device)
    step = 16384  # build q in slices: 1M x 64 x 128 fp32 would be 32 GiB
    for t0 in range(0, L, step):
        t1 = min(L, t0 + step)
        top = seg_topic[torch.arange(t0, t1, device=device) // segment]
        q = b * sign[None, :, None] * U[top][:, None, :] + torch.randn(t1 - t0, H, D, generator=g, device=device)
        q_scale = q.abs().amax(dim=2).clamp(min=1e-4) / 448.0
        q8[t0:t1] = (q / q_scale[..., None]).to(torch.float8_e4m3fn)
        w[t0:t1] = torch.randn(t1 - t0, H, generator=g, device=device).abs() * q_scale * D ** -0.5 * H ** -0.5
    return q8, k8, k_scale, w


def torch_partition_merge(q8, k8, k_scale, w, m, k, chunk_s=512, chunk_t=65536):
    """StreamIndex's chunked partition-merge: score a (rows x key-tile) block in fp32, apply the
    compressed causal rule t < (s+1)//m per tile, take the tile's top-k, merge with the running set.
    Ties: the running set holds lower indices than the new tile, a stable descending sort keeps
    them first, so the order is (score desc, index asc), NaN never occurs here. Peak memory: one
    (chunk_s x chunk_t) score block plus the running sets."""
    L, H, D = q8.shape
    S = k8.shape[0]
    out = torch.full((L, k), -1, dtype=torch.int32, device=q8.device)
    kf_all = k8
    for s0 in range(0, L, chunk_s):
        s1 = min(L, s0 + chunk_s)
        qf = q8[s0:s1].float()  # [r, H, D]
        wr = w[s0:s1]
        vis = (torch.arange(s0, s1, device=q8.device) + 1) // m  # keys visible per row
        run_v = torch.full((s1 - s0, k), float("-inf"), device=q8.device)
        run_i = torch.full((s1 - s0, k), -1, dtype=torch.int64, device=q8.device)
        t_end = int(vis.max().item())
        for t0 in range(0, t_end, chunk_t):
            t1 = min(t_end, t0 + chunk_t)
            kf = kf_all[t0:t1].float()  # [c, D]
            logits = torch.einsum("rhd,cd->rhc", qf, kf).relu_()
            sc = torch.einsum("rhc,rh->rc", logits, wr) * k_scale[t0:t1][None, :]
            idx = torch.arange(t0, t1, device=q8.device)
            sc.masked_fill_(idx[None, :] >= vis[:, None], float("-inf"))
            v, order = torch.sort(torch.cat([run_v, sc], dim=1), dim=1, descending=True, stable=True)
            cand_i = torch.cat([run_i, idx[None, :].expand(s1 - s0, -1)], dim=1)
            run_v = v[:, :k]
            run_i = torch.gather(cand_i, 1, order[:, :k])
        run_i = torch.where(torch.isinf(run_v) & (run_v < 0), torch.full_like(run_i, -1), run_i)
        out[s0:s1] = run_i.to(torch.int32)
    return out


def set_overlap(a, b):
    """Mean and min per-row overlap of the valid entries of two [L, k] index tensors."""
    means, mins, n, cnt = 0.0, 1.0, a.shape[0], 0
    for r0 in range(0, n, 4096):
        sa = torch.sort(a[r0:r0 + 4096].long(), dim=1).values
        sb = torch.sort(b[r0:r0 + 4096].long(), dim=1).values
        pos = torch.searchsorted(sa, sb).clamp(max=sa.shape[1] - 1)
        hit = ((sa.gather(1, pos) == sb) & (sb >= 0)).sum(1).float()
        nv = (sb >= 0).sum(1)
        r = (hit / nv.clamp(min=1).float())[nv > 0]  # rows that see no key (t < m - 1) are empty in both
        if r.numel():
            means += float(r.sum())
            mins = min(mins, float(r.min()))
            cnt += r.numel()
    return means / max(cnt, 1), mins


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=SHAPES, default="v4-flash")
    ap.add_argument("--L", type=int, default=65536)
    ap.add_argument("--chunk", type=int, default=8192)
    ap.add_argument("--algos", default="fused,materialize,torch_merge")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--check", action="store_true", help="compare sets: fused vs materialize (bit-exact), vs torch")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import litetopk

    shp = SHAPES[args.shape]
    H, D, m, k = shp["H"], shp["D"], shp["m"], shp["k"]
    L = args.L
    q8, k8, k_scale, w = make_inputs(L, H, D, m)
    S = L // m
    flops = 2.0 * H * D * sum_visible(L, m)
    dev = torch.cuda.get_device_name()
    commit = os.environ.get("LTK_COMMIT") or git_sha()
    results = {}
    for algo in args.algos.split(","):
        # warm-up on the first two chunks (module loading, allocator): with one timed rep and no
        # warm-up, the first algorithm timed paid them (+8 ms on a 15 ms prefill)
        Lw = min(L, 2 * args.chunk)
        if algo == "torch_merge":
            torch_partition_merge(q8[:Lw], k8[:Lw // m], k_scale[:Lw // m], w[:Lw], m, k)
        else:
            litetopk.prefill(q8[:Lw], k8[:Lw // m], k_scale[:Lw // m], w[:Lw], k, m=m, chunk=args.chunk, algo=algo)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base_mem = torch.cuda.memory_allocated()
        times = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            if algo == "torch_merge":
                out = torch_partition_merge(q8, k8, k_scale, w, m, k)
                aux = torch.cuda.max_memory_allocated() - base_mem
            else:
                out, aux = litetopk.prefill(q8, k8, k_scale, w, k, m=m, chunk=args.chunk, algo=algo,
                                            return_workspace_bytes=True)
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
        ms = sorted(times)[len(times) // 2]
        results[algo] = out
        rec = dict(op="prefill", backend="cuda" if algo != "torch_merge" else "torch", algo=algo,
                   shape=args.shape, L=L, S=S, m=m, k=k, H=H, D=D, chunk=args.chunk, dtype="e4m3",
                   median_ms=ms, aux_bytes=int(aux), tflops=flops / ms / 1e9, device=dev, commit=commit,
                   harness="bench/prefill_torch.py")
        print(json.dumps(rec), flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(rec) + "\n")
    if args.check:
        if "fused" in results and "materialize" in results:
            a, b = results["fused"], results["materialize"]
            same = torch.equal(torch.sort(a, 1)[0], torch.sort(b, 1)[0])
            print(f"check fused vs materialize: sets {'IDENTICAL' if same else 'DIFFER'}", flush=True)
        if "fused" in results and "torch_merge" in results:
            mean, mn = set_overlap(results["fused"], results["torch_merge"])
            print(f"check fused vs torch_merge (fp32 scores, independent): overlap mean {mean:.6f} min {mn:.6f}")


def sum_visible(L, m):
    """sum over tokens t < L of the keys they see, (t+1)//m, in closed form."""
    q, r = divmod(L, m)
    return m * (q - 1) * q // 2 + q * (r + 1)


def git_sha():
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True,
                                       stderr=subprocess.DEVNULL).strip()
    except Exception:
        return "unknown"


if __name__ == "__main__":
    main()
