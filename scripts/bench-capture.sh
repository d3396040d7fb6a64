#!/usr/bin/env bash
# Benchmark the post-processing of a real report: `nsys-jax-pipe archive REPORT --pipeline
# pipelines/default.toml` (export, projection, push/pop, metadata, dump compression, sources,
# the zip, and the default analyses stored in it) with an empty cache and with everything
# cached, against a bare `nsys export` of the same report (SQLite, what the Python tool
# starts from, and arrowdir, what this tool asks for) on the same machine.
# Usage: scripts/bench-capture.sh [RUNS] [REPORT]   (default: the h200 long_1proc fixture)
# Needs nsys ($NSYS, else nsys on PATH, else .nsys/ from scripts/install-nsys.sh .nsys).
# The Python nsys-jax takes 7.7 s for the archive alone and 45.6 s with both analyses.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-5}"
fixtures="${NSYS_JAX_PIPE_FIXTURES:-$(pwd)/../shared/fixtures}"
report="${2:-$fixtures/h200/long_1proc/rep.nsys-rep}"
nsys="${NSYS:-$(command -v nsys || echo "$(pwd)/.nsys/target-linux-x64/nsys")}"
[[ -x "$nsys" ]] || { echo "no nsys: set NSYS or run scripts/install-nsys.sh .nsys" >&2; exit 2; }
export NSYS="$nsys"
cargo build --release --quiet
bin=$(pwd)/target/release/nsys-jax-pipe
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# "wall_seconds peak_rss_kib" of one command, the process alone (scripts/measure.py).
measure() {
  python3 scripts/measure.py "$@"
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

sqlite=(); arrow=(); cold=(); warm=(); rss=()
for i in $(seq "$runs"); do
  rm -rf "$tmp"/x*
  read -r w _ < <(measure "$nsys" export --type sqlite -o "$tmp/x.sqlite" "$report")
  sqlite+=("$w")
  read -r w _ < <(measure "$nsys" export --type arrowdir -o "$tmp/xa" "$report")
  arrow+=("$w")
  rm -rf "$tmp/cache" "$tmp/a.zip"
  read -r w r < <(measure "$bin" archive -q -f --cache-dir "$tmp/cache" --pipeline pipelines/default.toml -o "$tmp/a.zip" "$report")
  cold+=("$w"); rss+=("$r")
  read -r w _ < <(measure "$bin" archive -q -f --cache-dir "$tmp/cache" --pipeline pipelines/default.toml -o "$tmp/a.zip" "$report")
  warm+=("$w")
done
s=$(printf '%s\n' "${sqlite[@]}" | median)
a=$(printf '%s\n' "${arrow[@]}" | median)
c=$(printf '%s\n' "${cold[@]}" | median)
wm=$(printf '%s\n' "${warm[@]}" | median)
r=$(printf '%s\n' "${rss[@]}" | sort -n | tail -1)
echo "report: $report ($(du -h "$report" | cut -f1)); medians over $runs runs"
echo "bare nsys export --type sqlite:   $s s"
echo "bare nsys export --type arrowdir: $a s"
echo "archive + default analyses, cold: $c s (peak RSS $((r / 1024)) MiB)"
echo "archive + default analyses, warm: $wm s"
awk -v c="$c" -v s="$s" -v a="$a" 'BEGIN {printf "ratio cold / bare sqlite export: %.2f; cold / bare arrowdir export: %.2f\n", c / s, c / a}'
