#!/usr/bin/env bash
# The one call for the H200 (device tool): GPU tests, compute-sanitizer (memcheck + racecheck) on
# small cases, the indexer benchmarks (tests/cuda/bench-cuda-indexer and `litetopk bench dsa`), the
# lines of bench/gpu-cases.sh, a Figure-5(a)-style plot, and a summary table printed last.
#
#   scripts/gpu.sh prepare        (here, no GPU needed) build sm_90a binaries, packed in gpu-pack/
#   scripts/gpu.sh prepare-base C (here) the CLI and library of commit C for the kab A/B case
#   scripts/gpu.sh [all|tests|bench|quick|debug|cases|profile]   (on the GPU machine) run; results under $OUT
#   profile: a fused call's stages traced, and Nsight Compute on its sample/select/vote kernels
#   cases: only the lines of bench/gpu-cases.sh (with CASES="tags")
#   debug: a stall hunt: medium_* tests (several work units per CTA) and one
#          T=1024 benchmark with LTK_CUDA_TRACE=1 (every stage synchronised and timed on stderr),
#          then the small tests (score tolerance fix), then the large tests; every test isolated.
# Device tool: run `scripts/gpu.sh prepare` here, then run(command="scripts/gpu.sh all",
# carry=["gpu-pack"]). Knobs: GPU_BUDGET_S (whole call, default 540), TEST_S, REPS, BENCH_S, CHUNKS
# ("1024 128" adds chunked CLI runs), SKIP_CASES=1 (no bench/gpu-cases.sh), CASES="py dsa prefill sk"
# (only those tagged lines of it; CASE_S seconds each, default 120), SKIP_OTHERS=1 (no
# select/kNN tests). The sm_90a kernels are the library default on sm_90 (LTK_CUDA_PORTABLE=1 selects
# the portable path of every CUDA operation instead).
#
# Binaries: gpu-bin/ when carried (prepare), else a build into build-gpu on the spot.
# Outputs ($OUT, at most 8 files): test.log sanitizer.log bench.jsonl bench.log extra.log
# fig5a.png summary.txt.
# Every test of the GPU test binaries runs in its own process with a time limit (LTK_TEST_TIMEOUT_S,
# tests/harness.h): a hung kernel costs one test, shown as "[ TIME ]"; compute-sanitizer runs them
# in one process (LTK_TEST_TIMEOUT_S=0). The sm_90a scan has a watchdog
# (LTK_CUDA_WATCHDOG_S, default 10): a barrier wait longer than that prints
# "[ltk cuda] sm90 WATCHDOG: ..." (which role, which barrier, unit, tile, parity) and fails the launch.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MODE=${1:-all}

if [ "$MODE" = prepare ]; then
  set -e
  B=${B:-build-h200}
  cmake -S . -B "$B" -DLTK_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a-real -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$B" -j "$(nproc)" --target test-cuda-indexer bench-cuda-indexer litetopk litetopk_cli \
    test-cuda-select test-cuda-knn test-cuda-decode test-backends 2>&1 | grep -E "error|warning" || true
  rm -rf gpu-bin && mkdir -p gpu-bin/lib
  for f in "$B"/tests/cuda/test-cuda-indexer "$B"/tests/cuda/bench-cuda-indexer "$B"/tests/cuda/test-cuda-select \
           "$B"/tests/cuda/test-cuda-knn "$B"/tests/cuda/test-cuda-decode "$B"/tests/test-backends "$B"/tools/litetopk "$B"/liblitetopk.so; do
    [ -f "$f" ] && cp "$f" gpu-bin/ && strip --strip-unneeded "gpu-bin/$(basename "$f")"
  done
  cp "$(gcc -print-file-name=libgomp.so.1)" gpu-bin/lib/ 2>/dev/null || true
  grep -qx '/gpu-bin/' .git/info/exclude 2>/dev/null || echo '/gpu-bin/' >>.git/info/exclude
  # the commit the binaries were built from, "-dirty" when the tree had uncommitted changes
  git describe --always --dirty --abbrev=7 --exclude='*' >gpu-bin/commit 2>/dev/null || true
  # the device call carries at most 64 MiB: ship the binaries as one xz tarball in gpu-pack/
  mkdir -p gpu-pack && tar -cJf gpu-pack/gpu-bin.tar.xz gpu-bin
  grep -qx '/gpu-pack/' .git/info/exclude 2>/dev/null || echo '/gpu-pack/' >>.git/info/exclude
  du -sh gpu-bin gpu-pack
  exit 0
