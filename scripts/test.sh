#!/usr/bin/env bash
# The project's test command (README): builds the library, CLI and tests (the CUDA backend too when
# nvcc is present: it is compiled here even without a GPU, and its GPU tests skip), runs ctest, the
# Python binding's tests, and the fuzz targets for a few seconds each.
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
if [ "${LTK_SKIP_FUZZ:-0}" != 1 ]; then
  scripts/fuzz.sh "${LTK_FUZZ_SECONDS:-5}"
fi
