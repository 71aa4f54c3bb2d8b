#!/bin/sh
# usage: check-exports.sh liblitetopk.so litetopk.h
# Fails when the library exports a defined dynamic symbol outside the ltk_ prefix, or misses a
# function the header declares with LTK_API. ltk_ symbols absent from the header are listed as notes.
set -eu
lib=$1
hdr=$2
command -v nm >/dev/null || { echo "nm not found"; echo "0 passed, 1 failed"; exit 1; }
tmp=${TMPDIR:-/tmp}/ltk-exports.$$
trap 'rm -f "$tmp".*' EXIT
nm -D --defined-only "$lib" | awk 'NF >= 3 { print $3 }' | sed 's/@.*//' | sort -u >"$tmp.exported"
grep -E '^LTK_API' "$hdr" | grep -oE 'ltk_[a-z0-9_]+\(' | tr -d '(' | sort -u >"$tmp.api"
failed=0
passed=0
bad=$(grep -v '^ltk_' "$tmp.exported" || true)
if [ -n "$bad" ]; then
  echo "FAIL: symbols exported outside the ltk_ prefix:"; echo "$bad" | sed 's/^/  /'; failed=$((failed + 1))
else passed=$((passed + 1)); fi
missing=$(comm -23 "$tmp.api" "$tmp.exported")
if [ -n "$missing" ]; then
  echo "FAIL: LTK_API functions not exported:"; echo "$missing" | sed 's/^/  /'; failed=$((failed + 1))
else passed=$((passed + 1)); fi
if [ "$(wc -l <"$tmp.api")" -lt 10 ]; then
  echo "FAIL: found only $(wc -l <"$tmp.api") LTK_API functions in $hdr (header parse broken?)"; failed=$((failed + 1))
else passed=$((passed + 1)); fi
extra=$(comm -13 "$tmp.api" "$tmp.exported")
[ -n "$extra" ] && { echo "note: exported ltk_ symbols not declared in the header:"; echo "$extra" | sed 's/^/  /'; }
echo "$(wc -l <"$tmp.exported") symbols exported, $(wc -l <"$tmp.api") declared"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
