#!/usr/bin/env bash
# The CLI on a GPU machine: info, demo (quick and full), a small bench of each op on CUDA, and the
# CLI test with the auto backend (= cuda). JSON records go to $OUT (or ./gpu-smoke) as gpu.jsonl.
#   tests/cli/gpu-smoke.sh [BUILD_DIR]      (default build)
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
ltk=$build/tools/litetopk
out=${OUT:-$root/gpu-smoke}
mkdir -p "$out"
json=$out/gpu.jsonl
status=0
limit=${STEP_TIMEOUT:-120}
# Each step is bounded (a hung kernel must not eat the whole lease) and logged as it goes.
step() {
    echo; echo "== $*"
    timeout -k 5 "$limit" "$@"
    local rc=$?
    [ $rc -ne 0 ] && { echo "FAILED (exit $rc$([ $rc -eq 124 ] && echo ', timed out')): $*"; status=1; }
    return 0
}
exec > >(tee "$out/log.txt") 2>&1
nvidia-smi -L 2>/dev/null
step "$ltk" info
[ "${QUICK_ONLY:-0}" = 1 ] && { step "$ltk" demo --quick; step "$ltk" bench select --rows 8 --cols 10000 -k 64 --reps 3; exit $status; }
step "$ltk" demo --quick
step "$ltk" demo
step "$ltk" bench select --rows 512 --cols 131072 -k 2048 --json "$json"
step "$ltk" bench select --rows 512 --cols 131072 -k 2048 --dist ties --unsorted --json "$json"
step "$ltk" bench knn --B 1024 --N 1000000 --D 128 -k 100 --json "$json"
step "$ltk" bench dsa --T 4096 --S 131072 --chunk 2048 -k 2048 --json "$json"
step "$ltk" bench dsa --T 2048 --S 65536 --chunk 512 -k 512 --H 32 --json "$json"
step env -u LTK_BACKEND "$root/tests/cli/test-cli.sh" "$ltk" "$build/tests/cli/test-io" "$out/test-cli"
exit $status