fi

if [ "$MODE" = prepare-base ]; then
  # the CLI and library of an earlier commit ($2) for an A/B in one call (bench/gpu-cases.sh kab):
  # built in a worktree under /tmp, packed as gpu-pack/base.tar.xz (gpu-base/ on the GPU machine)
  set -e
  C=$(git rev-parse --short "${2:?usage: scripts/gpu.sh prepare-base <commit>}")
  W=/tmp/ltk-base-$C
  [ -d "$W" ] || git worktree add -q "$W" "$C"
  cmake -S "$W" -B "$W/build-base" -DLTK_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a-real -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$W/build-base" -j "$(nproc)" --target litetopk litetopk_cli 2>&1 | grep -E "error" || true
  T=$(mktemp -d) && mkdir -p "$T/gpu-base" gpu-pack
  cp "$W/build-base/tools/litetopk" "$W/build-base/liblitetopk.so" "$T/gpu-base/"
  strip --strip-unneeded "$T/gpu-base/"* && echo "$C" >"$T/gpu-base/commit"
  cp -r "$W/python" "$T/gpu-base/python" # (its binding: LTK_PYTHON_DIR=gpu-base/python)
  tar -C "$T" -cJf gpu-pack/base.tar.xz gpu-base && rm -rf "$T"
  du -sh gpu-pack/base.tar.xz
  exit 0
fi

OUT=${OUT:-$ROOT/bench/results/h200/local}
mkdir -p "$OUT"
SUM=$OUT/summary.txt
: >"$SUM"
note() { echo "$*" | tee -a "$SUM"; }
export PYTHONUNBUFFERED=1

BIN=gpu-bin
if [ ! -x gpu-bin/test-cuda-indexer ] && [ -f gpu-pack/gpu-bin.tar.xz ]; then tar -xJf gpu-pack/gpu-bin.tar.xz; fi
# the commit of the binaries (after the unpacking above: the carried tarball stamps it)
export LTK_COMMIT=${LTK_COMMIT:-$(cat gpu-bin/commit 2>/dev/null || git describe --always --dirty 2>/dev/null || echo unknown)}
if [ -x gpu-bin/test-cuda-indexer ]; then
  # where bench/gpu-cases.sh looks for a build (build*/tools/litetopk, build*/liblitetopk.so)
  mkdir -p build-carried/tools
  ln -sf ../../gpu-bin/litetopk build-carried/tools/litetopk
  ln -sf ../gpu-bin/liblitetopk.so build-carried/liblitetopk.so
  CLI=gpu-bin/litetopk
  LIB=$ROOT/gpu-bin/liblitetopk.so
  if ldd gpu-bin/test-cuda-indexer | grep -q "not found"; then export LD_LIBRARY_PATH=$ROOT/gpu-bin/lib:${LD_LIBRARY_PATH:-}; fi
else
  note "building (no carried gpu-bin/)"
  cmake -S . -B build-gpu -DLTK_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a-real -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    cmake --build build-gpu -j "$(nproc)" >"$OUT/extra.log" 2>&1
  BIN=build-gpu/tests/cuda
  CLI=build-gpu/tools/litetopk
  LIB=$ROOT/build-gpu/liblitetopk.so
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu \
  --format=csv,noheader 2>&1 | tee -a "$SUM"
T0=$(date +%s)
BUDGET=${GPU_BUDGET_S:-540} # the whole call; every step's timeout is cut to what is left
step() { note "[$(($(date +%s) - T0))s] $*"; }
tmo() { # tmo MAX: seconds a step may take
  local left=$((BUDGET - ($(date +%s) - T0)))
  [ $left -lt 5 ] && left=5
  [ "$1" -lt $left ] && echo "$1" || echo $left
}

