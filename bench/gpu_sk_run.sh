#!/bin/bash
# One device call for the GPU select and kNN (select.cu, knn.cu): GPU tests, compute-sanitizer on
# small cases, then the benchmarks vs torch. Expects the standalone build of tests/cuda/standalone.sh
# in ${B:-build-gpu2}. Results (logs, JSON lines, plot) under ${OUT:-bench/results/h200}.
#   bench/gpu_sk_run.sh [tests|bench|all] [quick]
B=${B:-build-gpu2}
OUT=${OUT:-bench/results/h200}
WHAT=${1:-all}
Q=${2:-}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 LTK_LIBRARY=${LTK_LIBRARY:-$B/libltk_cuda_sk.so}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv,noheader
if [ "$WHAT" != bench ]; then
  timeout 200 "$B/test-cuda-select" > "$OUT/test-cuda-select.log" 2>&1; echo "select rc=$?"; grep -E "FAIL|passed" "$OUT/test-cuda-select.log" | tail -12
  timeout 200 "$B/test-cuda-knn" > "$OUT/test-cuda-knn.log" 2>&1; echo "knn rc=$?"; grep -E "FAIL|passed|fallback" "$OUT/test-cuda-knn.log" | tail -16
  for t in select knn; do
    timeout 120 compute-sanitizer --tool memcheck --leak-check no "$B/test-cuda-$t" --small > "$OUT/san.tmp" 2>&1
    echo "memcheck $t rc=$?: $(grep -E 'ERROR SUMMARY|passed' "$OUT/san.tmp" | tr '\n' ' ')"; cat "$OUT/san.tmp" >> "$OUT/sanitizer.log"
  done
  timeout 150 compute-sanitizer --tool racecheck "$B/test-cuda-select" --small > "$OUT/san.tmp" 2>&1
  echo "racecheck select rc=$?: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|passed' "$OUT/san.tmp" | tr '\n' ' ')"; cat "$OUT/san.tmp" >> "$OUT/sanitizer.log"; rm -f "$OUT/san.tmp"
fi
if [ "$WHAT" != tests ]; then
  timeout 240 python3 bench/gpu_select_torch.py --json "$OUT/select.jsonl" $([ -n "$Q" ] && echo --quick) >> "$OUT/bench.log" 2>&1
  python3 - "$OUT/select.jsonl" <<'PY'
import json,sys
for l in open(sys.argv[1]):
    r=json.loads(l); print("%-6s %5d x %8d k=%5d %-8s %-6s sorted=%d %9.3f ms %s" % (r["algo"],r["rows"],r["cols"],r["k"],r["dtype"],r["input"],r["sorted"],r["median_ms"], "x%.2f exact=%s fb=%s" % (r["speedup_vs_torch"],r["exact"],r["fallback_rows"]) if r["algo"]=="radix" else ""))
PY
  timeout 300 python3 bench/gpu_knn_torch.py --json "$OUT/knn.jsonl" --plot "$OUT/knn_h200.png" $([ -n "$Q" ] && echo --quick) >> "$OUT/bench.log" 2>&1
  echo "knn bench rc=$?"; grep -v '^{' "$OUT/bench.log" | tail -5
  python3 - "$OUT/knn.jsonl" <<'PY'
import json,sys
for l in open(sys.argv[1]):
    r=json.loads(l); print("%-11s B=%4d N=%8d k=%5d %8.3f ms floor %.3f %s" % (r["algo"],r["B"],r["N"],r["k"],r["median_ms"],r["floor_ms"], "eq=%s fb=%s cand=%s" % (r.get("fused_eq_materialize"),r.get("fallback_rows"),r.get("candidates_max")) if r["algo"]=="fused" else ""))
PY
fi
echo "== summary"; grep -h -E "passed, [0-9]+ failed" "$OUT"/test-cuda-*.log 2>/dev/null; grep -h -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitizer.log" 2>/dev/null
