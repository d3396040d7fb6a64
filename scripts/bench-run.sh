#!/usr/bin/env bash
# Benchmark what `nsys-jax-pipe run` adds after the profiled program exits (the archive of
# the capture and the default analyses, from a local temporary folder), against a bare
# `nsys export` of the same report. Without a GPU: the stand-in nsys the tests use
# (tests/data/standin-nsys.sh) "profiles" `true` and leaves a recorded capture (report and
# XLA dump) where nsys and XLA would have written theirs; `run` reports the time it spent
# after the program as "after it".
# Usage: scripts/bench-run.sh [RUNS] [CAPTURE_DIR]
#   CAPTURE_DIR holds rep.nsys-rep and dump_rep/ (default: the h200 long_1proc fixture).
# Needs a real nsys for the export ($NSYS, else nsys on PATH, else .nsys/ from
# scripts/install-nsys.sh .nsys).
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-5}"
fixtures="${NSYS_JAX_PIPE_FIXTURES:-$(pwd)/../shared/fixtures}"
capture=$(realpath "${2:-$fixtures/h200/long_1proc}")
nsys="${NSYS:-$(command -v nsys || echo "$(pwd)/.nsys/target-linux-x64/nsys")}"
[[ -x "$nsys" ]] || { echo "no nsys: set NSYS or run scripts/install-nsys.sh .nsys" >&2; exit 2; }
cargo build --release --quiet
bin=$(pwd)/target/release/nsys-jax-pipe
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/work"
cp tests/data/standin-nsys.sh "$tmp/bin/nsys"
chmod +x "$tmp/bin/nsys"

elapsed() { # elapsed COMMAND...: wall seconds
	local start=$EPOCHREALTIME
	"$@" >/dev/null 2>&1
	awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f\n", b - a }'
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

sqlite=(); arrow=(); after=(); total=()
for i in $(seq "$runs"); do
	rm -rf "$tmp"/x*
	sqlite+=("$(elapsed "$nsys" export --type sqlite -o "$tmp/x.sqlite" "$capture/rep.nsys-rep")")
	arrow+=("$(elapsed "$nsys" export --type arrowdir -o "$tmp/xa" "$capture/rep.nsys-rep")")
	start=$EPOCHREALTIME
	out=$(cd "$tmp/work" && env -u NSYS PATH="$tmp/bin:$PATH" REAL_NSYS="$nsys" \
		STANDIN_REPORT="$capture/rep.nsys-rep" STANDIN_DUMP="$capture/dump_rep" \
		TMPDIR="$tmp" "$bin" run -q -f -o run -- true 2>/dev/null)
	total+=("$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f\n", b - a }')")
	after+=("$(sed -n 's/.*after it \([0-9.]*\) s.*/\1/p' <<<"$out")")
done
s=$(printf '%s\n' "${sqlite[@]}" | median)
a=$(printf '%s\n' "${arrow[@]}" | median)
f=$(printf '%s\n' "${after[@]}" | median)
t=$(printf '%s\n' "${total[@]}" | median)
echo "capture: $capture ($(du -h "$capture/rep.nsys-rep" | cut -f1) report, $(ls "$capture/dump_rep" | wc -l) dump files); medians over $runs runs"
echo "bare nsys export --type sqlite:   $s s"
echo "bare nsys export --type arrowdir: $a s"
echo "run, after the program exits:     $f s (archive + default analyses)"
echo "run, whole command:               $t s (stand-in nsys copying the capture included)"
awk -v f="$f" -v s="$s" -v a="$a" 'BEGIN { printf "ratio to the sqlite export: %.2f; to the arrowdir export: %.2f\n", f / s, f / a }'
