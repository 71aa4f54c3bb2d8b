#!/usr/bin/env bash
# Installs what the README's commands need on a Debian machine (idempotent; quiet when all is there).
#   scripts/setup.sh build    cmake and a C compiler (OpenMP comes with gcc): enough for `litetopk demo`
#   scripts/setup.sh test     also clang + its sanitizer runtime (fuzzers), pkg-config (install test),
#                             python3-venv, and the project's Python environment .venv/ (numpy, pytest,
#                             ml_dtypes, setuptools, wheel from PyPI, inside the venv: Debian's system
#                             Python refuses `pip install` outside one, PEP 668)
# As root it installs the Debian packages with apt-get; otherwise it names the missing ones and
# stops. Environment: LTK_PYTHON (the interpreter the venv is made from, default python3),
# LTK_VENV (default <checkout>/.venv).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
what=${1:-build}
case "$what" in build | test) ;; *) echo "usage: scripts/setup.sh [build|test]" >&2; exit 2 ;; esac

pkgs=(cmake gcc g++ make)
[ "$what" = test ] && pkgs+=(clang libclang-rt-14-dev libomp-dev pkg-config python3 python3-venv)
need=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing Debian packages: ${need[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "setup: please install (as root): apt-get install ${need[*]}" >&2
    exit 1
  fi
fi
[ "$what" = build ] && exit 0

venv=${LTK_VENV:-$root/.venv}
py=${LTK_PYTHON:-python3}
if [ ! -x "$venv/bin/python" ]; then
  echo "setup: creating the Python environment $venv (from $(command -v "$py"))" >&2
  "$py" -m venv "$venv"
fi
# setuptools >= 77 reads the SPDX license field of python/pyproject.toml; a new venv is seeded with
# an older one (65 with Python 3.11's ensurepip)
if ! "$venv/bin/python" -c 'import numpy, pytest, ml_dtypes, wheel, setuptools as s; assert int(s.__version__.split(".")[0]) >= 77' 2>/dev/null; then
  echo "setup: installing numpy, pytest, ml_dtypes, setuptools>=77, wheel into $venv" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check numpy pytest ml_dtypes "setuptools>=77" wheel
fi
