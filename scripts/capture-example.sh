#!/usr/bin/env bash
# capture-example.sh NSYS WORKDIR
#
# Captures the example profile (examples/workload.py) on a GPU machine: leaves
# WORKDIR/example.nsys-rep and WORKDIR/dump_example/. The capture
# - runs in its own PID namespace with a minimal environment, from a neutral folder, with the
#   workload copied to /opt/nsys-jax-pipe-example/, so that the report (which records the
#   process table and the environment) holds nothing of the machine but the workload;
# - traces CUDA only inside the workload's cudaProfilerApi range (after compilation and
#   autotuning): Nsight Systems releases older than CUDA 12.5 cannot import the newer CUDA
#   calls made during start-up and autotuning.
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: capture-example.sh NSYS WORKDIR" >&2; exit 2; }
NSYS=$(realpath "$1")
mkdir -p "$2"
WORK=$(realpath "$2")
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p /opt/nsys-jax-pipe-example
cp "$HERE/../examples/workload.py" /opt/nsys-jax-pipe-example/workload.py
cd /opt/nsys-jax-pipe-example
rm -rf "$WORK/dump_example" "$WORK/example.nsys-rep"
env -i PATH="$PATH" HOME=/root LANG=C.UTF-8 LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" \
	NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
	STEPS="${STEPS:-8}" PROFILE_FROM="${PROFILE_FROM:-3}" \
	XLA_FLAGS="--xla_dump_to=$WORK/dump_example --xla_dump_hlo_as_proto" \
	JAX_TRACEBACK_IN_LOCATIONS_LIMIT=-1 JAX_ENABLE_COMPILATION_CACHE=false \
	unshare --pid --fork --mount-proc \
	"$NSYS" profile --trace=cuda,nvtx --capture-range=cudaProfilerApi --capture-range-end=stop \
	--cuda-graph-trace=node --cpuctxsw=none --sample=none -o "$WORK/example" \
	python3 /opt/nsys-jax-pipe-example/workload.py
ls -la "$WORK"
