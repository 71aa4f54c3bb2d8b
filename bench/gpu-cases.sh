# GPU cases run by scripts/gpu.sh on the H200, from the repository root after the build: one command a
# line, "tag: command". CASES="py dsa" (gpu.sh's environment) runs only lines with those tags; empty =
# all. Each line has its own time limit (CASE_S, default 120 s). JSON lines go to $OUT/bench.jsonl.
# Python binding: numpy/torch CPU and CUDA-tensor tests against the library just built.
py: python3 -m pytest -q -rs -p no:cacheprovider python/tests
# Indexer: litetopk fused / score-only / materialize vs the torch baseline (Triton fused-heads
# FP8 logits + torch.topk, 512 MB logits budget), same process, same tensors.
dsa: python3 bench/dsa_torch.py --S 262144,1048576 --reps 3 --json "$OUT/bench.jsonl"
dsa32: python3 bench/dsa_torch.py --H 32 --S 1048576 --reps 3 --json "$OUT/bench.jsonl"
# Prefill driver: exactness at L=65536 for the three shapes (fused vs materialize bit-exact,
# vs the torch partition-merge of StreamIndex), then the scaling study; materialize under a 512 MB
# logits budget (what vLLM budgets).
# (pcheck: the three L = 65,536 exactness lines alone; othr: the select and kNN GPU tests alone.)
# (p1m: the two L = 1M lines of the scaling study, runnable alone.)
# (p1s: the V3.2 L = 1M prefill against its own scan alone (score_only, no selection): the ceiling.)
# (xover: where a fused call should run as dense windows: 8,192 rows at the end of S keys, the
#  filter (LTK_CUDA_FUSED_DENSE_S=0) vs dense windows; ptrace: the V3.2 L=1M prefill with every
#  stage synchronised and timed, summed by stage; the tables go to extra.log.)
prefill: LTK_CUDA_MAT_BUDGET_MB=512 python3 bench/prefill_torch.py --shape v4-flash --L 65536 --check --json "$OUT/bench.jsonl"
prefill: LTK_CUDA_MAT_BUDGET_MB=512 python3 bench/prefill_torch.py --shape v4-pro --L 65536 --check --json "$OUT/bench.jsonl"
prefill: LTK_CUDA_MAT_BUDGET_MB=512 python3 bench/prefill_torch.py --shape v32 --L 65536 --check --json "$OUT/bench.jsonl"
prefill: LTK_CUDA_MAT_BUDGET_MB=512 python3 bench/prefill_torch.py --shape v4-flash --L 262144 --json "$OUT/bench.jsonl"
prefill: LTK_CUDA_MAT_BUDGET_MB=512 python3 bench/prefill_torch.py --shape v32 --L 262144 --algos fused,materialize --json "$OUT/bench.jsonl"
p1m: LTK_CUDA_MAT_BUDGET_MB=512 python3 bench/prefill_torch.py --shape v4-flash --L 1048576 --algos fused,materialize --json "$OUT/bench.jsonl"
prefill: LTK_CUDA_MAT_BUDGET_MB=512 python3 bench/prefill_torch.py --shape v4-flash --L 1048576 --chunk 16384 --algos fused,materialize --json "$OUT/bench.jsonl"
p1m: LTK_CUDA_MAT_BUDGET_MB=512 python3 bench/prefill_torch.py --shape v32 --L 1048576 --algos fused,materialize --json "$OUT/bench.jsonl"
prefill: LTK_CUDA_MAT_BUDGET_MB=512 python3 bench/prefill_torch.py --shape v4-pro --L 262144 --algos fused,materialize --json "$OUT/bench.jsonl"
prefill: LTK_CUDA_MAT_BUDGET_MB=512 python3 bench/prefill_torch.py --shape v4-pro --L 1048576 --algos fused,materialize --json "$OUT/bench.jsonl"
prefill: LTK_CUDA_MAT_BUDGET_MB=512 python3 bench/prefill_torch.py --shape v4-flash --L 2097152 --algos fused,materialize --json "$OUT/bench.jsonl"
# Where the fused call's time goes (every stage synchronised and timed; T=8192 S=256K, H=64).
trace: LTK_CUDA_TRACE=1 gpu-bin/bench-cuda-indexer --T 8192 --H 64 --k 2048 --reps 1 --S 262144 --algos fused 2>&1 | grep -E "ltk cuda|median"
# GPU select + kNN (src/cuda/select.cu, knn.cu): the CLI select bench, then same-process
# comparisons with torch.topk and cuBLAS GEMM + torch.topk (their GPU tests and compute-sanitizer runs are steps of
# scripts/gpu.sh itself); JSON lines appended to $OUT/bench.jsonl (op select / knn), summaries to stdout.
sk: for s in "1 1048576" "64 1048576" "128 1048576" "8192 1048576"; do set -- $s; $(ls -t build*/tools/litetopk | head -1) bench select --backend cuda --rows $1 --cols $2 --k 2048 --dtype f32 --dist normal --json "${OUT:-.}/bench.jsonl"; done
sk: python3 bench/gpu_select_torch.py --json "${OUT:-.}/bench.jsonl"
sk: python3 bench/gpu_knn_torch.py --json "${OUT:-.}/bench.jsonl"
# The kNN benchmark on both main loops: the sm_90a wgmma + TMA loop (the default), then the portable mma.sync loop
# that other GPUs run (LTK_CUDA_PORTABLE=1, read once per process: one process each; records name it in main_loop).
knn90: python3 bench/gpu_knn_torch.py --json "${OUT:-.}/bench.jsonl"
knn90: LTK_CUDA_PORTABLE=1 python3 bench/gpu_knn_torch.py --json "${OUT:-.}/bench.jsonl"
p1s: LTK_CUDA_MAT_BUDGET_MB=512 python3 bench/prefill_torch.py --shape v32 --L 1048576 --algos fused,score_only --json "$OUT/bench.jsonl"
xover: for d in 0 1048576; do echo "LTK_CUDA_FUSED_DENSE_S=$d"; LTK_CUDA_FUSED_DENSE_S=$d gpu-bin/bench-cuda-indexer --T 8192 --H 64 --k 2048 --reps 3 --S 131072,262144,393216,524288 --algos fused; done
trace: LTK_CUDA_TRACE=1 gpu-bin/bench-cuda-indexer --T 8192 --H 64 --k 2048 --reps 1 --S 1048576 --algos fused 2>&1 | grep -E "ltk cuda|median" | grep -v "dense s"
ptrace: LTK_CUDA_TRACE=1 python3 bench/prefill_torch.py --shape v32 --L 1048576 --algos fused 2>&1 | awk '/ltk cuda\]/ && / ms$/ { n = $0; sub(/^\[ltk cuda\] /, "", n); sub(/ +[0-9.]+ ms$/, "", n); sub(/ rows.*/, "", n); sub(/ \(.*/, "", n); t[n] += $(NF-1); c[n]++ } END { for (x in t) printf "%-40s %5d calls %10.1f ms\n", x, c[x], t[x] }'
pcheck: LTK_CUDA_MAT_BUDGET_MB=512 python3 bench/prefill_torch.py --shape v4-flash --L 65536 --check --json "$OUT/bench.jsonl"
pcheck: LTK_CUDA_MAT_BUDGET_MB=512 python3 bench/prefill_torch.py --shape v4-pro --L 65536 --check --json "$OUT/bench.jsonl"
pcheck: LTK_CUDA_MAT_BUDGET_MB=512 python3 bench/prefill_torch.py --shape v32 --L 65536 --check --json "$OUT/bench.jsonl"
cli32: for a in score_only,fused fused,score_only; do gpu-bin/litetopk bench dsa --T 8192 --S 1048576 --H 32 --D 128 --k 2048 --chunk 8192 --backend cuda --algos $a --reps 3 --warmup 1 --json "$OUT/bench.jsonl" | grep -E "^  (fused|score_only) "; done
othr: gpu-bin/test-cuda-select | tail -3; gpu-bin/test-cuda-knn | tail -3; LTK_CUDA_PORTABLE=1 gpu-bin/test-cuda-knn | tail -2
knnq: gpu-bin/test-cuda-knn | tail -2; python3 bench/gpu_knn_torch.py --quick --json "${OUT:-.}/bench.jsonl"
# (ktl: one kNN call's kernels on a timeline (torch profiler))
ktl: python3 bench/knn_timeline.py --B 64 --N 1048576 --k 1024,8192
ktl: python3 bench/knn_timeline.py --B 64 --N 2097152 --k 128,8192
# (kmini: the real MiniLM set, its three parts copied to /tmp/minilm by earlier calls on the same
#  warm machine (each call carries one gpu-dataN: 64 MiB a call); bench/minilm_assemble.py --split)
kmini: python3 bench/minilm_assemble.py --join /tmp/minilm --out /tmp/mdata && python3 bench/gpu_knn_real.py --data /tmp/mdata --json "$OUT/bench.jsonl" | cut -c1-400
kmini: M="--base /tmp/mdata/minilm_base.fbin --queries /tmp/mdata/minilm_query.fbin --metric cos"; mkdir -p /tmp/mres; for k in 10 100 1000 10000; do for b in cuda cpu; do TIMEFORMAT="$b k=$k: %R s wall (read, compute, write)"; time gpu-bin/litetopk knn $M -k $k --backend $b --out /tmp/mres/$b-$k.npy -q; done; done; python3 bench/minilm_compare.py $M --k 10,100,1000,10000 --res /tmp/mres --json "$OUT/bench.jsonl"
kmini: M="--base /tmp/mdata/minilm_base.fbin --queries /tmp/mdata/minilm_query.fbin --metric cos"; for k in 10 100 1000 10000; do for b in cuda cpu; do gpu-bin/litetopk bench knn $M --k $k --backend $b --algos fused,materialize --reps 5 --json "$OUT/bench.jsonl" | grep -E "bench knn|^  (fused|materialize) |exactness"; done; done
# (kport: the kNN's portable mma.sync loop (other GPUs; LTK_CUDA_PORTABLE=1) under the tests and memcheck)
kport: LTK_CUDA_PORTABLE=1 gpu-bin/test-cuda-knn | tail -1; LTK_CUDA_PORTABLE=1 LTK_TEST_TIMEOUT_S=0 compute-sanitizer --tool memcheck --print-limit 20 gpu-bin/test-cuda-knn --small 2>&1 | grep -E "SUMMARY|passed,"
# (khost: a call's host side: enqueue time through the helper and the bare entry point, timed alone
#  against back to back, then the runtime calls next to the kernels)
khost: python3 bench/host_cost.py --cases decode,knn_small,knn_large,select --trace --json "$OUT/host.jsonl"
khost: python3 bench/knn_timeline.py --B 64 --N 1048576 --k 1024 --host 2>&1 | grep -v -i warn
# (p16k: the V3.2 L = 1M prefill in chunks of 16,384 queries.)
p16k: LTK_CUDA_MAT_BUDGET_MB=512 python3 bench/prefill_torch.py --shape v32 --L 1048576 --chunk 16384 --algos fused --json "$OUT/bench.jsonl"
# (ksan: compute-sanitizer memcheck and racecheck on test-cuda-knn --small; knt: the whole kNN table.)
ktest: gpu-bin/test-cuda-knn | tail -3
ksan: for t in memcheck racecheck; do LTK_TEST_TIMEOUT_S=0 compute-sanitizer --tool $t --print-limit 20 gpu-bin/test-cuda-knn --small 2>&1 | grep -E "SUMMARY|passed,"; done
knt: python3 bench/gpu_knn_torch.py --json "${OUT:-.}/bench.jsonl"
# (cli64: litetopk bench dsa at S = 1M, the three algos, for the run's board)
cli64: gpu-bin/litetopk bench dsa --T 8192 --S 1048576 --H 64 --D 128 --k 2048 --chunk 8192 --backend cuda --algos fused,score_only,materialize --reps 3 --warmup 1 --json "$OUT/bench.jsonl" | grep -E "^  (fused|score_only|materialize) |exactness"
# (kfix: the checks to run after a change to the kNN kernels: the tests on both main loops (the
#  portable one under LTK_CUDA_PORTABLE=1), memcheck and racecheck, then the timeline and the table)
kfix: gpu-bin/test-cuda-knn | tail -2; LTK_CUDA_PORTABLE=1 gpu-bin/test-cuda-knn | tail -1; for t in memcheck racecheck; do LTK_TEST_TIMEOUT_S=0 compute-sanitizer --tool $t --print-limit 20 gpu-bin/test-cuda-knn --small 2>&1 | grep -E "SUMMARY|passed,"; done
kfix: python3 bench/knn_timeline.py --B 64 --N 1048576 --k 1024,8192
kfix: python3 bench/gpu_knn_torch.py --json "${OUT:-.}/bench.jsonl"
# (kncu: Nsight Compute on the kNN threshold and final select kernels, B = 64, N = 1M, k = 1024:
#  where the threshold's ~20 us for 64 x 32,768 sampled keys go)
kncu: ncu --clock-control none --kernel-name regex:"knn_threshold_kernel|knn_final_kernel" --launch-skip 2 --launch-count 2 --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section SourceCounters -f -o "$OUT/kthr" python3 bench/knn_once.py --B 64 --N 1048576 --k 1024 --algo fused >/dev/null 2>&1; echo "ncu rc=$?"; ncu --import "$OUT/kthr.ncu-rep" --page details --csv >"$OUT/kthr-details.csv" 2>&1; ncu --import "$OUT/kthr.ncu-rep" --page source --csv --print-source sass >"$OUT/kthr-sass.csv" 2>&1; rm -f "$OUT/kthr.ncu-rep"
# (kgncu: Nsight Compute on the kNN GATE scan at B = 1024 (128-query items), N = 1M, fused and
#  score-only: what holds the large-batch loop below the GEMM rate)
kgncu: for al in fused:1 score_only:0; do ncu --clock-control none --kernel-name regex:ks_score_kernel --launch-skip ${al##*:} --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section SourceCounters --section Occupancy -f -o "$OUT/kg-${al%%:*}" python3 bench/knn_once.py --B 1024 --N 1048576 --k 1024 --algo ${al%%:*} --calls 2 >/dev/null 2>&1; echo "ncu ${al%%:*} rc=$?"; ncu --import "$OUT/kg-${al%%:*}.ncu-rep" --page details --csv >"$OUT/kg-${al%%:*}-details.csv" 2>&1; done; ncu --import "$OUT/kg-fused.ncu-rep" --page source --csv --print-source sass >"$OUT/kg-fused-sass.csv" 2>&1; rm -f "$OUT"/kg-*.ncu-rep
# (kcli: `litetopk bench knn`: B = 64, D = 768 bf16 clustered embeddings, fused / materialize /
#  score-only with the device copy rate of each process, x one read of the corpus; C host path, no
#  Python in the timed call; every shape generated directly, 1M to 5M)
kcli: for N in 1048576 2097152 4194304 5242880; do for k in 128 1024 4096 8192; do gpu-bin/litetopk bench knn --N $N --B 64 --D 768 --k $k --dtype bf16 --backend cuda --algos fused,materialize,score_only --reps 20 --json "$OUT/bench.jsonl" | grep -E "bench knn|device copy|^  (fused|materialize|score_only) |exactness"; done; done
# (kg8: Nsight Compute on the kNN GATE scan at B = 64 (64-query items), N = 1M, k = 1024 and 8192:
#  where the time the gated scan gains at k = 8192 goes (13k passing entries a query))
kg8: for k in 1024 8192; do ncu --clock-control none --kernel-name regex:ks_score_kernel --launch-skip 1 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section SourceCounters -f -o "$OUT/kg$k" python3 bench/knn_once.py --B 64 --N 1048576 --k $k --algo fused --calls 2 >/dev/null 2>&1; echo "ncu k=$k rc=$?"; ncu --import "$OUT/kg$k.ncu-rep" --page details --csv >"$OUT/kg$k-details.csv" 2>&1; ncu --import "$OUT/kg$k.ncu-rep" --page source --csv --print-source sass >"$OUT/kg$k-sass.csv" 2>&1; rm -f "$OUT/kg$k.ncu-rep"; done
# (kf8: Nsight Compute on the kNN final select at B = 64, N = 1M, k = 4096 and 8192 (27 / 42 us))
kf8: for k in 4096 8192; do ncu --clock-control none --kernel-name regex:knn_final_kernel --launch-skip 1 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SourceCounters -f -o "$OUT/kf$k" python3 bench/knn_once.py --B 64 --N 1048576 --k $k --algo fused --calls 2 >/dev/null 2>&1; echo "ncu k=$k rc=$?"; ncu --import "$OUT/kf$k.ncu-rep" --page details --csv >"$OUT/kf$k-details.csv" 2>&1; ncu --import "$OUT/kf$k.ncu-rep" --page source --csv --print-source sass >"$OUT/kf$k-sass.csv" 2>&1; rm -f "$OUT/kf$k.ncu-rep"; done
# (kcli1: kcli at N = 1M only)
kcli1: for k in 128 1024 4096 8192; do gpu-bin/litetopk bench knn --N 1048576 --B 64 --D 768 --k $k --dtype bf16 --backend cuda --algos fused,materialize,score_only --reps 20 --json "$OUT/bench.jsonl" | grep -E "bench knn|device copy|^  (fused|materialize|score_only) |exactness"; done
# (kab: A/B in one process order base / new / base / new of `litetopk bench knn` at B = 64, N = 1M:
#  gpu-base/ holds the CLI and library of an earlier commit (gpu-pack/base.tar.xz, from
#  `scripts/gpu.sh prepare-base <commit>` here); fused and materialize, so each run also checks
#  fused == materialize)
kab: tar -xJf gpu-pack/base.tar.xz 2>/dev/null; echo "base $(cat gpu-base/commit) new $(cat gpu-bin/commit)"; for k in 128 1024 4096 8192; do for v in base new base new; do b=gpu-bin/litetopk; [ $v = base ] && b=gpu-base/litetopk; echo "[$v k=$k]"; $b bench knn --N 1048576 --B 64 --D 768 --k $k --dtype bf16 --backend cuda --algos fused,materialize --reps 30 | grep -E "^  fused|exactness"; done; done
kab: tar -xJf gpu-pack/base.tar.xz 2>/dev/null; for v in base new; do l=$PWD/gpu-bin/liblitetopk.so; [ $v = base ] && l=$PWD/gpu-base/liblitetopk.so; echo "[$v]"; LTK_LIBRARY=$l python3 bench/knn_timeline.py --B 64 --N 1048576 --k 1024,4096,8192 2>&1 | grep -v -i warn | grep -E "event-timed|ks_score|final|output|check"; done
# (kcli2: kcli at N = 2M, 4M, 5M (kab covers 1M))
kcli2: for N in 2097152 4194304 5242880; do for k in 128 1024 4096 8192; do gpu-bin/litetopk bench knn --N $N --B 64 --D 768 --k $k --dtype bf16 --backend cuda --algos fused,materialize,score_only --reps 20 --json "$OUT/bench.jsonl" | grep -E "bench knn|device copy|^  (fused|materialize|score_only) |exactness"; done; done
# (kcli5: kcli at N = 5M)
kcli5: for k in 128 1024 4096 8192; do gpu-bin/litetopk bench knn --N 5242880 --B 64 --D 768 --k $k --dtype bf16 --backend cuda --algos fused,materialize,score_only --reps 20 --json "$OUT/bench.jsonl" | grep -E "bench knn|device copy|^  (fused|materialize|score_only) |exactness"; done
# (dab / sab: the indexer and select of an earlier build (gpu-base/, `scripts/gpu.sh prepare-base <commit>`)
#  against this one in one process order base / new / base / new: the same bits (fused == materialize
#  on each) and times within the spread where nothing was meant to move)
dab: tar -xJf gpu-pack/base.tar.xz 2>/dev/null; echo "base $(cat gpu-base/commit) new $(cat gpu-bin/commit)"; for v in base new base new; do b=gpu-bin/litetopk; [ $v = base ] && b=gpu-base/litetopk; echo "[$v]"; $b bench dsa --T 8192 --S 1048576 --H 64 --D 128 --k 2048 --chunk 8192 --backend cuda --algos fused,score_only,materialize --reps 3 --warmup 1 $([ $v = new ] && echo --json "$OUT/bench.jsonl") | grep -E "^  (fused|score_only|materialize) |exactness"; done
sab: tar -xJf gpu-pack/base.tar.xz 2>/dev/null; for v in base new base new; do b=gpu-bin/litetopk; [ $v = base ] && b=gpu-base/litetopk; echo "[$v]"; for d in normal ties; do $b bench select --backend cuda --rows 1024 --cols 1048576 --k 2048 --dtype f32 --dist $d --reps 10 $([ $v = new ] && echo --json "$OUT/bench.jsonl") | grep -E "^  (fused|materialize) |exactness"; done; done
kabj: tar -xJf gpu-pack/base.tar.xz 2>/dev/null; for k in 128 1024 8192; do for v in base new base new; do b=gpu-bin/litetopk; [ $v = base ] && b=gpu-base/litetopk; echo "[$v k=$k]"; $b bench knn --N 1048576 --B 64 --D 768 --k $k --dtype bf16 --backend cuda --algos fused,materialize --reps 20 $([ $v = new ] && echo --json "$OUT/bench.jsonl") | grep -E "device copy|^  (fused|materialize) |exactness"; done; done
