# GPU cases run by scripts/gpu.sh on the H200, from the repository root after the build: one command a line.
# Python binding (issue 3): numpy/torch CPU and CUDA-tensor tests against the library just built.
LTK_LIBRARY="${LTK_LIBRARY:-$(ls -t build*/liblitetopk.so 2>/dev/null | head -1)}" python3 -m pytest -q -rs -p no:cacheprovider python/tests
