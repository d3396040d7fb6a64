#!/usr/bin/env bash
# capture.sh NSYS_JAX_PIPE NSYS OUTDIR [NAME...]
#
# Profiles the programs of this folder with `nsys-jax-pipe run` on a GPU machine, one archive
# each (tests/data/problems/README.md says what each shows):
#   host_bound, f32_highest, device_put, rejit, healthy (../gemm_bf16.py)   on GPU 0
#   exposed_allreduce                                                        on GPUs 0 and 1
#   late_rank                   two processes (RANK 0 and 1, GPU 0 and 1): OUTDIR/late_rank/rank{0,1}.zip
# and writes OUTDIR/NAME.log (the program's output). Environment: STEPS, WARMUP (passed on).
set -uo pipefail
[[ $# -ge 3 ]] || { echo "usage: capture.sh NSYS_JAX_PIPE NSYS OUTDIR [NAME...]" >&2; exit 2; }
NJP=$(realpath "$1"); NSYS=$(realpath "$2"); mkdir -p "$3"; OUT=$(realpath "$3"); shift 3
HERE=$(cd "$(dirname "$0")" && pwd)
NAMES=${*:-host_bound f32_highest device_put rejit exposed_allreduce late_rank healthy}
RUN=("$NJP" run --nsys "$NSYS" --capture-range=cudaProfilerApi --capture-range-end=stop -q)
want() { [[ " $NAMES " == *" $1 "* ]]; }
cap() { # NAME GPUS PROGRAM [ENV...]
	local name=$1 gpus=$2 prog=$3; shift 3
	(cd "$HERE" && env CUDA_VISIBLE_DEVICES="$gpus" "$@" timeout 300 "${RUN[@]}" -o "$OUT/$name" -- \
		python3 "$HERE/$prog") >"$OUT/$name.log" 2>&1
	echo "== $name: rc=$?"
}
want host_bound && cap host_bound 0 host_bound.py
want f32_highest && cap f32_highest 0 f32_highest.py
want device_put && cap device_put 0 device_put.py
# Compiling inside the capture range: XLA's autotuner makes CUDA 13 driver calls that Nsight
# Systems 2023.4 cannot import (the report then loses the GPU work after them); without
# autotuning the report imports whole.
want rejit && cap rejit 0 rejit.py XLA_FLAGS=--xla_gpu_autotune_level=0
want exposed_allreduce && cap exposed_allreduce 0,1 exposed_allreduce.py
if want late_rank; then
	mkdir -p "$OUT/late_rank"
	for r in 0 1; do
		(cd "$HERE" && CUDA_VISIBLE_DEVICES=$r RANK=$r COORDINATOR=127.0.0.1:12355 timeout 300 \
			"${RUN[@]}" -o "$OUT/late_rank/rank$r" -- python3 "$HERE/late_rank.py") \
			>"$OUT/late_rank/rank$r.log" 2>&1 &
	done
	wait
	echo "== late_rank done"
fi
want healthy && cap healthy 0 ../gemm_bf16.py
