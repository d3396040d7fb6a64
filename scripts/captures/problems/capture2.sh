#!/usr/bin/env bash
# capture2.sh NSYS_JAX_PIPE NSYS OUTDIR [NAME...]
#
# Profiles the programs of tests/data/problems/README.md and tests/data/pairs/README.md with
# `nsys-jax-pipe run` on a machine with 2 GPUs, one archive each, one capture at a time
# (single-GPU ones on GPU 0; the two-process ones as two `run`s at once, one per process):
# OUTDIR/problems/NAME.{zip,log} (a problem alone) and OUTDIR/pairs/NAME.{zip,log} (the two
# sides of a pair, GPT variants, sharding, repeats); two-process captures as
# OUTDIR/pairs/NAME/rank{0,1}.{zip,log}. NAME.log is the program's output (and Nsight
# Systems'). After each capture its files are appended to OUTDIR/finished.txt.
# Names, most important first (the default is all of them in this order):
#   input_bound input_ready near_oom compile_only late_many late_none gpt_cudnn gpt_xla_attn
#   gpt_wide gpt_rerun1 gpt_rerun2 gpt_no_triton gpt_autotune0 f32_highest bf16_gemm host_bound host_scanned rejit fixed_shapes
#   rejit_padded bf16_sync bf16_async gpt_sync gpt_async gpt_f32 gpt_bf16 gpt_varlen gpt_padded
#   input_bound_wide input_ready_wide
#   exposed_allreduce overlapped_allreduce sampling_notice llama_healthy sharding_dp
#   sharding_fsdp repeat1 repeat2 repeat3 repeat4
# and compile_only_small (not in the default list).
# near_oom also runs the program once more without nsys and without
# XLA_PYTHON_CLIENT_MEM_FRACTION (JAX's default 0.75): OUTDIR/problems/near_oom_default.log.
# Environment: STEPS, WARMUP (defaults per capture below), TIMEOUT (seconds per capture, 240).
set -uo pipefail
[[ $# -ge 3 ]] || { echo "usage: capture2.sh NSYS_JAX_PIPE NSYS OUTDIR [NAME...]" >&2; exit 2; }
NJP=$(realpath "$1"); NSYS=$(realpath "$2"); mkdir -p "$3"; OUT=$(realpath "$3"); shift 3
HERE=$(cd "$(dirname "$0")" && pwd)
MODELS=$(cd "$HERE/../../models" && pwd)
GEMM=$(cd "$HERE/.." && pwd)/gemm_bf16.py
NAMES=${*:-input_bound input_ready near_oom compile_only late_many late_none gpt_cudnn
gpt_xla_attn gpt_wide gpt_rerun1 gpt_rerun2 gpt_no_triton gpt_autotune0 f32_highest bf16_gemm host_bound host_scanned rejit
fixed_shapes rejit_padded bf16_sync bf16_async gpt_sync gpt_async gpt_f32 gpt_bf16 gpt_varlen gpt_padded
input_bound_wide input_ready_wide exposed_allreduce overlapped_allreduce sampling_notice llama_healthy sharding_dp
sharding_fsdp repeat1 repeat2 repeat3 repeat4}
NAMES=" $(echo $NAMES) "
RANGE=(--capture-range=cudaProfilerApi --capture-range-end=stop)
# NVLink multicast stays off (NCCL, NVSHMEM, PyTorch) on shared machines.
BASEENV=(PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
	TORCH_SYMM_MEM_DISABLE_MULTICAST=1 WARMUP="${WARMUP:-3}")
mkdir -p "$OUT/problems" "$OUT/pairs"
want() { [[ $NAMES == *" $1 "* ]]; }
done_files() { (cd "$OUT" && ls -d "$@" 2>/dev/null) >>"$OUT/finished.txt"; }

# cap DIR/NAME GPUS "NSYS OPTIONS" PROGRAM [VAR=VALUE...]
cap() {
	local rel=$1 gpus=$2 opts=$3 prog=$4 t0=$SECONDS rc
	shift 4
	# shellcheck disable=SC2086 # opts: several options
	(cd "$HERE" && env "${BASEENV[@]}" STEPS="${STEPS:-5}" CUDA_VISIBLE_DEVICES="$gpus" "$@" \
		timeout "${TIMEOUT:-240}" "$NJP" run --nsys "$NSYS" $opts -q -o "$OUT/$rel" -- \
		python3 "$prog") >"$OUT/$rel.log" 2>&1
	rc=$?
	echo "== $rel: rc=$rc in $((SECONDS - t0)) s; $(ls -la "$OUT/$rel.zip" 2>&1 | awk '{print $5}') B"
	done_files "$rel.zip" "$rel.log"
}

# two processes, one GPU each: DIR/NAME/rank{0,1}
cap2() {
	local rel=$1 port=$2 prog=$3 t0=$SECONDS r
	shift 3
	mkdir -p "$OUT/$rel"
	for r in 0 1; do
		(cd "$HERE" && env "${BASEENV[@]}" STEPS="${STEPS:-8}" CUDA_VISIBLE_DEVICES=$r RANK=$r \
			COORDINATOR=127.0.0.1:$port "$@" timeout "${TIMEOUT:-240}" "$NJP" run --nsys "$NSYS" \
			"${RANGE[@]}" -q -o "$OUT/$rel/rank$r" -- python3 "$prog") \
			>"$OUT/$rel/rank$r.log" 2>&1 &
	done
	wait
	echo "== $rel: done in $((SECONDS - t0)) s; $(ls -la "$OUT/$rel"/*.zip 2>&1 | awk '{print $5}' | xargs)"
	done_files "$rel/rank0.zip" "$rel/rank0.log" "$rel/rank1.zip" "$rel/rank1.log"
}

R="${RANGE[*]}"
want input_bound && cap pairs/input_bound 0 "$R" input_bound.py
want input_ready && cap pairs/input_ready 0 "$R" input_bound.py READY=1
if want near_oom; then
	cap problems/near_oom 0 "$R" near_oom.py XLA_PYTHON_CLIENT_MEM_FRACTION=0.95
	(cd "$HERE" && env -u XLA_PYTHON_CLIENT_MEM_FRACTION "${BASEENV[@]}" STEPS=2 \
		CUDA_VISIBLE_DEVICES=0 timeout 180 python3 near_oom.py) >"$OUT/problems/near_oom_default.log" 2>&1
	echo "== problems/near_oom_default (no nsys, no XLA_PYTHON_CLIENT_MEM_FRACTION): rc=$?"
	done_files problems/near_oom_default.log
fi
# The whole program, NVTX only: how users profile compilation.
# Without autotuning, so that each compilation takes a few hundred ms (with it, about 1.6 s).
want compile_only && TIMEOUT=${TIMEOUT:-480} cap problems/compile_only 0 "--trace=nvtx" \
	compile_only.py XLA_FLAGS=--xla_gpu_autotune_level=0
# The same with 10 shapes: a quarter of the report (an archive of about 2 MB).
want compile_only_small && TIMEOUT=${TIMEOUT:-480} cap problems/compile_only_small 0 \
	"--trace=nvtx" compile_only.py XLA_FLAGS=--xla_gpu_autotune_level=0 SHAPES=10
want late_many && cap2 pairs/late_many 12356 late_many.py SLEEP_MS=15
want late_none && cap2 pairs/late_none 12357 late_many.py SLEEP_MS=0
want gpt_cudnn && cap pairs/gpt_cudnn 0 "$R" "$MODELS/gpt.py"
# The GPT step waited for at each step and not: captured one after the other on one machine.
want gpt_sync && cap pairs/gpt_sync 0 "$R" "$MODELS/gpt.py"
want gpt_async && cap pairs/gpt_async 0 "$R" "$MODELS/gpt.py" SYNC=0
want gpt_xla_attn && cap pairs/gpt_xla_attn 0 "$R" "$MODELS/gpt.py" ATTN=xla
want gpt_wide && cap pairs/gpt_wide 0 "$R" "$MODELS/gpt.py" MLP=6
# The same program again: only what the autotuner chose may differ from gpt_cudnn.
for i in 1 2; do
	want gpt_rerun$i && cap pairs/gpt_rerun$i 0 "$R" "$MODELS/gpt.py"
done
# A flag flipped: XLA's Triton GEMMs off, so cuBLAS runs every matmul.
want gpt_no_triton && cap pairs/gpt_no_triton 0 "$R" "$MODELS/gpt.py" XLA_FLAGS=--xla_gpu_enable_triton_gemm=false
want gpt_autotune0 && cap pairs/gpt_autotune0 0 "$R" "$MODELS/gpt.py" XLA_FLAGS=--xla_gpu_autotune_level=0
want f32_highest && STEPS=${STEPS:-20} cap pairs/f32_highest 0 "$R" f32_highest.py
want bf16_gemm && STEPS=${STEPS:-20} cap pairs/bf16_gemm 0 "$R" bf16_gemm.py
# The per-step wait and none, captured one after the other on one machine.
want bf16_sync && STEPS=${STEPS:-20} cap pairs/bf16_sync 0 "$R" bf16_gemm.py
want bf16_async && STEPS=${STEPS:-20} cap pairs/bf16_async 0 "$R" bf16_gemm.py SYNC=0
want host_bound && cap pairs/host_bound 0 "$R" host_bound.py CALLS=30 STEPS=10 STEP_RANGE=step
want host_scanned && cap pairs/host_scanned 0 "$R" host_scanned.py CALLS=30 STEPS=10 STEP_RANGE=step
# Compiling inside the capture range: without autotuning (rejit.py says why).
want rejit && cap pairs/rejit 0 "$R" rejit.py XLA_FLAGS=--xla_gpu_autotune_level=0 STEPS=10 STEP_RANGE=step
want fixed_shapes && cap pairs/fixed_shapes 0 "$R" fixed_shapes.py XLA_FLAGS=--xla_gpu_autotune_level=0 STEPS=10 STEP_RANGE=step
want rejit_padded && cap pairs/rejit_padded 0 "$R" rejit_padded.py XLA_FLAGS=--xla_gpu_autotune_level=0 STEPS=10 STEP_RANGE=step
# The model-sized pairs: the GPT step with f32 matmuls at HIGHEST and as it is (bf16); the GPT
# step at a new sequence length every call and padded to one (compiling inside the capture
# range: without autotuning, so cuBLAS, not Triton, for the GEMMs: its heuristics need none);
# the input-bound loop with a 6 ms train step.
want gpt_f32 && STEPS=${STEPS:-3} cap pairs/gpt_f32 0 "$R" "$MODELS/gpt.py" MATMUL=f32
want gpt_bf16 && cap pairs/gpt_bf16 0 "$R" "$MODELS/gpt.py"
NT="--xla_gpu_autotune_level=0 --xla_gpu_enable_triton_gemm=false"
want gpt_varlen && cap pairs/gpt_varlen 0 "$R" "$MODELS/gpt.py" VARLEN=1 XLA_FLAGS="$NT"
want gpt_padded && cap pairs/gpt_padded 0 "$R" "$MODELS/gpt.py" VARLEN=pad XLA_FLAGS="$NT"
want input_bound_wide && cap pairs/input_bound_wide 0 "$R" input_bound.py HIDDEN=16384
want input_ready_wide && cap pairs/input_ready_wide 0 "$R" input_bound.py HIDDEN=16384 READY=1
LHS="--xla_gpu_enable_latency_hiding_scheduler=true --xla_gpu_all_reduce_combine_threshold_bytes=0"
want exposed_allreduce && cap pairs/exposed_allreduce 0,1 "$R" exposed_allreduce.py XLA_FLAGS="$LHS"
want overlapped_allreduce && cap pairs/overlapped_allreduce 0,1 "$R" overlapped_allreduce.py XLA_FLAGS="$LHS"
# Nsight Systems asked for CPU sampling and context switches, which the machine may refuse.
want sampling_notice && cap problems/sampling_notice 0 "$R --sample=cpu --cpuctxsw=process-tree" "$GEMM"
want llama_healthy && cap problems/llama_healthy 0 "$R" "$MODELS/llama_scan.py"
want sharding_dp && cap pairs/sharding_dp 0,1 "$R" "$MODELS/gpt.py" DP=1
want sharding_fsdp && cap pairs/sharding_fsdp 0,1 "$R" "$MODELS/gpt.py" FSDP=1
for i in 1 2 3 4; do
	want repeat$i && cap pairs/repeat$i 0 "$R" "$GEMM" STEPS=10
done
echo "== all done"
