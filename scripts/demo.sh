#!/usr/bin/env bash
# Builds the CLI and runs the main job, `litetopk demo` (GPU when present, else CPU), passing its
# arguments on (e.g. --quick). The CUDA backend is built when nvcc is found AND a GPU answers
# nvidia-smi; on a machine with nvcc but no GPU the demo would not use it, so it is skipped to save
# minutes of compile (LTK_CUDA=ON|OFF|AUTO overrides: AUTO builds whenever nvcc is found).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
BUILD=${BUILD:-build}
cuda=${LTK_CUDA:-}
if [ -z "$cuda" ]; then
  if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
    if nvidia-smi -L >/dev/null 2>&1; then
      cuda=AUTO
    else
      echo "demo: nvcc is here but no GPU answers nvidia-smi: building the CPU backend only (LTK_CUDA=ON builds CUDA too)"
      cuda=OFF
    fi
  else
    cuda=AUTO
  fi
fi
echo "demo: configuring $BUILD (LTK_CUDA=$cuda)"
log=$(mktemp)
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLTK_CUDA="$cuda" >"$log" 2>&1 || { cat "$log"; exit 1; }
grep -E "litetopk:" "$log" || true
rm -f "$log"
echo "demo: building the CLI (progress below)"
cmake --build "$BUILD" -j "$(nproc)" --target litetopk_cli
echo
exec "$BUILD/tools/litetopk" demo "$@"
