#!/usr/bin/env bash
# The project's test command (README): installs what it needs (scripts/setup.sh test: Debian
# packages, and the Python environment .venv/), builds the library, CLI and tests (the CUDA backend
# too when nvcc is present: it is compiled here even without a GPU, and the GPU tests report
# "skipped"), runs ctest (API, oracle, backends, CLI, file formats, install + examples), installs the
# Python package into .venv with `pip install ./python` (it reuses this build) and runs pytest,
# then ctest again on a CPU-only Debug build with GCC's address and undefined-behaviour sanitizers
# (LTK_SKIP_SANITIZE=1 skips it) and the fuzz targets (clang, libFuzzer) for a few seconds each
# (LTK_SKIP_FUZZ=1 skips them). LTK_CUDA=OFF|ON|AUTO (default AUTO) chooses the CUDA backend.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
BUILD=${BUILD:-build}
JOBS=${JOBS:-$(nproc)}
VENV=${LTK_VENV:-$PWD/.venv}
stage() { echo; echo "=== test.sh: $*"; }

stage "configure and build $BUILD (LTK_CUDA=${LTK_CUDA:-AUTO})"
log=$(mktemp)
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLTK_CUDA="${LTK_CUDA:-AUTO}" >"$log" 2>&1 || { cat "$log"; exit 1; }
grep -E "litetopk:|Warning" "$log" || true
cmake --build "$BUILD" -j "$JOBS"
stage "ctest"
(cd "$BUILD" && ctest --output-on-failure -j "$JOBS")
stage "Python: pip install ./python into $VENV, then pytest"
LTK_BUILD_DIR="$PWD/$BUILD" "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation ./python
"$VENV/bin/python" -m pytest -q python/tests
if [ "${LTK_SKIP_SANITIZE:-0}" != 1 ]; then
  # GCC's intrinsics and code paths differ from clang's (the fuzz build): a signed overflow inside
  # GCC's _mm512_reduce_add_epi32 showed up only here
  SAN=${SAN_BUILD:-build-sanitize}
  stage "ctest on a CPU-only Debug build with ASan + UBSan ($SAN)"
  cmake -S . -B "$SAN" -DCMAKE_BUILD_TYPE=Debug -DLTK_SANITIZE=ON -DLTK_CUDA=OFF >"$log" 2>&1 || { cat "$log"; exit 1; }
  cmake --build "$SAN" -j "$JOBS"
  (cd "$SAN" && UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ctest --output-on-failure -j "$JOBS")
fi
if [ "${LTK_SKIP_FUZZ:-0}" != 1 ]; then
  stage "fuzzers"
  scripts/fuzz.sh "${LTK_FUZZ_SECONDS:-5}"
fi
rm -f "$log"
stage "all passed"
