#!/usr/bin/env bash
# CLI smoke test: `litetopk knn` on files with a known answer in every input/output format, the error
# paths (right exit code, a message, never a crash), bench --dump, a tiny bench dsa and knn.
# usage: test-cli.sh LITETOPK TEST_IO WORKDIR
set -u
ltk=$1 testio=$2 dir=$3
rm -rf "$dir" && mkdir -p "$dir"
fails=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect CODE PATTERN -- CMD...: exit code CODE and PATTERN somewhere in stdout+stderr.
expect() {
    local code=$1 pattern=$2; shift 3
    local out rc
    out=$("$@" 2>&1); rc=$?
    if [ "$rc" -ne "$code" ]; then fail "exit $rc (want $code): $*"; echo "$out" | tail -5; return; fi
    if [ -n "$pattern" ] && ! grep -q -- "$pattern" <<<"$out"; then fail "no '$pattern' in output of: $*"; echo "$out" | tail -5; fi
}

"$testio" --write-knn-fixture "$dir" || { echo "FAIL: fixture"; exit 1; }

# --- known answers in every format
expect 0 "" -- "$ltk" knn --base "$dir/base.fvecs" --queries "$dir/queries.fvecs" -k 3 --out "$dir/out.ivecs"
cmp -s "$dir/out.ivecs" "$dir/expect.ivecs" || fail "fvecs -> ivecs differs from the known answer"
[ -s "$dir/out.scores.fbin" ] || fail "no scores file out.scores.fbin"
expect 0 "" -- "$ltk" knn --base "$dir/base.bvecs" --queries "$dir/queries.fbin" -k 3 --out "$dir/out.ibin" --algo materialize
cmp -s "$dir/out.ibin" "$dir/expect.ibin" || fail "bvecs + fbin -> ibin differs from the known answer"
expect 0 "" -- "$ltk" knn --base "$dir/base.u8bin" --queries "$dir/queries.fvecs" -k 3 --out "$dir/out-u8.ivecs" --backend ref
cmp -s "$dir/out-u8.ivecs" "$dir/expect.ivecs" || fail "u8bin (ref backend) differs from the known answer"
expect 0 "" -- "$ltk" knn --base "$dir/base16.npy" --queries "$dir/queries16.npy" -k 3 --out "$dir/out.npy"
cmp -s "$dir/out.npy" "$dir/expect.npy" || fail "float16 npy -> npy differs from the known answer"
[ -s "$dir/out.scores.npy" ] || fail "no scores file out.scores.npy"
expect 0 "^0: 16:17 12:13 8:9" -- "$ltk" knn --base "$dir/base.fvecs" --queries "$dir/queries.fvecs" -k 3
expect 0 "" -- "$ltk" knn --base "$dir/base.fvecs" --queries "$dir/queries.fvecs" -k 3 --metric l2 --out "$dir/l2.ivecs"
expect 0 "" -- "$ltk" knn --base "$dir/base.fvecs" --queries "$dir/queries.fvecs" -k 3 --metric cos --out "$dir/cos.ivecs"
expect 0 "padded" -- "$ltk" knn --base "$dir/base.fvecs" --queries "$dir/queries.fvecs" -k 25 --out "$dir/pad.ivecs"

# --- bad input: a message and the right exit code, never a crash
expect 2 "required" -- "$ltk" knn --queries "$dir/queries.fvecs" -k 3
expect 2 "required" -- "$ltk" knn --base "$dir/base.fvecs" --queries "$dir/queries.fvecs"
expect 1 "cannot open" -- "$ltk" knn --base "$dir/nope.fvecs" --queries "$dir/queries.fvecs" -k 3
expect 1 "truncated" -- "$ltk" knn --base "$dir/truncated.fvecs" --queries "$dir/queries.fvecs" -k 3
expect 1 "dimension mismatch" -- "$ltk" knn --base "$dir/base.fvecs" --queries "$dir/queries3.fvecs" -k 3
expect 2 "unknown extension" -- "$ltk" knn --base "$dir/base.txt" --queries "$dir/queries.fvecs" -k 3
expect 2 "unknown extension" -- "$ltk" knn --base "$dir/base.fvecs" --queries "$dir/queries.fvecs" -k 3 --out "$dir/o.fvecs"
expect 1 "not vectors" -- "$ltk" knn --base "$dir/expect.ivecs" --queries "$dir/queries.fvecs" -k 3
expect 2 "out of range" -- "$ltk" knn --base "$dir/base.fvecs" --queries "$dir/queries.fvecs" -k 0
expect 2 "out of range" -- "$ltk" knn --base "$dir/base.fvecs" --queries "$dir/queries.fvecs" -k 20000
expect 2 "not an integer" -- "$ltk" knn --base "$dir/base.fvecs" --queries "$dir/queries.fvecs" -k 3x
expect 2 "unknown metric" -- "$ltk" knn --base "$dir/base.fvecs" --queries "$dir/queries.fvecs" -k 3 --metric foo
expect 2 "unknown backend" -- "$ltk" knn --base "$dir/base.fvecs" --queries "$dir/queries.fvecs" -k 3 --backend tpu
expect 2 "unknown option" -- "$ltk" knn --bogus
expect 2 "needs a value" -- "$ltk" knn --base
expect 2 "unknown command" -- "$ltk" frobnicate
expect 2 "unknown operation" -- "$ltk" bench sort
expect 2 "unknown algo" -- "$ltk" bench select --algos fused,magic
expect 2 "out of range" -- "$ltk" bench dsa --H 0
expect 2 "exceeds" -- "$ltk" bench dsa --T 100 --S 10
expect 2 "" -- "$ltk"

