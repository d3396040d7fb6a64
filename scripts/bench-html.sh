#!/usr/bin/env bash
# What the HTML report costs `analyze`: cold (empty cache) and warm (all cached) wall time of
# every analysis on the four JAX-Toolbox pax archives, without and with --html, and with
# BASELINE (a build without the report, e.g. of an earlier commit) when given.
# Usage: scripts/bench-html.sh [RUNS] [BASELINE]
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-7}"
baseline="${2:-}"
fixtures="${NSYS_JAX_PIPE_FIXTURES:-$(pwd)/../shared/fixtures}"
inputs=("$fixtures"/jaxtoolbox-pax-fsdp4-4proc/proc{0,1,2,3}.zip)
analyses=()
for a in summary communication compilation stragglers ops sources pgle memory; do
  analyses+=(--analysis "$a")
done
cargo build --release --quiet
bin=target/release/nsys-jax-pipe
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

seconds() {
  /usr/bin/time -f '%e' -o "$tmp/time" "$@" >/dev/null 2>&1
  cat "$tmp/time"
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# One cold run (empty cache) and one warm run (all cached) of NAME: appends the seconds to
# $tmp/NAME.cold and $tmp/NAME.warm. The variants take turns, so that the machine's drift
# spreads over all of them.
once() {
  local name=$1 b=$2
  shift 2
  rm -rf "$tmp/cache" "$tmp/out"
  seconds "$b" analyze -q "${analyses[@]}" --cache-dir "$tmp/cache" -o "$tmp/out" "$@" "${inputs[@]}" >>"$tmp/$name.cold"
  seconds "$b" analyze -q "${analyses[@]}" --cache-dir "$tmp/cache" -o "$tmp/out" "$@" "${inputs[@]}" >>"$tmp/$name.warm"
}

names=()
[[ -n "$baseline" ]] && names+=(baseline)
names+=(without with)
for _ in $(seq "$runs"); do
  [[ -n "$baseline" ]] && once baseline "$baseline"
  once without "$bin"
  once with "$bin" --html "$tmp/report.html"
done
echo "every analysis on the 4 pax archives, medians of $runs runs (cold: empty cache; warm: all cached):"
for n in "${names[@]}"; do
  case $n in
  baseline) label="baseline (no report)" ;;
  without) label="without --html" ;;
  with) label="with --html" ;;
  esac
  printf '%-22s cold %s s   warm %s s\n' "$label" "$(median <"$tmp/$n.cold")" "$(median <"$tmp/$n.warm")"
done
ls -l "$tmp/report.html" | awk '{print "report size: " $5 " bytes"}'
