#!/usr/bin/env bash
# check-aarch64.sh WHEELDIR
#
# The aarch64 wheel's `nsys-jax-pipe` run under qemu (scripts/install-qemu.sh) must give the
# x86-64 wheel's outputs, byte for byte (`diff -r`, `pipeline-run.json` aside: it holds times
# and cache keys), on: the example archive, the repository's H200 captures of a two-GPU
# all-reduce and of a bf16 GEMM chain (2026 XLA), and the four pax archives of the shared
# fixtures (A100, 2024) when they are there. Each side analyses cold, with the default
# pipeline and the HTML report. WHEELDIR holds an x86-64 wheel (a manylinux one of
# scripts/build-wheels.sh, or the native one of install-wheel.sh) and the aarch64 manylinux one.
#
# Settings (environment):
#   QEMU_DIR                  where install-qemu.sh puts the emulator; default .qemu
#   NSYS_JAX_PIPE_FIXTURES    the shared fixtures; default ../shared/fixtures
set -euo pipefail

# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

[[ $# -eq 1 && -d "$1" ]] || die "usage: check-aarch64.sh WHEELDIR"
ROOT=$(cd -- "$(dirname -- "$0")/.." && pwd -P)
WHEELS=$(cd -- "$1" && pwd -P)
x86=$(ls "$WHEELS"/nsys_jax_pipe-*x86_64*.whl 2>/dev/null | head -1)
arm=$(ls "$WHEELS"/nsys_jax_pipe-*manylinux*aarch64*.whl 2>/dev/null | head -1)
[[ -n $x86 ]] || die "no x86-64 wheel in $WHEELS"
[[ -n $arm ]] || die "no aarch64 manylinux wheel in $WHEELS"
RUN=$(bash "$ROOT/scripts/install-qemu.sh" "${QEMU_DIR:-$ROOT/.qemu}")

WORK=$(mktemp -d)
trap 'rm -rf -- "$WORK"' EXIT
unpack() { # WHEEL DIR: the wheel's nsys-jax-pipe binary, at DIR/nsys-jax-pipe
	mkdir -p "$2/w"
	python3 -m zipfile -e "$1" "$2/w" || die "cannot unpack $1"
	local bin
	bin=$(ls "$2"/w/*.data/scripts/nsys-jax-pipe) || die "no nsys-jax-pipe in $1"
	mv "$bin" "$2/nsys-jax-pipe"
	chmod +x "$2/nsys-jax-pipe"
	rm -rf "$2/w"
}
unpack "$x86" "$WORK/x86"
unpack "$arm" "$WORK/arm"
file_of() { od -An -tx1 -j18 -N2 "$1" | tr -d ' '; } # ELF e_machine
[[ $(file_of "$WORK/x86/nsys-jax-pipe") == 3e00 ]] || die "the x86-64 wheel's binary is not x86-64"
[[ $(file_of "$WORK/arm/nsys-jax-pipe") == b700 ]] || die "the aarch64 wheel's binary is not aarch64"
log "x86-64: $("$WORK/x86/nsys-jax-pipe" --version); aarch64 (qemu): $("$RUN" "$WORK/arm/nsys-jax-pipe" --version)"

sets=("example:$ROOT/examples/mlp-fsdp-2gpu.zip"
	"h200-allreduce:$ROOT/tests/data/problems/exposed_allreduce.zip"
	"h200-gemm:$ROOT/tests/data/problems/healthy.zip")
FIX=${NSYS_JAX_PIPE_FIXTURES:-$ROOT/../shared/fixtures}
pax=("$FIX"/jaxtoolbox-pax-fsdp4-4proc/proc{0,1,2,3}.zip)
if [[ -f ${pax[0]} ]]; then
	sets+=("pax:$(
		IFS=:
		echo "${pax[*]}"
	)")
else
	log "no pax archives under $FIX: checked without them"
fi

failed=0
for set in "${sets[@]}"; do
	name=${set%%:*}
	IFS=: read -r -a inputs <<<"${set#*:}"
	for side in x86 arm; do
		cmd=("$WORK/$side/nsys-jax-pipe")
		[[ $side == arm ]] && cmd=("$RUN" "${cmd[@]}")
		start=$SECONDS
		"${cmd[@]}" analyze -q --html "$WORK/out-$side-$name/report.html" --cache-dir "$WORK/cache-$side-$name" \
			-o "$WORK/out-$side-$name" "${inputs[@]}" >"$WORK/log-$side-$name" 2>&1 ||
			{
				cat "$WORK/log-$side-$name" >&2
				die "$side analyze of $name failed"
			}
		log "$name: $side analysed in $((SECONDS - start)) s"
	done
	if diff -r --exclude=pipeline-run.json "$WORK/out-x86-$name" "$WORK/out-arm-$name" >"$WORK/diff-$name"; then
		log "$name: identical ($(find "$WORK/out-x86-$name" -type f | wc -l) files)"
	else
		head -40 "$WORK/diff-$name" >&2
		log "$name: the aarch64 outputs differ"
		failed=1
	fi
done
[[ $failed == 0 ]] || die "the aarch64 build's outputs differ from the x86-64 build's"
log "the aarch64 build gives the x86-64 build's outputs"
