#!/usr/bin/env bash
# Installs what building and testing need on a fresh Debian machine (idempotent; quiet when all is there).
set -euo pipefail
need=()
for p in cmake gcc g++ make clang libclang-rt-14-dev libomp-dev python3-pip; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q && apt-get install -y -q "${need[@]}"
  else
    echo "setup: please install: ${need[*]}" >&2
  fi
fi
python3 -c 'import numpy, pytest, wheel' 2>/dev/null || python3 -m pip install -q numpy pytest setuptools wheel
