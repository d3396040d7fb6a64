#!/usr/bin/env bash
# capture-all.sh NSYS OUTDIR [NAME...]
#
# Captures the test data of tests/data/NAME on a GPU machine, as scripts/capture-example.sh
# captures the example:
#   gemm-bf16-cmdbuf       gemm_bf16.py, XLA's defaults (command buffers on)
#   gemm-bf16-nocmdbuf     gemm_bf16.py, XLA_FLAGS+=--xla_gpu_enable_command_buffer= (off)
#   mixed-cmdbuf           mixed.py, XLA's defaults
#   mixed-nocmdbuf         mixed.py, command buffers off
#   gemm-lowp-cmdbuf       gemm_lowp.py (f16 and fp8 GEMM chains), XLA's defaults
#   gemm-lowp-nocmdbuf     gemm_lowp.py, command buffers off
#   gemm-epilogue-cmdbuf   gemm_epilogue.py (bias + gelu/relu cuBLASLt epilogues), defaults
#   gemm-epilogue-nocmdbuf gemm_epilogue.py, command buffers off
#   convnet-cmdbuf         convnet.py (CNN training step, cuDNN convolutions), defaults
#   convnet-nocmdbuf       convnet.py, command buffers off
#   convnet-cudnn-cmdbuf   convnet.py with XLA_FLAGS+=$CONVNET_CMDBUF_FLAG (default
#                          --xla_gpu_enable_command_buffer=+CONVOLUTION: the convolutions'
#                          thunks inside command buffers too)
#   fsdp2-cmdbuf           fsdp_step.py (FSDP MLP step over the GPUs $GPUS, default 0,1, of
#                          one process), XLA's defaults
#   fsdp2-nocmdbuf         fsdp_step.py, command buffers off
#   nvtx-range             nvtx_user.py (user NVTX ranges/marks with the nvtx package, which
#                          must be importable: PYTHONPATH is passed on), as the others
#   nvtx-whole             nvtx_user.py, PROFILE=0, no capture range (whole program)
#   nvtx-range-forced      nvtx_user.py, NVTX_FORCE_DOMAINS=1 (the package's domain check
#                          worked around), as the others
#   nvtx-whole-forced      the same, no capture range
#   nvtx-mem               as nvtx-range-forced, with --cuda-memory-usage=true
# The single-GPU programs run on GPU $GPU (CUDA_VISIBLE_DEVICES, default 0).
# Leaves, for each NAME (all but the nvtx-* by default), OUTDIR/NAME/ with
#   rep.nsys-rep                  the report
#   dump_rep/                     the step module's XLA dump files (the jit of `step`: after-
#                                 optimizations HLO, memory-usage report,
#                                 thunk metadata, thunk sequences, small buffer assignment)
#   dump_full.tar.xz              the whole XLA dump, for reference
#   kern_cuda_gpu_kern_sum.csv    nsys stats --report cuda_gpu_kern_sum
#   nvtx_kern_sum.csv             nsys stats --report nvtx_kern_sum (kernels under NVTX ranges)
#                                 (nsys stats needs NSYS's python/lib, which the bundle of
#                                 nsys-bundle.sh leaves out: unpack it beside NSYS)
#   REPORT.csv                    for the nvtx-* captures, nsys stats --report REPORT for
#                                 nvtx_sum and nvtx_pushpop_trace (and
#                                 cuda_gpu_mem_size_sum, cuda_gpu_mem_time_sum for nvtx-mem)
#   log.txt                       the program's and Nsight Systems' output
# Each capture
# - runs in its own PID namespace with a minimal environment, from a neutral folder
#   (/opt/nsys-jax-pipe-captures/NAME, the workload copied there, the dump written to the
#   relative folder dump_rep), so that the report holds nothing of the machine but the workload;
# - dumps HLO as proto only, as capture-example.sh does: with --xla_dump_hlo_as_text XLA also
#   writes the thunk metadata as text (thunk_metadata.txt), which nsys-jax-pipe does not read;
# - traces CUDA and NVTX only inside the program's cudaProfilerApi range (after compilation,
#   autotuning and warm-up), every kernel of every CUDA graph launch (--cuda-graph-trace=node);
#   nvtx-whole* trace the whole program instead.
# Environment: STEPS, WARMUP (passed to the programs; defaults 10 and 3), TIMEOUT (seconds a
# capture may take, default 240), GPU, GPUS, CONVNET_CMDBUF_FLAG.
set -uo pipefail
[[ $# -ge 2 ]] || { echo "usage: capture-all.sh NSYS OUTDIR [NAME...]" >&2; exit 2; }
NSYS=$(realpath "$1")
mkdir -p "$2"
OUT=$(realpath "$2")
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
NAMES=("$@")
[[ ${#NAMES[@]} -gt 0 ]] || NAMES=(gemm-bf16-cmdbuf gemm-bf16-nocmdbuf mixed-cmdbuf mixed-nocmdbuf
	gemm-lowp-cmdbuf gemm-lowp-nocmdbuf gemm-epilogue-cmdbuf gemm-epilogue-nocmdbuf
	convnet-cmdbuf convnet-nocmdbuf convnet-cudnn-cmdbuf fsdp2-cmdbuf fsdp2-nocmdbuf)
BASE=/opt/nsys-jax-pipe-captures

capture() { # NAME SCRIPT EXTRA_XLA_FLAGS [VAR=VALUE...] (more environment for the program)
	# Per capture (set as a prefix of the call): CAP_RANGE (the nsys capture-range options),
	# CAP_TRACE (--trace), CAP_NSYS (more nsys options), CAP_STATS (more nsys stats reports),
	# CAP_GPUS (CUDA_VISIBLE_DEVICES).
	local name=$1 script=$2 extra=$3 w=$BASE/$1 d=$OUT/$1 rc
	shift 3
	local range=${CAP_RANGE---capture-range=cudaProfilerApi --capture-range-end=stop}
	local trace=${CAP_TRACE:-cuda,nvtx} nsysopts=${CAP_NSYS:-} stats=${CAP_STATS:-}
	local gpus=${CAP_GPUS:-${GPU:-0}}
	rm -rf "$w" "$d"
	mkdir -p "$w" "$d"
	cp "$HERE/$script" "$w/$script"
	(
		cd "$w" || exit 1
		# A session name of its own: inside the PID namespace nsys is PID 1, so every capture's
		# default session is "profile-1", and a stale one left by an earlier capture can make
		# the next refuse to start ("Session name 'profile-1' is already in use").
		# shellcheck disable=SC2086 # range and nsysopts are lists of options
		timeout "${TIMEOUT:-240}" env -i PATH="$PATH" HOME=/root LANG=C.UTF-8 \
			LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" PYTHONPATH="${PYTHONPATH:-}" \
			CUDA_VISIBLE_DEVICES="$gpus" \
			NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
			STEPS="${STEPS:-10}" WARMUP="${WARMUP:-3}" \
			XLA_FLAGS="--xla_dump_to=dump_rep --xla_dump_hlo_as_proto${extra:+ $extra}" \
			JAX_TRACEBACK_IN_LOCATIONS_LIMIT=-1 JAX_ENABLE_COMPILATION_CACHE=false "$@" \
			unshare --pid --fork --mount-proc --kill-child \
			"$NSYS" profile --trace="$trace" $range \
			--cuda-graph-trace=node --cpuctxsw=none --sample=none $nsysopts \
			--session-new="capture-$name-$$" \
			-o rep python3 "$w/$script"
	) >"$d/log.txt" 2>&1
	rc=$?
	echo "== $name: capture rc=$rc"
	[[ -f $w/rep.nsys-rep ]] || { echo "== $name: no report"; tail -30 "$d/log.txt"; return 1; }
	mv "$w/rep.nsys-rep" "$d/rep.nsys-rep"
	# The step module's dump files only (module_NNNN.jit_step.*).
	mkdir -p "$d/dump_rep"
	local f b r
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
	# --force-export: nsys 2023.4.4 can take its own fresh export for older than the report.
	(cd "$d" && timeout 120 "$NSYS" stats --force-export=true --report cuda_gpu_kern_sum \
		--format csv --output kern rep.nsys-rep >/dev/null 2>>"$d/log.txt" &&
		timeout 120 "$NSYS" stats --force-export=true --report nvtx_kern_sum \
			--format csv --output nvtx rep.nsys-rep >/dev/null 2>>"$d/log.txt"
		for r in $stats; do
			timeout 120 "$NSYS" stats --force-export=true --report "$r" --format csv \
				--output stats rep.nsys-rep >/dev/null 2>>"$d/log.txt"
			[[ -f stats_$r.csv ]] && mv "stats_$r.csv" "$r.csv"
		done
		rm -f rep.sqlite)
	[[ -f $d/nvtx_nvtx_kern_sum.csv ]] && mv "$d/nvtx_nvtx_kern_sum.csv" "$d/nvtx_kern_sum.csv"
	rm -rf "$w"
	ls -la "$d" "$d/dump_rep"
}

NVTX_STATS="nvtx_sum nvtx_pushpop_trace"
for name in "${NAMES[@]}"; do
	case $name in
	gemm-bf16-cmdbuf) capture "$name" gemm_bf16.py "" ;;
	gemm-bf16-nocmdbuf) capture "$name" gemm_bf16.py "--xla_gpu_enable_command_buffer=" ;;
	mixed-cmdbuf) capture "$name" mixed.py "" ;;
	mixed-nocmdbuf) capture "$name" mixed.py "--xla_gpu_enable_command_buffer=" ;;
	gemm-lowp-cmdbuf) capture "$name" gemm_lowp.py "" ;;
	gemm-lowp-nocmdbuf) capture "$name" gemm_lowp.py "--xla_gpu_enable_command_buffer=" ;;
	gemm-epilogue-cmdbuf) capture "$name" gemm_epilogue.py "" ;;
	gemm-epilogue-nocmdbuf) capture "$name" gemm_epilogue.py "--xla_gpu_enable_command_buffer=" ;;
	convnet-cmdbuf) capture "$name" convnet.py "" ;;
	convnet-nocmdbuf) capture "$name" convnet.py "--xla_gpu_enable_command_buffer=" ;;
	convnet-cudnn-cmdbuf)
		capture "$name" convnet.py \
			"${CONVNET_CMDBUF_FLAG:---xla_gpu_enable_command_buffer=+CONVOLUTION}" ;;
	fsdp2-cmdbuf) CAP_GPUS=${GPUS:-0,1} capture "$name" fsdp_step.py "" ;;
	fsdp2-nocmdbuf)
		CAP_GPUS=${GPUS:-0,1} capture "$name" fsdp_step.py "--xla_gpu_enable_command_buffer=" ;;
	nvtx-range) CAP_STATS=$NVTX_STATS capture "$name" nvtx_user.py "" ;;
	nvtx-whole) CAP_RANGE="" CAP_STATS=$NVTX_STATS capture "$name" nvtx_user.py "" PROFILE=0 ;;
	nvtx-range-forced)
		CAP_STATS=$NVTX_STATS capture "$name" nvtx_user.py "" NVTX_FORCE_DOMAINS=1 ;;
	nvtx-whole-forced)
		CAP_RANGE="" CAP_STATS=$NVTX_STATS capture "$name" nvtx_user.py "" PROFILE=0 \
			NVTX_FORCE_DOMAINS=1 ;;
	nvtx-mem)
		CAP_NSYS="--cuda-memory-usage=true" \
			CAP_STATS="$NVTX_STATS cuda_gpu_mem_size_sum cuda_gpu_mem_time_sum" \
			capture "$name" nvtx_user.py "" NVTX_FORCE_DOMAINS=1 ;;
	*) echo "unknown capture $name" >&2 ;;
	esac
done
