#!/usr/bin/env bash
# Runs two builds of nsys-jax-pipe on the same inputs and says whether every output is the
# same byte for byte (a change meant to alter only speed or memory must leave them so).
# Outputs: archives' members, analysis outputs, the HTML report and the frames for pandas.
# Inputs: the H200 captures and the four JAX-Toolbox pax archives of the shared fixtures, and
# the command-buffer captures and the problem-program pairs under tests/data. For each: `archive` of a capture (its members
# and the analyses stored in it), then `analyze` with every analysis and `--html`, cold.
# Run times (pipeline-run.json, the run's log lines) are left out of the comparison.
# Usage: scripts/check-same-outputs.sh OLD_BINARY NEW_BINARY [WORK_DIR]
# Needs Nsight Systems for the captures ($NSYS or scripts/install-nsys.sh's).
set -euo pipefail
cd "$(dirname "$0")/.."
old=$(realpath "$1"); new=$(realpath "$2")
work=${3:-$(mktemp -d)}
fixtures="${NSYS_JAX_PIPE_FIXTURES:-$(pwd)/../shared/fixtures}"
all=(summary provenance communication compilation stragglers ops sources pgle memory ranges roofline diagnose)
analyses=(); for a in "${all[@]}"; do analyses+=(--analysis "$a"); done

# name, then the inputs of one `analyze` (reports are archived first).
cases=(
  "pax4|$fixtures/jaxtoolbox-pax-fsdp4-4proc/proc0.zip $fixtures/jaxtoolbox-pax-fsdp4-4proc/proc1.zip $fixtures/jaxtoolbox-pax-fsdp4-4proc/proc2.zip $fixtures/jaxtoolbox-pax-fsdp4-4proc/proc3.zip"
  "pax-proc0|$fixtures/jaxtoolbox-pax-fsdp4-4proc/proc0.zip"
  "h200-fsdp2_1proc|$fixtures/h200/fsdp2_1proc/rep.nsys-rep"
  "h200-fsdp2_2proc|$fixtures/h200/fsdp2_2proc/rank0.nsys-rep $fixtures/h200/fsdp2_2proc/rank1.nsys-rep"
  "h200-compile_1proc|$fixtures/h200/compile_1proc/rep.nsys-rep"
  "h200-long_1proc|$fixtures/h200/long_1proc/rep.nsys-rep"
)
for d in tests/data/*cmdbuf tests/data/command-buffers*; do
  cases+=("$(basename "$d")|$(pwd)/$d/rep.nsys-rep")
done
# The problem programs and their fixed twins (archives made by `run`).
for z in tests/data/pairs/*.zip; do
  cases+=("pair-$(basename "$z" .zip)|$(pwd)/$z")
done
for d in tests/data/pairs/*/; do
  cases+=("pair-$(basename "$d")|$(pwd)/${d}rank0.zip $(pwd)/${d}rank1.zip")
done

differ=0; same=0
# Runs a command, its output to a log; on failure says so with the log's end.
logged() {
  local log=$1; shift
  if ! "$@" > "$log" 2>&1; then
    echo "FAILED: $*"; tail -5 "$log"; return 1
  fi
}
for c in "${cases[@]}"; do
  name=${c%%|*}; read -r -a inputs <<< "${c#*|}"
  for side in old new; do
    bin=$old; [[ $side == new ]] && bin=$new
    # Both sides run in the same folder: outputs name their inputs' paths.
    dir="$work/run/$name"; rm -rf "$dir"; mkdir -p "$dir"
    zips=()
    for i in "${inputs[@]}"; do
      if [[ $i == *.nsys-rep ]]; then
        stem=$(basename "$(dirname "$i")")-$(basename "$i" .nsys-rep)
        dump=$(dirname "$i")/dump_$(basename "$i" .nsys-rep)
        logged "$dir/archive.log" "$bin" archive -q --cache-dir "$dir/cache" --dump "$dump" \
          --analysis summary --analysis ops -o "$dir/$stem.zip" "$i" || differ=1
        mkdir -p "$dir/members/$stem"
        [[ -f $dir/$stem.zip ]] && python3 -m zipfile -e "$dir/$stem.zip" "$dir/members/$stem"
        zips+=("$dir/$stem.zip")
      else
        zips+=("$i")
      fi
    done
    logged "$dir/analyze.log" "$bin" analyze -q --cache-dir "$dir/cache2" "${analyses[@]}" \
      --html "$dir/out/report.html" --frames "$dir/out/frames" -o "$dir/out" "${zips[@]}" \
      || differ=1
    rm -f "$dir/out/pipeline-run.json"
    rm -rf "$dir/cache" "$dir/cache2" "$dir"/*.zip
    rm -rf "$work/$side/$name"; mkdir -p "$work/$side"; mv "$dir" "$work/$side/$name"
  done
  if diff -r -q "$work/old/$name" "$work/new/$name" -x '*.log' > "$work/$name.diff"; then
    echo "same: $name ($(find "$work/new/$name" -type f | wc -l) files)"; same=$((same + 1))
  else
    echo "DIFFERENT: $name"; cat "$work/$name.diff"; differ=1
  fi
done
echo "$same of ${#cases[@]} inputs: the same outputs"
exit $differ