export LTK_TEST_TIMEOUT_S=${LTK_TEST_TIMEOUT_S:-90}

run_cases() { # the lines of bench/gpu-cases.sh (CASES: only those tags)
  [ -f bench/gpu-cases.sh ] || return 0
  step "bench/gpu-cases.sh ${CASES:-(all)}"
  export LTK_LIBRARY=${LTK_LIBRARY:-$LIB} OUT
  export PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH}
  while IFS= read -r line; do
    case "$line" in '' | \#*) continue ;; esac
    tag=${line%%:*}
    cmd=${line#*: }
    if [ -n "${CASES:-}" ] && ! [[ " $CASES " == *" $tag "* ]]; then continue; fi
    echo "+ [$tag] $cmd" >>"$OUT/extra.log"
    t1=$(date +%s)
    timeout $(tmo ${CASE_S:-120}) bash -c "$cmd" >>"$OUT/extra.log" 2>&1
    note "gpu-case rc=$? ($(($(date +%s) - t1)) s) [$tag] ${cmd:0:90}"
  done <bench/gpu-cases.sh
}
if [ "$MODE" = cases ]; then
  run_cases
  step "done"
  tail -40 "$SUM"
  exit 0
fi

if [ "$MODE" = decode ]; then
  # the decode operation: its GPU tests (sm_90a, then the portable kernel on the small cases), the
  # sanitizers on the small cases, then DECODE_BENCH=1: `litetopk bench decode` over DECODE_GRID
  # (lines "B ctx next_n [mixed]"), fused and materialize, JSON lines in $OUT/decode.jsonl
  if [ -z "${SKIP_TESTS:-}" ]; then
    step "decode tests"
    LTK_TEST_TIMEOUT_S=${LTK_TEST_TIMEOUT_S_DECODE:-240} timeout $(tmo 330) "$BIN/test-cuda-decode" >"$OUT/test.log" 2>&1
    note "decode tests rc=$?: $(grep -E 'passed,' "$OUT/test.log" | tail -1)"
    grep -E "WATCHDOG|^\[ (FAIL|TIME|CRASH|ERROR)|FAIL " "$OUT/test.log" | head -24 | tee -a "$SUM"
    step "decode tests, portable kernel"
    LTK_CUDA_PORTABLE=1 timeout $(tmo 120) "$BIN/test-cuda-decode" small >>"$OUT/test.log" 2>&1
    note "portable small rc=$?: $(grep -E 'passed,' "$OUT/test.log" | tail -1)"
    for tool in memcheck racecheck; do
      step "compute-sanitizer $tool (small)"
      LTK_TEST_TIMEOUT_S=0 timeout $(tmo 150) compute-sanitizer --tool $tool --error-exitcode 9 \
        "$BIN/test-cuda-decode" small >>"$OUT/sanitizer.log" 2>&1
      note "$tool rc=$?: $(grep -E 'ERROR SUMMARY|passed,' "$OUT/sanitizer.log" | tail -2 | tr '\n' ' ')"
    done
  fi
  if [ -n "${DECODE_BENCH:-}" ]; then
    while read -r b ctx nn mix; do
      [ -z "$b" ] && continue
      step "bench decode B=$b ctx=$ctx next_n=$nn ${mix:-}"
      timeout $(tmo 90) "$CLI" bench decode --B "$b" --ctx "$ctx" --next-n "$nn" ${mix:+--mixed} --H ${DH:-64} \
        --k ${DK:-2048} --backend cuda --algos ${DALGOS:-fused,materialize} --reps ${REPS:-10} \
        --json "$OUT/decode.jsonl" >>"$OUT/bench.log" 2>&1
      note "rc=$? $(grep -E '^  (fused|materialize|score_only) ' "$OUT/bench.log" | tail -2 | tr -s ' ' | tr '\n' ';')"
    done <<<"${DECODE_GRID:-64 65536 1}"
  fi
  step "done"
  tail -60 "$SUM"
  exit 0
