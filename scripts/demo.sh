#!/usr/bin/env bash
# Builds litetopk and runs the main job: `litetopk demo` (GPU when present, else CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target litetopk_cli >/dev/null
exec build/tools/litetopk demo "$@"
