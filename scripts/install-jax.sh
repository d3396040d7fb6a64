#!/usr/bin/env bash
# install-jax.sh DIR
#
# A Python virtual environment under DIR with JAX for the CPU from PyPI, for the test that
# runs `nsys-jax-pipe run` for real on a machine without a GPU; prints the path of its
# python on stdout (progress goes to stderr). Nothing outside DIR changes. Running it again
# when DIR already has a working JAX does nothing but print the path.
#
# Settings (environment):
#   NSYS_JAX_PIPE_JAX   the requirement to install; default jax==0.10.2 (CPU wheels)
#   PYTHON              the Python that makes the environment; default python3
set -euo pipefail

log() { printf 'install-jax: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

[[ $# -eq 1 && -n "$1" ]] || die "usage: install-jax.sh DIR"
want=${NSYS_JAX_PIPE_JAX:-jax==0.10.2}
python=${PYTHON:-python3}
mkdir -p -- "$1"
DEST=$(cd -- "$1" && pwd -P)
PY="$DEST/bin/python"

if [[ -x "$PY" ]] && version=$("$PY" -c 'import jax; print(jax.__version__)' 2>/dev/null); then
	log "already installed: jax $version"
	printf '%s\n' "$PY"
	exit 0
fi
command -v "$python" >/dev/null || die "no $python"
log "making a virtual environment in $DEST"
"$python" -m venv "$DEST" >&2 || die "$python -m venv failed (on Debian: apt-get install python3-venv)"
log "installing $want"
"$PY" -m pip install --quiet --disable-pip-version-check "$want" >&2 || die "pip install $want failed"
version=$("$PY" -c 'import jax; print(jax.__version__)') || die "jax does not import"
log "installed: jax $version"
# Newly installed: the build script looks again for what the tests can use (build.rs).
touch "$(dirname "$0")/../build.rs"
printf '%s\n' "$PY"