fi

if [ "$MODE" = profile ]; then
  # where a fused call's time goes outside its main scan: the stages traced (each synchronised),
  # then Nsight Compute on the first call's sample, select and vote kernels and on the first scan
  # launch (the sample scan). PROF_S keys (default 393216), the filter forced on.
  export LTK_CUDA_FUSED_DENSE_S=0
  PS=${PROF_S:-393216}
  step "trace S=$PS"
  LTK_CUDA_TRACE=1 timeout $(tmo 60) "$BIN/bench-cuda-indexer" --T 8192 --H 64 --k 2048 --reps 1 --S $PS \
    --algos fused 2>&1 | grep -E "ltk cuda|median" | grep -v "dense s" >"$OUT/test.log"
  head -20 "$OUT/test.log" | tee -a "$SUM"
  NCU="ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats ${NCU_EXTRA:-}"
  step "ncu: sample, select and vote kernels"
  timeout $(tmo 200) $NCU --kernel-name regex:"${PROF_KERNELS:-sel_cand|smp_|vote_}" --launch-count ${PROF_N:-14} \
    "$BIN/bench-cuda-indexer" --T 8192 --H 64 --k 2048 --reps 1 --S $PS --algos fused >"$OUT/extra.log" 2>&1
  note "ncu rc=$?"
  step "ncu: the first scan launch (the sample scan)"
  timeout $(tmo 200) $NCU --section SchedulerStats --kernel-name regex:"ltk_sm90_scan" --launch-count 1 \
    "$BIN/bench-cuda-indexer" --T 8192 --H 64 --k 2048 --reps 1 --S $PS --algos fused >"$OUT/bench.log" 2>&1
  note "ncu rc=$?"
  if [ -n "${PROF_CLI_H:-}" ] && [ -x "$CLI" ]; then
    for h in $PROF_CLI_H; do
      step "litetopk bench dsa H=$h"
      timeout $(tmo 90) "$CLI" bench dsa --T 8192 --S 1048576 --H $h --D 128 --k 2048 --chunk 8192 --backend cuda \
        --algos fused,score_only --reps 3 --warmup 1 --json "$OUT/bench.jsonl" >>"$OUT/cli.log" 2>&1
      note "cli H=$h rc=$?: $(grep -E '^  (fused|score_only) ' "$OUT/cli.log" | tail -2 | tr -s ' ' | tr '\n' ';')"
    done
  fi
  grep -E "^  [a-z_]+.*\(|Duration|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Compute \(SM\) Throughput|Memory Throughput" \
    "$OUT/extra.log" "$OUT/bench.log" | head -150 >>"$SUM"
  step "done"
  tail -150 "$SUM"
  exit 0
fi