# --- files that are not regular files: refused with a message, never a hang or a bogus size
mkfifo "$dir/fifo.fbin" && expect 1 "is a FIFO" -- timeout 20 "$ltk" knn --base "$dir/fifo.fbin" --queries "$dir/queries.fbin" -k 3
ln -s /dev/zero "$dir/zero.fbin" && expect 1 "is a character device" -- "$ltk" knn --base "$dir/zero.fbin" --queries "$dir/queries.fbin" -k 3
mkdir -p "$dir/dir.fbin" && expect 1 "is a directory" -- "$ltk" knn --base "$dir/dir.fbin" --queries "$dir/queries.fbin" -k 3

# --- a NaN query row: answered (NaN ranks last), with one warning for its file
printf '\003\000\000\000\002\000\000\000\000\000\200\077\000\000\000\000\000\000\000\000\000\000\200\077\000\000\200\077\000\000\200\077' >"$dir/b3.fbin"
printf '\002\000\000\000\002\000\000\000\000\000\200\077\000\000\000\000\000\000\300\177\000\000\200\077' >"$dir/qnan.fbin"
expect 0 "1 of 2 query rows hold NaN or inf (first: row 1)" -- "$ltk" knn --base "$dir/b3.fbin" --queries "$dir/qnan.fbin" -k 2
[ "$("$ltk" knn --base "$dir/b3.fbin" --queries "$dir/qnan.fbin" -k 2 2>&1 | grep -c warning)" -eq 1 ] || fail "the NaN warning is not printed exactly once"
expect 0 "^1: 0:nan 1:nan" -- "$ltk" knn --base "$dir/b3.fbin" --queries "$dir/qnan.fbin" -k 2

# --- the demo says which path is faster in words, and the hot set it really carried
expect 0 "fused is .*materialize" -- "$ltk" demo --quick
expect 0 "of top-k in the [0-9]*-key hot set" -- "$ltk" demo --quick

# --- help and version
expect 0 "usage: litetopk knn" -- "$ltk" knn --help
expect 0 "usage: litetopk demo" -- "$ltk" help demo
expect 0 "big-ann-benchmarks" -- "$ltk" help formats
expect 0 "bench dsa" -- "$ltk" bench --help
expect 0 "litetopk 0." -- "$ltk" --version

# --- bench: dump the generated kNN data, search it with `knn`, tiny dsa and knn runs
expect 0 "wrote" -- "$ltk" bench knn --B 8 --N 300 --D 16 --dump "$dir/gen" --reps 0
expect 0 "" -- "$ltk" knn --base "$dir/gen.base.fbin" --queries "$dir/gen.queries.fbin" -k 5 --out "$dir/gen.ibin"
expect 0 "exactness: fused == materialize" -- "$ltk" bench knn --B 4 --N 500 --D 16 -k 10 --reps 1 --json "$dir/b.jsonl"
expect 0 "exactness: fused == materialize" -- "$ltk" bench knn --base "$dir/gen.base.fbin" --queries "$dir/gen.queries.fbin" -k 5 --reps 1
expect 0 "exactness: fused == materialize" -- "$ltk" bench dsa --T 8 --S 600 --H 4 --D 32 -k 64 --chunk 4 --reps 1 --json "$dir/b.jsonl"
expect 0 "exactness: fused == materialize" -- "$ltk" bench select --rows 3 --cols 700 -k 20 --dist ties --dtype bf16 --unsorted --reps 1 --json "$dir/b.jsonl"
expect 0 "exactness: fused == materialize" -- "$ltk" bench decode --B 3 --ctx 900 --mixed --next-n 2 --H 4 --D 32 -k 64 --block 32 --reps 1 --json "$dir/b.jsonl"
expect 0 "exactness: fused == materialize" -- "$ltk" bench blocks --T 6 --S 700 --H 4 --D 32 -k 40 --b 8 --blocks 30 --backend cpu --reps 1 --json "$dir/d.jsonl"
[ "$(grep -c '"op": "blocks"' "$dir/d.jsonl")" -eq 8 ] || fail "bench blocks: expected 8 JSON lines (4 calls, 2 algos)"
expect 0 "consumer B=2" -- "$ltk" bench decode --B 2 --ctx 700 --next-n 2 --H 4 --D 32 -k 40 --block 32 --blocks 30 --b 8 --backend cpu --reps 1 --json "$dir/e.jsonl"
[ "$(grep -c '"call": "candidates"' "$dir/e.jsonl")" -eq 2 ] || fail "bench decode --blocks: expected the consumer's 2 JSON lines"
[ "$(grep -c '"call": "blocks"' "$dir/e.jsonl")" -eq 2 ] || fail "bench decode --blocks: expected the publication's 2 JSON lines"
[ "$(wc -l < "$dir/b.jsonl")" -eq 8 ] || fail "expected 8 JSON lines in b.jsonl"
for key in '"op"' '"backend"' '"algo"' '"median_ms"' '"aux_bytes"' '"device"' '"commit"' '"candidates_mean"' '"fallback_rows"' '"harness"' '"date"'; do
    [ "$(grep -c -- "$key" "$dir/b.jsonl")" -eq 8 ] || fail "JSON lines without $key"
done
LTK_COMMIT=feedbee expect 0 "" -- "$ltk" bench select --rows 2 --cols 100 -k 5 --reps 1 --json "$dir/c.jsonl"
grep -q '"commit": "feedbee"' "$dir/c.jsonl" || fail "LTK_COMMIT not recorded"

if [ "$fails" -ne 0 ]; then echo "test-cli: $fails failures"; exit 1; fi
echo "test-cli: all passed"
