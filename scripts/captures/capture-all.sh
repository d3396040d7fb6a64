#!/usr/bin/env bash
# capture-all.sh NSYS OUTDIR [NAME...]
#
# Captures the test data of tests/data/{gemm-bf16,mixed}-{cmdbuf,nocmdbuf} on a GPU machine
# (one GPU), as scripts/capture-example.sh captures the example:
#   gemm-bf16-cmdbuf    gemm_bf16.py, XLA's defaults (command buffers on)
#   gemm-bf16-nocmdbuf  gemm_bf16.py, XLA_FLAGS+=--xla_gpu_enable_command_buffer= (off)
#   mixed-cmdbuf        mixed.py, XLA's defaults
#   mixed-nocmdbuf      mixed.py, command buffers off
# Leaves, for each NAME (all by default), OUTDIR/NAME/ with
#   rep.nsys-rep                  the report
#   dump_rep/                     the step module's XLA dump files (the jit of `step`: after-
#                                 optimizations HLO, memory-usage report,
#                                 thunk metadata, thunk sequences, small buffer assignment)
#   dump_full.tar.xz              the whole XLA dump, for reference
#   kern_cuda_gpu_kern_sum.csv    nsys stats --report cuda_gpu_kern_sum
#   nvtx_kern_sum.csv             nsys stats --report nvtx_kern_sum (kernels under NVTX ranges)
#                                 (nsys stats needs NSYS's python/lib, which the bundle of
#                                 nsys-bundle.sh leaves out: unpack it beside NSYS)
#   log.txt                       the program's and Nsight Systems' output
# Each capture
# - runs in its own PID namespace with a minimal environment, from a neutral folder
#   (/opt/nsys-jax-pipe-captures/NAME, the workload copied there, the dump written to the
#   relative folder dump_rep), so that the report holds nothing of the machine but the workload;
# - dumps HLO as proto only, as capture-example.sh does: with --xla_dump_hlo_as_text XLA also
#   writes the thunk metadata as text (thunk_metadata.txt), which nsys-jax-pipe does not read;
# - traces CUDA and NVTX only inside the program's cudaProfilerApi range (after compilation,
#   autotuning and warm-up), every kernel of every CUDA graph launch (--cuda-graph-trace=node).
# Environment: STEPS, WARMUP (passed to the programs; defaults 10 and 3), TIMEOUT (seconds a
# capture may take, default 240).
set -uo pipefail
[[ $# -ge 2 ]] || { echo "usage: capture-all.sh NSYS OUTDIR [NAME...]" >&2; exit 2; }
NSYS=$(realpath "$1")
mkdir -p "$2"
OUT=$(realpath "$2")
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
NAMES=("$@")
[[ ${#NAMES[@]} -gt 0 ]] || NAMES=(gemm-bf16-cmdbuf gemm-bf16-nocmdbuf mixed-cmdbuf mixed-nocmdbuf)
BASE=/opt/nsys-jax-pipe-captures

capture() { # NAME SCRIPT EXTRA_XLA_FLAGS
	local name=$1 script=$2 extra=$3 w=$BASE/$1 d=$OUT/$1 rc
	rm -rf "$w" "$d"
	mkdir -p "$w" "$d"
	cp "$HERE/$script" "$w/$script"
	(
		cd "$w" || exit 1
		timeout "${TIMEOUT:-240}" env -i PATH="$PATH" HOME=/root LANG=C.UTF-8 \
			LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" \
			NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
			STEPS="${STEPS:-10}" WARMUP="${WARMUP:-3}" \
			XLA_FLAGS="--xla_dump_to=dump_rep --xla_dump_hlo_as_proto${extra:+ $extra}" \
			JAX_TRACEBACK_IN_LOCATIONS_LIMIT=-1 JAX_ENABLE_COMPILATION_CACHE=false \
			unshare --pid --fork --mount-proc --kill-child \
			"$NSYS" profile --trace=cuda,nvtx --capture-range=cudaProfilerApi \
			--capture-range-end=stop --cuda-graph-trace=node --cpuctxsw=none --sample=none \
			-o rep python3 "$w/$script"
	) >"$d/log.txt" 2>&1
	rc=$?
	echo "== $name: capture rc=$rc"
	[[ -f $w/rep.nsys-rep ]] || { echo "== $name: no report"; tail -30 "$d/log.txt"; return 1; }
	mv "$w/rep.nsys-rep" "$d/rep.nsys-rep"
	# The step module's dump files only (module_NNNN.jit_step.*).
	mkdir -p "$d/dump_rep"
	local f b
	for f in "$w"/dump_rep/module_*.jit_step.*; do
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
	(cd "$d" && timeout 120 "$NSYS" stats --report cuda_gpu_kern_sum --format csv \
		--output kern rep.nsys-rep >/dev/null 2>>"$d/log.txt" &&
		timeout 120 "$NSYS" stats --report nvtx_kern_sum --format csv \
			--output nvtx rep.nsys-rep >/dev/null 2>>"$d/log.txt"
		rm -f rep.sqlite)
	[[ -f $d/nvtx_nvtx_kern_sum.csv ]] && mv "$d/nvtx_nvtx_kern_sum.csv" "$d/nvtx_kern_sum.csv"
	rm -rf "$w"
	ls -la "$d" "$d/dump_rep"
}

for name in "${NAMES[@]}"; do
	case $name in
	gemm-bf16-cmdbuf) capture "$name" gemm_bf16.py "" ;;
	gemm-bf16-nocmdbuf) capture "$name" gemm_bf16.py "--xla_gpu_enable_command_buffer=" ;;
	mixed-cmdbuf) capture "$name" mixed.py "" ;;
	mixed-nocmdbuf) capture "$name" mixed.py "--xla_gpu_enable_command_buffer=" ;;
	*) echo "unknown capture $name" >&2 ;;
	esac
done
