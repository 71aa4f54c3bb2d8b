#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/fuzz-io.c, tests/fuzz/fuzz-args.c) with clang, ASan and UBSan,
# the library instrumented too, and runs each for N seconds (default 10) on a copy of its seed
# corpus. Exit status non-zero when a target crashes or reports.
#   scripts/fuzz.sh [SECONDS] [TARGET...]      e.g. scripts/fuzz.sh 60 fuzz-args
# Environment: CC (default clang), BUILD_DIR (default build-fuzz), JOBS.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-10}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(fuzz-io fuzz-args)
build=${BUILD_DIR:-$root/build-fuzz}
cc=${CC:-clang}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}

if ! "$cc" --version 2>/dev/null | grep -qi clang; then
    echo "fuzz.sh: libFuzzer needs clang (CC=$cc)" >&2
    exit 2
fi
# Coverage instrumentation for the library as well, so the fuzzer sees the validation branches;
# the fuzz targets themselves link -fsanitize=fuzzer (tests/fuzz/CMakeLists.txt).
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"
cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLTK_CUDA=OFF \
      -DLTK_FUZZ=ON -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link $san" \
      -DCMAKE_EXE_LINKER_FLAGS="$san" -DCMAKE_SHARED_LINKER_FLAGS="$san" >/dev/null
cmake --build "$build" -j "$jobs" --target "${targets[@]}"

status=0
for t in "${targets[@]}"; do
    corpus="$build/corpus-$t"
    mkdir -p "$corpus"
    seed_dir="$root/tests/fuzz/corpus/${t#fuzz-}"
    [ -d "$seed_dir" ] && cp -n "$seed_dir"/* "$corpus"/ 2>/dev/null || true
    echo "== $t for ${seconds}s (corpus $corpus)"
    # Crash artifacts land in $build/artifacts-$t/; replay one with: $build/tests/fuzz/$t FILE
    mkdir -p "$build/artifacts-$t"
    # malloc limit above the RSS limit: the materialize baseline's workspace is rows x S floats, GiBs of
    # address space for S near 2^31 of which only the visible ranges are touched; ASan returns NULL
    # (LTK_ENOMEM) rather than aborting when an allocation cannot be had.
    # CI runs a fixed libFuzzer seed (LTK_FUZZ_SEED, default 1 under CI) so a landing is reproducible;
    # exploratory runs by hand draw a fresh seed (0).
    seed=${LTK_FUZZ_SEED:-$([ "${CI:-}" = true ] && echo 1 || echo 0)}
    if ! (cd "$build" && UBSAN_OPTIONS=print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
          "$build/tests/fuzz/$t" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -malloc_limit_mb=16384 -print_final_stats=1 -seed="$seed" \
          -artifact_prefix="$build/artifacts-$t/" "$corpus"); then
        echo "fuzz.sh: $t FAILED; reproducers in $build/artifacts-$t/" >&2
        status=1
    fi
done
exit $status
