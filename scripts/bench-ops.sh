#!/usr/bin/env bash
# What `ops` and `sources` add to `analyze`: cold (empty cache) and warm wall time of the
# default analyses alone and with ops + sources, interleaved, median of RUNS, per input.
# Usage: scripts/bench-ops.sh [RUNS] [INPUT...]  (default inputs: the four pax archives and
# the h200 long_1proc report, from the shared fixtures; reports need nsys: $NSYS).
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-7}"
shift || true
fixtures="${NSYS_JAX_PIPE_FIXTURES:-$(pwd)/../shared/fixtures}"
cargo build --release --quiet
bin=target/release/nsys-jax-pipe
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
default=(--analysis summary --analysis communication --analysis compilation)
plus=("${default[@]}" --analysis ops --analysis sources)

bench() { # name, inputs...
  local name=$1; shift
  local -a cold_d=() cold_p=() warm_d=() warm_p=()
  for _ in $(seq "$runs"); do
    for mode in d p; do
      local -a a=("${default[@]}"); [ "$mode" = p ] && a=("${plus[@]}")
      rm -rf "$tmp/cache" "$tmp/out"
      /usr/bin/time -f '%e' -o "$tmp/t" "$bin" analyze -q --cache-dir "$tmp/cache" -o "$tmp/out" "${a[@]}" "$@" >/dev/null 2>&1
      local c; c=$(cat "$tmp/t")
      rm -rf "$tmp/out"
      /usr/bin/time -f '%e' -o "$tmp/t" "$bin" analyze -q --cache-dir "$tmp/cache" -o "$tmp/out" "${a[@]}" "$@" >/dev/null 2>&1
      local w; w=$(cat "$tmp/t")
      if [ "$mode" = d ]; then cold_d+=("$c"); warm_d+=("$w"); else cold_p+=("$c"); warm_p+=("$w"); fi
    done
  done
  local cd cp wd wp
  cd=$(printf '%s\n' "${cold_d[@]}" | median); cp=$(printf '%s\n' "${cold_p[@]}" | median)
  wd=$(printf '%s\n' "${warm_d[@]}" | median); wp=$(printf '%s\n' "${warm_p[@]}" | median)
  awk -v n="$name" -v cd="$cd" -v cp="$cp" -v wd="$wd" -v wp="$wp" 'BEGIN {
    printf "%-28s cold %5.2f s -> %5.2f s (%+.0f %%)   warm %5.2f s -> %5.2f s\n", n, cd, cp, 100 * (cp - cd) / cd, wd, wp }'
}

if [ "$#" -gt 0 ]; then
  bench "$(basename "$1")" "$@"
else
  bench "pax4 (4 archives)" "$fixtures"/jaxtoolbox-pax-fsdp4-4proc/proc{0,1,2,3}.zip
  bench "h200 long_1proc (report)" "$fixtures"/h200/long_1proc/rep.nsys-rep
fi
