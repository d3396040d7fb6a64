#!/usr/bin/env bash
# build-wheels.sh OUTDIR [TARGET...]
#
# Builds the release wheels (the three commands and the Python package `nsys_jax_pipe`) for
# manylinux2014 (glibc 2.17), x86-64 and aarch64 (Grace Hopper, Grace Blackwell), with
# maturin's zig linker: no container, no cross toolchain. Rust code and the C it builds
# (liblzma, zstd, jemalloc, ring, blake3) are linked statically; the binaries need only
# glibc (libc, libm, libpthread, libdl and the loader, symbols up to GLIBC_2.17). Prints the
# wheels' paths on stdout; progress goes to stderr.
#
# TARGET: rust target triples; default both x86_64-unknown-linux-gnu and
# aarch64-unknown-linux-gnu. Or `native`: a wheel for this machine alone (its own glibc, no
# zig, tagged linux_<arch>), built in the native release build's folder with its settings, so
# that it shares every compiled dependency with `cargo build --release` and `cargo test
# --release`; for testing the package here, not for shipping. maturin, ziglang (zig's
# compiler, from PyPI) and auditwheel (to check the tags: `auditwheel show WHEEL`) live in
# OUTDIR/.build-env. A target's standard library comes from rustup (`rustup target add`)
# when missing. A triple builds in CARGO_TARGET_DIR/<triple>/release (default target/), apart
# from the native build; `native` in the native build's own folder.
#
# Settings (environment):
#   PYTHON             the Python that makes the build environment; default python3
#   CARGO_TARGET_DIR   where cargo builds (as for cargo)
#   WHEEL_FEATURES     cargo features instead of the default ones (comma-separated, with
#                      --no-default-features); the default build has the S3, GCS and Azure
#                      remote cache
set -euo pipefail

# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

[[ $# -ge 1 && -n "$1" ]] || die "usage: build-wheels.sh OUTDIR [TARGET...]"
python=${PYTHON:-python3}
command -v "$python" >/dev/null || die "no $python"
ROOT=$(cd -- "$(dirname -- "$0")/.." && pwd -P)
mkdir -p -- "$1"
DEST=$(cd -- "$1" && pwd -P)
shift
TARGETS=("$@")
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=(x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu)
BUILD="$DEST/.build-env"
PIP=(--quiet --disable-pip-version-check)

if [[ ! -x "$BUILD/bin/maturin" || ! -x "$BUILD/bin/auditwheel" ]] ||
	! "$BUILD/bin/python" -c 'import ziglang' 2>/dev/null; then
	log "installing maturin, ziglang and auditwheel into $BUILD"
	"$python" -m venv "$BUILD" >&2 || die "$python -m venv failed (on Debian: apt-get install python3-venv)"
	"$BUILD/bin/python" -m pip install "${PIP[@]}" 'maturin>=1.7,<2' 'ziglang>=0.13' 'auditwheel>=6' >&2 ||
		die "pip install maturin ziglang auditwheel failed"
fi
# maturin finds zig through `python -m ziglang` of the first python on PATH.
export PATH="$BUILD/bin:$PATH"

features=()
if [[ -n ${WHEEL_FEATURES+set} ]]; then
	features=(--no-default-features)
	[[ -n $WHEEL_FEATURES ]] && features+=(--features "$WHEEL_FEATURES")
fi

for target in "${TARGETS[@]}"; do
	if [[ $target == native ]]; then
		rm -rf -- "$DEST/native"
		log "building a wheel for this machine (native release build, shared with cargo's)"
		(cd "$ROOT" && "$BUILD/bin/maturin" build --release --compatibility linux \
			--skip-auditwheel "${features[@]}" --out "$DEST/native" >&2) ||
			die "maturin build for this machine failed"
		wheel=$(ls "$DEST/native"/nsys_jax_pipe-*.whl) || die "no wheel in $DEST/native"
		rm -f -- "$DEST"/nsys_jax_pipe-*"$(uname -m)".whl
		mv -f -- "$wheel" "$DEST/"
		rmdir -- "$DEST/native"
		printf '%s\n' "$DEST/$(basename "$wheel")"
		continue
	fi
	if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
		log "adding the standard library for $target (rustup target add)"
		rustup target add "$target" >&2 || die "rustup target add $target failed"
	fi
	# jemalloc's page size is fixed when it is built: 64 KiB pages on aarch64, as Grace
	# machines' kernels often use (it then runs on 4 KiB-page kernels too); x86-64 has 4 KiB.
	lg_page=12
	[[ $target == aarch64-* ]] && lg_page=16
	arch=${target%%-*}
	rm -rf -- "$DEST/$target"
	rm -f -- "$DEST"/nsys_jax_pipe-*"$arch".whl
	log "building the $target wheel (manylinux2014, zig)"
	# The wheel's binaries are stripped: no debug info to build (the release profile keeps it
	# for profiling).
	(cd "$ROOT" && JEMALLOC_SYS_WITH_LG_PAGE=$lg_page CARGO_PROFILE_RELEASE_DEBUG=false \
		"$BUILD/bin/maturin" build --release \
		--zig --target "$target" --compatibility manylinux2014 "${features[@]}" \
		--out "$DEST/$target" >&2) || die "maturin build for $target failed"
	wheel=$(ls "$DEST/$target"/nsys_jax_pipe-*.whl) || die "no wheel in $DEST/$target"
	mv -f -- "$wheel" "$DEST/"
	rmdir -- "$DEST/$target"
	wheel="$DEST/$(basename "$wheel")"
	# The platform tag the wheel's binaries really allow (their glibc symbol versions).
	show=$("$BUILD/bin/auditwheel" show "$wheel" 2>&1) || die "auditwheel show $wheel failed: $show"
	grep -q "manylinux_2_17_$arch" <<<"$show" ||
		die "$(basename "$wheel") is not manylinux_2_17 (manylinux2014): $show"
	log "built $(basename "$wheel"): auditwheel finds it consistent with manylinux_2_17_$arch"
	printf '%s\n' "$wheel"
done
