#!/usr/bin/env bash
# The CPU benchmarks of the core issue, in one call, recorded under bench/results/cpu/:
#   kNN   N=1,000,000 x 384 fp32, B=64, k in {128, 1024, 8192}: fused vs materialize (litetopk bench knn)
#         and faiss-cpu IndexFlatIP.search on the same float32 data (bench/faiss_cpu.py)
#   DSA   T=256, S=65,536, H=64, D=128, e4m3, k=2048: fused vs materialize vs score_only (litetopk bench dsa)
# Run on a quiet machine: `bench/run-cpu.sh [build dir]` (needs `pip install numpy faiss-cpu`).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
CLI=$B/tools/litetopk
OUT=${OUT:-bench/results/cpu}
REPS=${REPS:-3}
mkdir -p "$OUT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$CLI" info | tee "$OUT/info.txt"
"$CLI" bench knn --B 64 --N 1000000 --D 384 -k 128 --dump "$TMP/knn" --reps 0 >/dev/null
for k in 128 1024 8192; do
  "$CLI" bench knn --base "$TMP/knn.base.fbin" --queries "$TMP/knn.queries.fbin" -k $k --backend cpu \
    --algos fused,materialize --reps "$REPS" --json "$OUT/knn.jsonl"
  python3 bench/faiss_cpu.py --base "$TMP/knn.base.fbin" --queries "$TMP/knn.queries.fbin" -k $k \
    --reps "$REPS" --json "$OUT/knn.jsonl"
done
# one call of 256 rows (cold start: strided + recent sample), and 4 calls of 64 rows carrying the hot set
for chunk in 256 64; do
  "$CLI" bench dsa --T 256 --S 65536 --H 64 --D 128 -k 2048 --chunk $chunk --backend cpu \
    --algos fused,materialize,score_only --reps "$REPS" --json "$OUT/dsa.jsonl"
done
