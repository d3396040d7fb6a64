#!/usr/bin/env bash
# Benchmark `analyze` on the four JAX-Toolbox pax archives, side by side with NVIDIA's Python
# nsys-jax doing the same work (`nsys-jax-combine --analysis summary --analysis
# communication`), runs interleaved: cold (empty cache) and warm (everything cached) wall
# time and peak RSS of the same two analyses, and the cold time of the default pipeline.
# Usage: scripts/bench-analyze.sh [RUNS]
# The Python tool is run when NSYS_JAX_COMBINE names it or `nsys-jax-combine` is on PATH
# (scripts/install-nsys-jax-python.sh DIR installs it into DIR/bin); else its time recorded
# on a 2-core machine, 21.1 s, is used.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-3}"
fixtures="${NSYS_JAX_PIPE_FIXTURES:-$(pwd)/../shared/fixtures}"
inputs=("$fixtures"/jaxtoolbox-pax-fsdp4-4proc/proc{0,1,2,3}.zip)
python_tool="${NSYS_JAX_COMBINE:-$(command -v nsys-jax-combine || true)}"
cargo build --release --quiet
bin=target/release/nsys-jax-pipe
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Prints "wall_seconds peak_rss_kib" of one command (scripts/measure.py: the process alone,
# from its start to its end, to a tenth of a millisecond; GNU time rounds to 10 ms, a
# twentieth of a cold run).
measure() {
  python3 scripts/measure.py "$@"
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

same=(--analysis summary --analysis communication)
# What the roofline adds to a cold default analyze: the default pipeline without diagnose
# (which computes the roofline it reads), with and without the roofline.
awk -v drop=diagnose 'BEGIN{RS="";ORS="\n\n"} !($0 ~ "name = \"" drop "\"")' pipelines/default.toml >"$tmp/with.toml"
awk 'BEGIN{RS="";ORS="\n\n"} !($0 ~ /name = "(diagnose|roofline)"/)' pipelines/default.toml >"$tmp/without.toml"
# What whatif adds: the default pipeline without it.
# Both measured the same way, one after the other (a run's place in the loop matters more
# than whatif does).
awk 'BEGIN{RS="";ORS="\n\n"} !($0 ~ /name = "whatif"/)' pipelines/default.toml >"$tmp/nowhatif.toml"
cp pipelines/default.toml "$tmp/whatif.toml"
cold=(); cold_rss=(); warm=(); default=(); python=(); python_rss=(); with=(); without=(); nowhatif=(); whatif=()
for i in $(seq "$runs"); do
  rm -rf "$tmp/cache" "$tmp/out" "$tmp/out2"
  read -r w r < <(measure "$bin" analyze -q "${same[@]}" --cache-dir "$tmp/cache" -o "$tmp/out" "${inputs[@]}")
  cold+=("$w"); cold_rss+=("$r")
  read -r w _ < <(measure "$bin" analyze -q "${same[@]}" --cache-dir "$tmp/cache" -o "$tmp/out2" "${inputs[@]}")
  warm+=("$w")
  rm -rf "$tmp/cache" "$tmp/out"
  read -r w _ < <(measure "$bin" analyze -q --cache-dir "$tmp/cache" -o "$tmp/out" "${inputs[@]}")
  default+=("$w")
  for p in with without nowhatif whatif; do
    rm -rf "$tmp/cache" "$tmp/out"
    read -r w _ < <(measure "$bin" analyze -q --pipeline "$tmp/$p.toml" --cache-dir "$tmp/cache" -o "$tmp/out" "${inputs[@]}")
    eval "$p+=(\"\$w\")"
  done
  if [[ -n "$python_tool" ]]; then
    rm -rf "$tmp/py" "$tmp/py.zip"; mkdir "$tmp/py"
    read -r w r < <(TMPDIR="$tmp/py" measure "$python_tool" "${same[@]}" -o "$tmp/py.zip" "${inputs[@]}")
    [[ -s "$tmp/py.zip" ]] || { echo "$python_tool failed" >&2; exit 1; }
    python+=("$w"); python_rss+=("$r")
  fi
done
c=$(printf '%s\n' "${cold[@]}" | median)
wm=$(printf '%s\n' "${warm[@]}" | median)
d=$(printf '%s\n' "${default[@]}" | median)
rss=$(printf '%s\n' "${cold_rss[@]}" | sort -n | tail -1)
if [[ -n "$python_tool" ]]; then
  p=$(printf '%s\n' "${python[@]}" | median)
  prss=$(printf '%s\n' "${python_rss[@]}" | sort -n | tail -1)
  pnote="measured in this run, peak RSS $((prss / 1024)) MiB"
else
  p=21.1
  pnote="recorded; set NSYS_JAX_COMBINE to measure it here"
fi
echo "medians over ${runs} interleaved runs, 4 pax archives, analyses summary + communication"
echo "nsys-jax-combine (Python):     ${p} s (${pnote})"
echo "cold analyze:                  ${c} s; peak RSS $((rss / 1024)) MiB"
awk -v w="$wm" -v c="$c" 'BEGIN {printf "warm analyze (all cached):     %s s (%.1f %% of cold)\n", w, 100 * w / c}'
awk -v c="$c" -v p="$p" 'BEGIN {printf "speed-up, cold:                %.1fx\n", p / c}'
echo "cold analyze, default analyses (pipelines/default.toml): ${d} s"
a=$(printf '%s\n' "${with[@]}" | median)
b=$(printf '%s\n' "${without[@]}" | median)
awk -v a="$a" -v b="$b" 'BEGIN {printf "roofline cost, cold default analyze without diagnose: %s s with it, %s s without: +%.1f %%\n", a, b, 100 * (a - b) / b}'
n=$(printf '%s\n' "${nowhatif[@]}" | median)
y=$(printf '%s\n' "${whatif[@]}" | median)
awk -v a="$y" -v b="$n" 'BEGIN {printf "whatif cost, cold default analyze: %s s with it, %s s without: +%.1f %%\n", a, b, 100 * (a - b) / b}'
