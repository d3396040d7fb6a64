#!/usr/bin/env bash
# capture.sh NSYS OUTDIR [NAME...]
#
# Captures the model corpus of tests/data/models/NAME on a GPU machine, the way
# scripts/captures/capture-all.sh captures tests/data/* (same isolation, options and kept
# files; the program and common.py copied to a neutral folder):
#   gpt-cudnn             gpt.py: GPT decoder, cuDNN flash attention (causal), adamw; XLA's
#                         defaults (command buffers on)
#   gpt-cudnn-nocmdbuf    the same, --xla_gpu_enable_command_buffer= (every thunk its own
#                         NVTX range: the kernel -> HLO instruction ground truth)
#   gpt-cudnn-nocausal    gpt.py, CAUSAL=0
#   gpt-cudnn-long        gpt.py, B=1 S=8192 (causal)
#   llama-scan            llama_scan.py: Llama blocks (RMSNorm, RoPE, GQA, SwiGLU) under
#                         lax.scan + jax.checkpoint; defaults
#   llama-scan-nocmdbuf   the same, command buffers off
#   moe-ragged            moe_ragged.py: top-2 of 8 experts, jax.lax.ragged_dot; defaults
#   moe-ragged-nocmdbuf   the same, command buffers off
#   fp8-gemm              fp8_mlp.py: MLP with fp8 (e4m3 / e5m2) scaled dot_generals; defaults
#   fp8-gemm-nocmdbuf     the same, command buffers off
#   moe-a2a               moe_a2a.py: expert parallel MoE, all_to_all in shard_map, GPUs $GPUS
#   pipeline              pipeline.py: GPipe over 2 stages, ppermute in shard_map, GPUs $GPUS
#   fsdp-gpt              gpt.py FSDP=1: the GPT step FSDP-sharded over GPUs $GPUS
# Single-GPU programs run on GPU $GPU (CUDA_VISIBLE_DEVICES, default 0); the multi-GPU ones on
# $GPUS (default 0,1), one process.
# Leaves, for each NAME, OUTDIR/NAME/ with rep.nsys-rep, dump_rep/ (the jit_step module's
# after-optimizations HLO proto, memory-usage report, thunk metadata, thunk sequences, small
# buffer assignment), dump_full.tar.xz (the whole XLA dump), log.txt (the program's and
# Nsight Systems' output). `nsys stats` (kern_cuda_gpu_kern_sum.csv, nvtx_kern_sum.csv) is
# left to a machine with NSYS's python/lib (the bundle of nsys-bundle.sh has none): see
# tests/data/models/README.md.
# Environment: STEPS, WARMUP (passed to the programs; defaults 5 and 3), TIMEOUT (seconds a
# capture may take, default 240), GPU, GPUS.
set -uo pipefail
[[ $# -ge 2 ]] || { echo "usage: capture.sh NSYS OUTDIR [NAME...]" >&2; exit 2; }
NSYS=$(realpath "$1")
mkdir -p "$2"
OUT=$(realpath "$2")
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
NAMES=("$@")
[[ ${#NAMES[@]} -gt 0 ]] || NAMES=(gpt-cudnn gpt-cudnn-nocmdbuf gpt-cudnn-nocausal gpt-cudnn-long
	llama-scan llama-scan-nocmdbuf moe-ragged moe-ragged-nocmdbuf fp8-gemm fp8-gemm-nocmdbuf
	moe-a2a pipeline fsdp-gpt)
BASE=/opt/nsys-jax-pipe-models
NOCB=--xla_gpu_enable_command_buffer=

kernels() { # REPORT: the number of CUDA kernels in it (0 if none or no export)
	local q=${1%.nsys-rep}.count.sqlite n
	timeout 120 "$NSYS" export --type sqlite --force-overwrite true -o "$q" "$1" >/dev/null 2>&1
	n=$(python3 -c 'import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
t = [r[0] for r in c.execute("select name from sqlite_master where type=\"table\"")]
print(c.execute("select count(*) from CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
      if "CUPTI_ACTIVITY_KIND_KERNEL" in t else 0)' "$q" 2>/dev/null)
	rm -f "$q"
	echo "${n:-0}"
}

capture() { # NAME SCRIPT EXTRA_XLA_FLAGS [VAR=VALUE...] (more environment for the program)
	local name=$1 script=$2 extra=$3 w=$BASE/$1 d=$OUT/$1 rc t0=$SECONDS
	shift 3
	local gpus=${CAP_GPUS:-${GPU:-0}}
	rm -rf "$w" "$d"
	mkdir -p "$w" "$d"
	cp "$HERE/$script" "$HERE/common.py" "$w/"
	(
		cd "$w" || exit 1
		# shellcheck disable=SC2086
		timeout "${TIMEOUT:-240}" env -i PATH="$PATH" HOME=/root LANG=C.UTF-8 \
			LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" PYTHONPATH="${PYTHONPATH:-}" \
			PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES="$gpus" \
			NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
			STEPS="${STEPS:-5}" WARMUP="${WARMUP:-3}" \
			XLA_FLAGS="--xla_dump_to=dump_rep --xla_dump_hlo_as_proto${extra:+ $extra}" \
			JAX_TRACEBACK_IN_LOCATIONS_LIMIT=-1 JAX_ENABLE_COMPILATION_CACHE=false "$@" \
			unshare --pid --fork --mount-proc --kill-child \
			"$NSYS" profile --trace=cuda,nvtx --capture-range=cudaProfilerApi \
			--capture-range-end=stop --cuda-graph-trace=node --cpuctxsw=none --sample=none \
			--session-new="capture-$name-$$" \
			-o rep python3 "$w/$script"
	) >"$d/log.txt" 2>&1
	rc=$?
	echo "== $name: capture rc=$rc in $((SECONDS - t0)) s"
	[[ -f $w/rep.nsys-rep ]] || { echo "== $name: no report"; tail -30 "$d/log.txt"; return 1; }
	mv "$w/rep.nsys-rep" "$d/rep.nsys-rep"
	# The kernels the report holds (Nsight Systems 2023.4 can leave a report empty without a
	# word): export it here and count them; an empty report is captured again once.
	local nk
	nk=$(kernels "$d/rep.nsys-rep")
	echo "== $name: $nk kernels in the report"
	if [[ $nk == 0 && -z ${CAP_RETRY:-} ]]; then
		echo "== $name: empty report, capturing again"
		CAP_RETRY=1 capture "$name" "$script" "$extra" "$@"
		return
	fi
	mkdir -p "$d/dump_rep"
	local f b
	for f in "$w"/dump_rep/module_*.jit_step.*; do
		[[ -e $f ]] || continue
		b=$(basename "$f")
		case $b in
		*after_optimizations.hlo.pb | *after_optimizations.txt | \
			*after_optimizations-memory-usage-report.pb | *.thunk_metadata.pb | \
			*.thunk_sequence*.txt)
			cp "$f" "$d/dump_rep/" ;;
		*after_optimizations-buffer-assignment.txt)
			[[ $(stat -c %s "$f") -lt 200000 ]] && cp "$f" "$d/dump_rep/" ;;
		esac
	done
	tar -C "$w" -cf - dump_rep | xz -6 -T0 >"$d/dump_full.tar.xz"
	rm -rf "$w"
	ls -la "$d" "$d/dump_rep"
}

for name in "${NAMES[@]}"; do
	case $name in
	gpt-cudnn) capture "$name" gpt.py "" ;;
	gpt-cudnn-nocmdbuf) capture "$name" gpt.py "$NOCB" ;;
	gpt-cudnn-nocausal) capture "$name" gpt.py "" CAUSAL=0 ;;
	gpt-cudnn-long) capture "$name" gpt.py "" B=1 S=8192 ;;
	llama-scan) capture "$name" llama_scan.py "" ;;
	llama-scan-nocmdbuf) capture "$name" llama_scan.py "$NOCB" ;;
	moe-ragged) capture "$name" moe_ragged.py "" ;;
	moe-ragged-nocmdbuf) capture "$name" moe_ragged.py "$NOCB" ;;
	fp8-gemm) capture "$name" fp8_mlp.py "" ;;
	fp8-gemm-nocmdbuf) capture "$name" fp8_mlp.py "$NOCB" ;;
	moe-a2a) CAP_GPUS=${GPUS:-0,1} capture "$name" moe_a2a.py "" ;;
	pipeline) CAP_GPUS=${GPUS:-0,1} capture "$name" pipeline.py "" ;;
	fsdp-gpt) CAP_GPUS=${GPUS:-0,1} capture "$name" gpt.py "" FSDP=1 ;;
	*) echo "unknown capture $name" >&2 ;;
	esac
done
