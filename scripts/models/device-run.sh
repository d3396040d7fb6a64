#!/usr/bin/env bash
# device-run.sh start|collect SECONDS
#
# On a 2-GPU machine without network access, from the repository root, with a bundle of
# Nsight Systems 2023.4 (its CLI and importer, xz-packed, and the script that unpacks them) at
# .nsysbundle/:
#   start    unpacks nsys, records the machine's software (RUN/env.txt), and starts in the
#            background (setsid: it outlives the shell that started it) every capture of
#            capture.sh, one after the other (single-GPU ones on GPU 0, then the 2-GPU ones);
#            results under RUN=/tmp/models-run, RUN/DONE at the end. (Two captures at once, one
#            per GPU, collide: both nsys are PID 1 of their namespaces and share
#            /tmp/nvidia/nsight_systems/quadd_session_N, which left one report empty and made
#            another capture fail.)
#   collect  waits until RUN/DONE or SECONDS have passed, then packs what is there into the
#            folder $OUT:
#            models.tar.xz (reports, dump_rep/, logs) and dumps.tar.NN (the whole dumps, in
#            15 MB pieces).
# SINGLE and MULTI override the lists (an empty one runs nothing). The 13 captures of
# tests/data/models take about 4 minutes.
set -u
RUN=/tmp/models-run
HERE=$(cd "$(dirname "$0")" && pwd)
SINGLE=${SINGLE-gpt-cudnn gpt-cudnn-nocmdbuf gpt-cudnn-nocausal gpt-cudnn-long llama-scan
llama-scan-nocmdbuf moe-ragged moe-ragged-nocmdbuf fp8-gemm fp8-gemm-nocmdbuf}
MULTI=${MULTI-moe-a2a pipeline fsdp-gpt}
case ${1:-} in
start)
	mkdir -p "$RUN"
	NSYS=$(bash .nsysbundle/device-nsys-install.sh .nsysbundle) || exit 1
	{
		date -u
		"$NSYS" --version
		nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv
		nvidia-smi topo -m
		python3 --version
		python3 -m pip list 2>/dev/null | grep -iE '^(jax|jaxlib|jax-cuda|flax|optax|nvidia-(cudnn|cublas|nccl|cuda-runtime|cuda-nvrtc|nvjitlink))'
		python3 -c 'import jax; from jax._src.lib import cuda_versions as c; print("cudnn", c.cudnn_get_version(), "cublas", c.cublas_get_version(), "cuda runtime", c.cuda_runtime_get_version(), "driver", c.cuda_driver_get_version())'
	} >"$RUN/env.txt" 2>&1
	SINGLE=$SINGLE MULTI=$MULTI setsid nohup bash "$0" all "$NSYS" \
		</dev/null >"$RUN/driver.log" 2>&1 &
	echo "started; env:"
	cat "$RUN/env.txt"
	;;
all) # NSYS: the captures, one after the other (what start runs in the background)
	# shellcheck disable=SC2086 # lists of names
	[[ -n ${SINGLE// /} ]] && GPU=0 bash "$HERE/capture.sh" "$2" "$RUN" $SINGLE >"$RUN/single.log" 2>&1
	# shellcheck disable=SC2086
	[[ -n ${MULTI// /} ]] && GPUS=0,1 bash "$HERE/capture.sh" "$2" "$RUN" $MULTI >"$RUN/multi.log" 2>&1
	touch "$RUN/DONE"
	;;
collect)
	limit=${2:-500}
	t0=$SECONDS
	while [[ ! -e $RUN/DONE && $((SECONDS - t0)) -lt $limit ]]; do sleep 5; done
	[[ -e $RUN/DONE ]] && echo "all done" || echo "not done after $limit s"
	grep -h '^== ' "$RUN"/single.log "$RUN"/multi.log 2>/dev/null
	cd "$RUN" || exit 1
	tar --exclude=dump_full.tar.xz -cf - . | xz -6 -T0 >"$OUT/models.tar.xz"
	find . -name dump_full.tar.xz | tar -cf - -T - | split -b 15M -d - "$OUT/dumps.tar."
	ls -la "$OUT"
	;;
*) echo "usage: device-run.sh start|collect SECONDS" >&2; exit 2 ;;
esac
