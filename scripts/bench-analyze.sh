#!/usr/bin/env bash
# Benchmark `analyze` on the four JAX-Toolbox pax archives: cold (empty cache) and warm
# (everything cached) wall time, and peak RSS. Usage: scripts/bench-analyze.sh [RUNS]
# The Python nsys-jax takes 34.8 s and 1.0 GiB for the same work on a 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-5}"
fixtures="${NSYS_JAX_PIPE_FIXTURES:-$(pwd)/../shared/fixtures}"
inputs=("$fixtures"/jaxtoolbox-pax-fsdp4-4proc/proc{0,1,2,3}.zip)
cargo build --release --quiet
bin=target/release/nsys-jax-pipe
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Prints "wall_seconds peak_rss_kib" of one command (GNU time).
measure() {
  /usr/bin/time -f '%e %M' -o "$tmp/time" "$@" >/dev/null 2>&1
  cat "$tmp/time"
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

cold=(); cold_rss=(); warm=()
for i in $(seq "$runs"); do
  rm -rf "$tmp/cache" "$tmp/out"
  read -r w r < <(measure "$bin" analyze -q --cache-dir "$tmp/cache" -o "$tmp/out" "${inputs[@]}")
  cold+=("$w"); cold_rss+=("$r")
  read -r w _ < <(measure "$bin" analyze -q --cache-dir "$tmp/cache" -o "$tmp/out2" "${inputs[@]}")
  warm+=("$w")
done
c=$(printf '%s\n' "${cold[@]}" | median)
wm=$(printf '%s\n' "${warm[@]}" | median)
rss=$(printf '%s\n' "${cold_rss[@]}" | sort -n | tail -1)
echo "cold analyze (4 pax archives): median ${c} s over ${runs} runs; peak RSS $((rss / 1024)) MiB"
awk -v w="$wm" -v c="$c" 'BEGIN {printf "warm analyze (all cached):     median %s s (%.2f %% of cold)\n", w, 100 * w / c}'
awk -v c="$c" 'BEGIN {printf "speed-up vs nsys-jax (34.8 s): %.1fx\n", 34.8 / c}'
