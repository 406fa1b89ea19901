#!/usr/bin/env bash
# The source article's allocation demonstration (issue 5): a deliberately allocating decoder
# (each record copied into a fresh heap buffer, decoded there, freed) against the zero-copy reader,
# over the same million-frame journal. Reports allocation calls (counted inside the program,
# during the walk) and `strace -c -f` system call counts of each whole process.
#
#   scripts/alloc_demo.sh                 # N=1000000, build/ from `make build`
#   N=200000 BUILD=build scripts/alloc_demo.sh
#
# The article saw 31 vs 29 system calls (Rust); whatever we see is printed, not asserted.
set -euo pipefail

BUILD=${BUILD:-build}
N=${N:-1000000}
OUT=${OUT:-$BUILD/report}
mkdir -p "$OUT"
J="$OUT/alloc_demo.ofl"
BIN="$BUILD/bench/bench_alloc_decoder"
for f in "$BUILD/tollfree" "$BIN"; do
    [ -x "$f" ] || { echo "alloc_demo: $f missing (run make build)" >&2; exit 2; }
done
command -v strace >/dev/null || { echo "alloc_demo: strace missing (apt-get install strace)" >&2; exit 2; }

"$BUILD/tollfree" journal gen --count "$N" --seed 1 --force "$J" >/dev/null
"$BUILD/tollfree" journal verify "$J"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
declare -A line calls
for mode in alloc zero-copy; do
    "$BIN" --mode "$mode" "$J" >/dev/null # warm the page cache for both
    line[$mode]=$("$BIN" --mode "$mode" "$J")
    strace -c -f -o "$tmp/$mode.strace" "$BIN" --mode "$mode" "$J" >/dev/null
    # the "total" row: % time, seconds, usecs/call, calls, [errors], total
    calls[$mode]=$(awk '$NF == "total" {print $4}' "$tmp/$mode.strace")
done

field() { sed -n "s/.*$2=\([^ ]*\).*/\1/p" <<<"$1"; }
echo
echo "## Allocation demonstration: $N-record journal ($(stat -c %s "$J") bytes), $(date -u +%Y-%m-%d)"
echo
echo "| decoder | records | allocation calls | free calls | walk ms | system calls (strace -c -f) | checksum |"
echo "|---|---|---|---|---|---|---|"
for mode in alloc zero-copy; do
    l=${line[$mode]}
    name=$([ "$mode" = alloc ] && echo "allocating (heap copy per record)" || echo "zero-copy (decode in place)")
    echo "| $name | $(field "$l" records) | $(field "$l" allocations) | $(field "$l" frees) | $(field "$l" walk_ms) | ${calls[$mode]} | $(field "$l" checksum) |"
done
echo
echo "System calls by name (alloc / zero-copy):"
join -a1 -a2 -e 0 -o 0,1.2,2.2 \
    <(awk 'NR > 2 && $NF != "total" && $1 !~ /^-/ {print $NF, $4}' "$tmp/alloc.strace" | sort) \
    <(awk 'NR > 2 && $NF != "total" && $1 !~ /^-/ {print $NF, $4}' "$tmp/zero-copy.strace" | sort) |
    awk '{printf "  %-16s %6s %6s%s\n", $1, $2, $3, ($2 != $3 ? "   <- differs" : "")}'
[ "$(field "${line[alloc]}" checksum)" = "$(field "${line[zero-copy]}" checksum)" ] ||
    { echo "alloc_demo: the two decoders disagree" >&2; exit 1; }
rm -f "$J"
