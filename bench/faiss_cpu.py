#!/usr/bin/env python3
"""faiss-cpu baseline for `litetopk bench knn`: the same data, the same k, the same JSON lines.

The data comes from the litetopk CLI itself (`litetopk bench knn ... --dump PREFIX --reps 0` writes
PREFIX.base.fbin and PREFIX.queries.fbin, the exact float32 values litetopk searches), or from
--base/--queries files (.fbin, .fvecs, .npy). faiss IndexFlatIP (IndexFlatL2 for --metric l2) then
searches it twice: with faiss defaults (BLAS only for batches of >= 20 queries) and with
faiss.cvar.distance_compute_blas_threshold = 0 (always BLAS). Each configuration: one warm-up search,
then the median of --reps timed searches; one JSON object per configuration is appended to --json.

    pip install numpy faiss-cpu
    python3 bench/faiss_cpu.py --B 256 --N 100000 --D 128 -k 100 --json results.jsonl
    build-cli/tools/litetopk bench knn --B 256 --N 100000 --D 128 -k 100 --json results.jsonl

--check also runs `litetopk knn` on the same files and reports how many rows have the same
neighbour set as faiss (float rounding may swap entries that tie to the last bit).
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_litetopk():
    for build in ("build-cli", "build", "build-cli-cuda"):
        p = os.path.join(ROOT, build, "tools", "litetopk")
        if os.access(p, os.X_OK):
            return p
    return "litetopk"


def read_vectors(path):
    """float32 [rows, dim] from .fbin, .fvecs or .npy."""
    if path.endswith(".fbin"):
        rows, dim = np.fromfile(path, dtype="<i4", count=2)
        data = np.fromfile(path, dtype="<f4", offset=8)
        if data.size != int(rows) * int(dim):
            sys.exit(f"faiss_cpu.py: {path}: header says {rows} x {dim}, file holds {data.size} floats")
        return data.reshape(int(rows), int(dim))
    if path.endswith(".fvecs"):
        raw = np.fromfile(path, dtype="<i4")
        if raw.size == 0:
            sys.exit(f"faiss_cpu.py: {path} is empty")
        dim = int(raw[0])
        if dim <= 0 or raw.size % (dim + 1):
            sys.exit(f"faiss_cpu.py: {path}: malformed .fvecs")
        return raw.reshape(-1, dim + 1)[:, 1:].copy().view("<f4")
    if path.endswith(".npy"):
        arr = np.load(path)
        if arr.ndim != 2:
            sys.exit(f"faiss_cpu.py: {path}: expected a 2-D array")
        return np.ascontiguousarray(arr, dtype=np.float32)
    sys.exit(f"faiss_cpu.py: {path}: unknown extension (.fbin, .fvecs, .npy)")


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def git_commit():
    env = os.environ.get("LTK_COMMIT")
    if env:
        return env
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def faiss_aux_bytes(faiss, B, N, D, k, threshold, threads):
    """Estimate of the memory faiss' flat search allocates beyond the index: the k results per query,
    plus per path (as faiss' utils/distances.cpp chooses it): database-parallel (few queries, many
    threads) keeps a heap per thread and query and one inner-product block per thread; the BLAS path
    (B*D >= threshold) one query-block x database-block tile; the sequential path nothing more."""
    results = B * k * 12
    db_bs = faiss.cvar.distance_compute_blas_database_bs
    if threads > 1 and B < threads and N >= max(10000, threads * db_bs):
        return results + threads * B * k * 12 + threads * B * min(db_bs, N // threads) * 4
    if B * D >= threshold:
        return results + min(B, faiss.cvar.distance_compute_blas_query_bs) * min(N, db_bs) * 4
    return results


def read_ibin(path):
    rows, cols = np.fromfile(path, dtype="<i4", count=2)
    return np.fromfile(path, dtype="<i4", offset=8).reshape(int(rows), int(cols))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--B", type=int, default=256, help="queries (generated data)")
    ap.add_argument("--N", type=int, default=100000, help="base vectors (generated data)")
    ap.add_argument("--D", type=int, default=128, help="dimension (generated data)")
    ap.add_argument("-k", "--k", type=int, default=100)
    ap.add_argument("--seed", type=int, default=12345, help="same default as litetopk bench")
    ap.add_argument("--dtype", default="f32", choices=["f32", "f16", "bf16"],
                    help="values rounded to this type, as litetopk bench knn --dtype (faiss computes in float32)")
    ap.add_argument("--metric", default="ip", choices=["ip", "l2"])
    ap.add_argument("--base", help="base vectors file instead of generated data")
    ap.add_argument("--queries", help="query vectors file instead of generated data")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="OpenMP threads for faiss (0 = its default)")
    ap.add_argument("--json", help="append one JSON object per line")
    ap.add_argument("--litetopk", default=find_litetopk(), help="the litetopk CLI (to generate data, --check)")
    ap.add_argument("--workdir", help="where generated files go (default: a temporary directory)")
    ap.add_argument("--check", action="store_true", help="compare the neighbour sets with `litetopk knn`")
    args = ap.parse_args()

    try:
        import faiss
    except ImportError:
        sys.exit("faiss_cpu.py: faiss is not installed (pip install faiss-cpu)")
    if (args.base is None) != (args.queries is None):
        sys.exit("faiss_cpu.py: --base and --queries go together")
    if args.reps < 1:
        sys.exit("faiss_cpu.py: --reps must be >= 1")

    tmp = None
    workdir = args.workdir
    if workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="ltk-faiss-")
        workdir = tmp.name
    os.makedirs(workdir, exist_ok=True)
    if args.base:
        base_path, query_path, source = args.base, args.queries, "files"
    else:
        prefix = os.path.join(workdir, f"knn-B{args.B}-N{args.N}-D{args.D}-s{args.seed}-{args.dtype}")
        cmd = [args.litetopk, "bench", "knn", "--B", str(args.B), "--N", str(args.N), "--D", str(args.D),
               "--seed", str(args.seed), "--dtype", args.dtype, "--dump", prefix, "--reps", "0"]
        try:
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        except (OSError, subprocess.CalledProcessError) as e:
            sys.exit(f"faiss_cpu.py: generating the data with {' '.join(cmd)} failed: {e}")
        base_path, query_path, source = prefix + ".base.fbin", prefix + ".queries.fbin", "litetopk bench knn"
    xb, xq = read_vectors(base_path), read_vectors(query_path)
    if xb.shape[1] != xq.shape[1]:
        sys.exit(f"faiss_cpu.py: dimension mismatch: base {xb.shape}, queries {xq.shape}")
    N, D = xb.shape
    B = xq.shape[0]
    k = args.k

    if args.threads > 0:
        faiss.omp_set_num_threads(args.threads)
    threads = faiss.omp_get_max_threads()
    index = faiss.IndexFlatIP(D) if args.metric == "ip" else faiss.IndexFlatL2(D)
    index.add(xb)
    device = cpu_model()
    commit = git_commit()
    default_threshold = faiss.cvar.distance_compute_blas_threshold
    configs = [("IndexFlatIP" if args.metric == "ip" else "IndexFlatL2", default_threshold),
               (("IndexFlatIP" if args.metric == "ip" else "IndexFlatL2") + "_blas0", 0)]
    print(f"faiss-cpu {faiss.__version__} on {device} ({threads} threads): B={B} N={N} D={D} k={k} "
          f"metric={args.metric} ({source})")
    print(f"  {'algo':<20} {'median ms':>11} {'min ms':>11} {'TFLOP/s':>9}")
    results = {}
    for name, threshold in configs:
        faiss.cvar.distance_compute_blas_threshold = threshold
        _, labels = index.search(xq, k)  # warm-up
        times = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            _, labels = index.search(xq, k)
            times.append((time.perf_counter() - t0) * 1e3)
        results[name] = labels
        median, best = statistics.median(times), min(times)
        tflops = 2.0 * B * N * D / (median * 1e-3) / 1e12
        print(f"  {name:<20} {median:11.3f} {best:11.3f} {tflops:9.4g}")
        aux = faiss_aux_bytes(faiss, B, N, D, k, threshold, threads)
        record = {
            "op": "knn", "backend": "faiss-cpu", "algo": name, "B": B, "N": N, "D": D, "k": k,
            "metric": args.metric, "dtype": args.dtype, "sorted": True, "median_ms": round(median, 6),
            "min_ms": round(best, 6), "reps": args.reps, "aux_bytes": aux, "aux_bytes_estimated": True, "device": device,
            "commit": commit, "threads": threads,
            "candidates_mean": None, "candidates_max": None, "bin_entries_mean": None, "bin_entries_max": None,
            "fallback_rows": None, "tflops": round(tflops, 6), "blas_threshold": threshold,
            "faiss_version": faiss.__version__,
            "timestamp": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        if args.check:
            record["check"] = None  # filled below
        results[name + ":record"] = record
    faiss.cvar.distance_compute_blas_threshold = default_threshold

    if args.check:
        out = os.path.join(workdir, "litetopk-check.ibin")
        cmd = [args.litetopk, "knn", "--base", base_path, "--queries", query_path, "-k", str(k), "--metric",
               args.metric, "--out", out, "--quiet"]
        subprocess.run(cmd, check=True)
        ours = read_ibin(out)
        for name, _ in configs:
            theirs = results[name]
            same = sum(set(ours[i].tolist()) == set(theirs[i].tolist()) for i in range(B))
            recall = np.mean([len(set(ours[i].tolist()) & set(theirs[i].tolist())) / max(1, k) for i in range(B)])
            print(f"  check {name}: {same}/{B} rows with the same set as litetopk, recall {recall:.6f}")
            results[name + ":record"]["check"] = {"same_set_rows": int(same), "rows": B, "recall": float(recall)}

    if args.json:
        with open(args.json, "a") as f:
            for name, _ in configs:
                f.write(json.dumps(results[name + ":record"]) + "\n")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