if [ "$MODE" = debug ]; then
  step "medium tests, traced (several units per CTA)"
  LTK_CUDA_TRACE=1 LTK_TEST_TIMEOUT_S=60 timeout $(tmo 200) "$BIN/test-cuda-indexer" medium_ >"$OUT/test.log" 2>&1
  note "medium rc=$?: $(grep -E 'passed,' "$OUT/test.log" | tail -1)"
  grep -E "WATCHDOG|^\[ (FAIL|TIME|CRASH|ERROR)|FAIL " "$OUT/test.log" | head -12 | tee -a "$SUM"
  step "bench T=1024 S=262144, traced"
  LTK_CUDA_TRACE=1 timeout $(tmo 100) "$BIN/bench-cuda-indexer" --T 1024 --H 64 --k 2048 --reps 2 --S 262144 \
    --json "$OUT/bench.jsonl" >"$OUT/bench.log" 2>&1
  note "bench T=1024 rc=$?"
  grep -E "WATCHDOG|ERROR" "$OUT/bench.log" | head -5 | tee -a "$SUM"
  tail -4 "$OUT/bench.log" | tee -a "$SUM"
  step "small tests"
  LTK_TEST_TIMEOUT_S=60 timeout $(tmo 150) "$BIN/test-cuda-indexer" small_ >>"$OUT/test.log" 2>&1
  note "small rc=$?: $(grep -E 'passed,' "$OUT/test.log" | tail -1)"
  grep -E "WATCHDOG|^\[ (FAIL|TIME|CRASH|ERROR)|FAIL " "$OUT/test.log" | tail -n +1 | head -20 | tee -a "$SUM"
  step "large tests"
  LTK_TEST_TIMEOUT_S=75 timeout $(tmo 400) "$BIN/test-cuda-indexer" large_ >>"$OUT/test.log" 2>&1
  note "large rc=$?: $(grep -E 'passed,' "$OUT/test.log" | tail -1)"
  grep -E "WATCHDOG|^\[ (FAIL|TIME|CRASH|ERROR)|FAIL |cold:|hot :" "$OUT/test.log" | tail -12 | tee -a "$SUM"
  if grep -q '"algo": "fused"' "$OUT/bench.jsonl" 2>/dev/null && [ "$(tmo 200)" -ge 120 ]; then
    step "indexer benchmark (H=64, T=8192)"
    timeout $(tmo 200) "$BIN/bench-cuda-indexer" --T 8192 --H 64 --k 2048 --reps ${REPS:-3} \
      --S ${BENCH_S:-262144,1048576} --json "$OUT/bench.jsonl" >>"$OUT/bench.log" 2>&1
    note "bench H=64 rc=$?"
  fi
  step "done"
  cat "$SUM" | tail -60
  exit 0
fi

if [ "$MODE" != bench ]; then
  step "smoke test"
  timeout $(tmo 45) "$BIN/test-cuda-indexer" small_edges >"$OUT/test.log" 2>&1
  rc=$?
  note "smoke rc=$rc: $(grep -E 'passed,' "$OUT/test.log" | tail -1)"
  if [ $rc -eq 124 ]; then
    note "smoke test hung: the sm_90a kernel is suspect; tests go on on the portable path, no benchmarks"
    export LTK_CUDA_PORTABLE=1
    HUNG=1
  fi
  step "GPU tests"
  # the portable path is far too slow for the large_* shapes: small tests only then
  if [ "$MODE" = quick ] || [ "${HUNG:-0}" = 1 ]; then filt=small_; else filt=; fi
  timeout $(tmo ${TEST_S:-200}) "$BIN/test-cuda-indexer" $filt >>"$OUT/test.log" 2>&1
  note "test-cuda-indexer rc=$?: $(grep -E 'passed,' "$OUT/test.log" | tail -1)"
  grep -E "^\[ FAIL|FAIL " "$OUT/test.log" | head -12 | tee -a "$SUM"
  grep -E "cold:|hot :" "$OUT/test.log" | tee -a "$SUM"
  if [ "${HUNG:-0}" != 1 ]; then
    step "small GPU tests on the portable path (LTK_CUDA_PORTABLE=1)"
    LTK_CUDA_PORTABLE=1 timeout $(tmo 90) "$BIN/test-cuda-indexer" small_ >>"$OUT/test.log" 2>&1
    note "test-cuda-indexer (portable) rc=$?: $(grep -E 'passed,' "$OUT/test.log" | tail -1)"
  fi
  for t in select knn; do
    if [ -x "$BIN/test-cuda-$t" ] && [ "${SKIP_OTHERS:-0}" != 1 ]; then
      timeout $(tmo 120) "$BIN/test-cuda-$t" >>"$OUT/test.log" 2>&1
      note "test-cuda-$t rc=$?: $(grep -E 'passed,' "$OUT/test.log" | tail -1)"
    fi
  done
  if [ -x "$BIN/test-cuda-knn" ] && [ "${SKIP_OTHERS:-0}" != 1 ]; then
    # the run above used the kNN's wgmma + TMA main loop (knn-sm90.cu, the default on sm_90); then
    # the mma.sync loop that other GPUs run
    step "test-cuda-knn with LTK_CUDA_PORTABLE=1"
    echo "== LTK_CUDA_PORTABLE=1" >>"$OUT/test.log"
    LTK_CUDA_PORTABLE=1 timeout $(tmo 120) "$BIN/test-cuda-knn" >>"$OUT/test.log" 2>&1
    note "test-cuda-knn (LTK_CUDA_PORTABLE=1) rc=$?: $(grep -E 'passed,' "$OUT/test.log" | tail -1)"
    if command -v compute-sanitizer >/dev/null; then
      for tool in memcheck racecheck; do
        echo "== $tool test-cuda-knn --small (sm90)" >>"$OUT/sanitizer.log"
        LTK_TEST_TIMEOUT_S=0 timeout $(tmo 90) compute-sanitizer --tool $tool --print-limit 20 "$BIN/test-cuda-knn" --small \
          >>"$OUT/sanitizer.log" 2>&1
        note "$tool knn sm90 rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed,' "$OUT/sanitizer.log" | tail -2 | tr '\n' ' ')"
      done
    fi
  fi
