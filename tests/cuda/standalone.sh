#!/bin/sh
# Builds the GPU select / kNN tests and a small shared library (select.cu + knn.cu + an error shim)
# without the rest of the library, into ${1:-build-gpu2}. Used where the full CUDA build is not
# available yet; the same tests are registered in tests/cuda/CMakeLists.txt for the full build.
set -e
B=${1:-build-gpu2}
mkdir -p "$B"
CUDA=${CUDA_HOME:-/usr/local/cuda}
ARCH="-gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_80,code=sm_80"
for f in select knn knn-sm90; do
  "$CUDA/bin/nvcc" -std=c++17 -O3 -lineinfo -Xcompiler -fPIC $ARCH -Iinclude -Isrc -c src/cuda/$f.cu -o "$B/$f.o" &
done
wait
LIBS="-L$CUDA/lib64 -lcudart_static -lstdc++ -lpthread -ldl -lrt -lm"
for t in select knn; do
  cc -std=gnu11 -O2 -Wall -Wextra -Wno-unused-parameter -Wno-unused-function -Iinclude -I"$CUDA/include" \
     tests/cuda/test-cuda-$t.c tests/cuda/ltk-cuda-shim.c "$B/select.o" "$B/knn.o" "$B/knn-sm90.o" $LIBS -o "$B/test-cuda-$t"
done
cc -shared -fPIC -O2 -Iinclude -I"$CUDA/include" tests/cuda/ltk-cuda-shim.c "$B/select.o" "$B/knn.o" "$B/knn-sm90.o" $LIBS \
   -o "$B/libltk_cuda_sk.so"
echo "built $B/test-cuda-select $B/test-cuda-knn $B/libltk_cuda_sk.so"
