#!/usr/bin/env bash
# The project's test command (README): builds the library, CLI and tests (the CUDA backend too when
# nvcc is present: it is compiled here even without a GPU, and its GPU tests skip), runs ctest, the
# Python binding's tests, ctest again on a CPU-only Debug build with GCC's address and
# undefined-behaviour sanitizers (LTK_SKIP_SANITIZE=1 skips it), and the fuzz targets (clang,
# libFuzzer) for a few seconds each.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD=${BUILD:-build}
JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j "$JOBS"
(cd "$BUILD" && ctest --output-on-failure -j "$JOBS")
LTK_LIBRARY="$PWD/$BUILD/liblitetopk.so" python3 -m pip install -q --no-build-isolation ./python
LTK_LIBRARY="$PWD/$BUILD/liblitetopk.so" python3 -m pytest -q python/tests
if [ "${LTK_SKIP_SANITIZE:-0}" != 1 ]; then
  # GCC's intrinsics and code paths differ from clang's (the fuzz build): a signed overflow inside
  # GCC's _mm512_reduce_add_epi32 showed up only here
  SAN=${SAN_BUILD:-build-sanitize}
  cmake -S . -B "$SAN" -DCMAKE_BUILD_TYPE=Debug -DLTK_SANITIZE=ON -DLTK_CUDA=OFF >/dev/null
  cmake --build "$SAN" -j "$JOBS"
  (cd "$SAN" && UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ctest --output-on-failure -j "$JOBS")
fi
if [ "${LTK_SKIP_FUZZ:-0}" != 1 ]; then
  scripts/fuzz.sh "${LTK_FUZZ_SECONDS:-5}"
fi
