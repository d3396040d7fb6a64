#!/usr/bin/env bash
# install-wheel.sh DIR
#
# Builds the project's release wheel for this machine (scripts/build-wheels.sh native: the
# binaries plus the `nsys_jax_pipe` Python package, as `pip install nsys-jax-pipe` gets it;
# built with the native release build's settings and folder, so a later `cargo test
# --release` compiles none of the dependencies again; the manylinux2014 wheels that ship come
# from `scripts/build-wheels.sh DIR`) and installs it into a fresh virtual environment DIR,
# with polars for the frames; prints the path of that environment's python on stdout
# (progress goes to stderr). The build tools live in DIR/wheels/.build-env, apart from the
# environment under test; the wheel is left in DIR/wheels/. Running it again rebuilds the
# wheel from the current sources and reinstalls it.
#
# Settings (environment):
#   PYTHON             the Python that makes the environments; default python3
#   CARGO_TARGET_DIR   where cargo builds (as for cargo)
set -euo pipefail

# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

[[ $# -eq 1 && -n "$1" ]] || die "usage: install-wheel.sh DIR"
python=${PYTHON:-python3}
command -v "$python" >/dev/null || die "no $python"
ROOT=$(cd -- "$(dirname -- "$0")/.." && pwd -P)
mkdir -p -- "$1"
DEST=$(cd -- "$1" && pwd -P)
PIP=(--quiet --disable-pip-version-check)

log "building the wheel for this machine (scripts/build-wheels.sh native)"
wheel=$(bash "$ROOT/scripts/build-wheels.sh" "$DEST/wheels" native) ||
	die "building the wheel failed"
[[ -f $wheel ]] || die "no wheel built"

if [[ ! -x "$DEST/bin/python" ]]; then
	log "making a virtual environment in $DEST"
	"$python" -m venv "$DEST" >&2 || die "$python -m venv failed"
fi
log "installing the wheel and polars"
"$DEST/bin/python" -m pip install "${PIP[@]}" "$wheel" >&2 || die "pip install $wheel failed"
# The same version rebuilt from changed sources: replaced, its dependencies kept.
"$DEST/bin/python" -m pip install "${PIP[@]}" --force-reinstall --no-deps "$wheel" >&2 || die "pip install $wheel failed"
"$DEST/bin/python" -m pip install "${PIP[@]}" 'polars>=1.0' >&2 || die "pip install polars failed"
"$DEST/bin/nsys-jax-pipe" --version >&2 || die "the installed nsys-jax-pipe does not run"
"$DEST/bin/python" -c 'import nsys_jax_pipe' || die "the installed package does not import"
# Newly installed: the build script looks again for what the tests can use (build.rs).
touch "$(dirname "$0")/../build.rs"
printf '%s\n' "$DEST/bin/python"
