#!/bin/sh
# usage: test-install.sh BUILD_DIR SOURCE_DIR
# `cmake --install` into a fresh prefix, then examples/ built against it as a user would: through
# find_package (shared and static targets) and through pkg-config; each program runs and checks
# its results. Fails on any step.
set -eu
build=$1
src=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ltk-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
passed=0
step() { echo "== $*"; }
step "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; exit 1; }
for f in include/litetopk.h bin/litetopk; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
libdir=$(dirname "$(find "$prefix" -name 'liblitetopk.so' | head -n 1)")
for f in liblitetopk.a cmake/litetopk/litetopkConfig.cmake pkgconfig/litetopk.pc; do
  [ -e "$libdir/$f" ] || { echo "FAIL: $f not installed under $libdir"; exit 1; }
done
"$prefix/bin/litetopk" info >/dev/null
passed=$((passed + 1))

step "find_package(litetopk) in examples/"
cmake -S "$src/examples" -B "$tmp/ex" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >"$tmp/ex.log" 2>&1 &&
  cmake --build "$tmp/ex" >>"$tmp/ex.log" 2>&1 || { cat "$tmp/ex.log"; exit 1; }
"$tmp/ex/topk"
"$tmp/ex/topk_static"
passed=$((passed + 2))

step "pkg-config --cflags --libs litetopk"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc=${CC:-cc}
# shellcheck disable=SC2046
$cc -std=c11 -o "$tmp/topk-pc" "$src/examples/topk.c" $(pkg-config --cflags --libs litetopk) -Wl,-rpath,"$libdir"
"$tmp/topk-pc"
# the static library through pkg-config --static (the archive named, as a static link does)
# shellcheck disable=SC2046
$cc -std=c11 -o "$tmp/topk-pc-static" "$src/examples/topk.c" $(pkg-config --cflags litetopk) "$libdir/liblitetopk.a" \
  $(pkg-config --static --libs-only-other --libs-only-l litetopk | sed 's/-llitetopk//')
"$tmp/topk-pc-static"
passed=$((passed + 2))
echo "$passed passed, 0 failed"
