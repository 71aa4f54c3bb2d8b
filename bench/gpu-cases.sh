# GPU cases run by scripts/gpu.sh on the H200, from the repository root after the build: one command a line.
# Python binding (issue 3): numpy/torch CPU and CUDA-tensor tests against the library just built.
LTK_LIBRARY="${LTK_LIBRARY:-$(ls -t build*/liblitetopk.so 2>/dev/null | head -1)}" python3 -m pytest -q -rs -p no:cacheprovider python/tests
# GPU select + kNN (src/cuda/select.cu, knn.cu; issue 4 item 5, issue 5): GPU tests + compute-sanitizer (the carried
# gpu-bin/ binaries, else a standalone build), the CLI select bench, then same-process comparisons with torch.topk and
# cuBLAS GEMM + torch.topk; JSON lines appended to $OUT/bench.jsonl (op select / knn), summaries to stdout.
B=$([ -x gpu-bin/test-cuda-select ] && echo gpu-bin || { sh tests/cuda/standalone.sh build-sk >/dev/null && echo build-sk; }) OUT=/tmp/ltk-sk bash bench/gpu_sk_run.sh tests
for s in "1 1048576" "64 1048576" "128 1048576" "8192 1048576"; do set -- $s; $(ls -t build*/tools/litetopk | head -1) bench select --backend cuda --rows $1 --cols $2 --k 2048 --dtype f32 --dist normal --json "${OUT:-.}/bench.jsonl"; done
LTK_LIBRARY="${LTK_LIBRARY:-$(ls -t build*/liblitetopk.so build-sk/libltk_cuda_sk.so 2>/dev/null | head -1)}" python3 bench/gpu_select_torch.py --json "${OUT:-.}/bench.jsonl"
LTK_LIBRARY="${LTK_LIBRARY:-$(ls -t build*/liblitetopk.so build-sk/libltk_cuda_sk.so 2>/dev/null | head -1)}" python3 bench/gpu_knn_torch.py --json "${OUT:-.}/bench.jsonl"