fi

if [ "$MODE" != tests ] && [ "$MODE" != quick ] && [ "${HUNG:-0}" != 1 ]; then
  step "indexer benchmark (H=64)"
  timeout $(tmo 150) "$BIN/bench-cuda-indexer" --T 8192 --H 64 --k 2048 --reps ${REPS:-5} \
    --S ${BENCH_S:-262144,524288,786432,1048576} --json "$OUT/bench.jsonl" >"$OUT/bench.log" 2>&1
  note "bench H=64 rc=$?"
  step "indexer benchmark (H=32)"
  timeout $(tmo 60) "$BIN/bench-cuda-indexer" --T 8192 --H 32 --k 2048 --reps ${REPS:-5} --S 1048576 \
    --algos fused,fused_cold,score_only --json "$OUT/bench.jsonl" >>"$OUT/bench.log" 2>&1
  note "bench H=32 rc=$?"
  if [ -x "$CLI" ]; then
    step "litetopk bench dsa"
    timeout $(tmo 90) "$CLI" bench dsa --T 8192 --S 1048576 --H 64 --D 128 --k 2048 --chunk 8192 --backend cuda \
      --algos fused,score_only,materialize --reps 3 --warmup 1 --json "$OUT/bench.jsonl" >>"$OUT/extra.log" 2>&1
    note "cli bench dsa rc=$?"
    for c in ${CHUNKS:-}; do
      timeout $(tmo 60) "$CLI" bench dsa --T 8192 --S 1048576 --H 64 --D 128 --k 2048 --chunk $c --backend cuda \
        --algos fused --reps 2 --warmup 0 --json "$OUT/bench.jsonl" >>"$OUT/extra.log" 2>&1
      note "cli bench dsa chunk $c rc=$?"
    done
  fi
  [ "${SKIP_CASES:-0}" != 1 ] && run_cases
  step "plot"
  python3 bench/plot_h200.py "$OUT/bench.jsonl" --out "$OUT" 2>&1 | tail -3 | tee -a "$SUM"
fi

if [ "$MODE" != bench ]; then
  if command -v compute-sanitizer >/dev/null; then
    step "compute-sanitizer"
    for run in memcheck:small_edges memcheck:small_flat memcheck:small_state racecheck:small_race; do
      tool=${run%%:*}
      f=${run#*:}
      echo "== $tool $f" >>"$OUT/sanitizer.log"
      # in-process (no per-test child) and no watchdog: the sanitizers slow every wait down
      LTK_TEST_TIMEOUT_S=0 LTK_CUDA_WATCHDOG_S=0 timeout $(tmo 60) compute-sanitizer --tool $tool --print-limit 20 \
        "$BIN/test-cuda-indexer" $f >>"$OUT/sanitizer.log" 2>&1
      note "$tool $f rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed,' "$OUT/sanitizer.log" | tail -2 | tr '\n' ' ')"
    done
  else
    note "compute-sanitizer not found"
  fi
fi

step "done"
{
  echo
  echo "== summary =="
  cat "$SUM"
  if [ -f "$OUT/bench.log" ]; then
    echo
    sed -n '/^S  *algo/,$p' "$OUT/bench.log"
  fi
} | tail -80
