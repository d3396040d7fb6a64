#!/usr/bin/env bash
# install-jax.sh DIR
#
# A Python virtual environment under DIR with JAX for the CPU and the `nvtx` package from PyPI,
# for the tests that run `nsys-jax-pipe run` for real on a machine without a GPU; prints the path of its
# python on stdout (progress goes to stderr). Nothing outside DIR changes. Running it again
# when DIR already has a working JAX does nothing but print the path.
#
# Settings (environment):
#   NSYS_JAX_PIPE_JAX   the requirement to install; default jax==0.10.2 (CPU wheels)
#   NSYS_JAX_PIPE_NVTX  the nvtx requirement; default nvtx==0.2.17 (the release whose domain
#                       check the user-range test exercises)
#   PYTHON              the Python that makes the environment; default python3
set -euo pipefail

# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

[[ $# -eq 1 && -n "$1" ]] || die "usage: install-jax.sh DIR"
want=${NSYS_JAX_PIPE_JAX:-jax==0.10.2}
nvtx=${NSYS_JAX_PIPE_NVTX:-nvtx==0.2.17}
python=${PYTHON:-python3}
mkdir -p -- "$1"
DEST=$(cd -- "$1" && pwd -P)
PY="$DEST/bin/python"

if [[ -x "$PY" ]] && version=$("$PY" -c 'import jax, nvtx; print(jax.__version__)' 2>/dev/null); then
	log "already installed: jax $version"
	printf '%s\n' "$PY"
	exit 0
fi
command -v "$python" >/dev/null || die "no $python"
log "making a virtual environment in $DEST"
[[ -x "$PY" ]] || "$python" -m venv "$DEST" >&2 || die "$python -m venv failed (on Debian: apt-get install python3-venv)"
log "installing $want"
"$PY" -m pip install --quiet --disable-pip-version-check "$want" "$nvtx" >&2 || die "pip install $want $nvtx failed"
version=$("$PY" -c 'import jax; print(jax.__version__)') || die "jax does not import"
log "installed: jax $version"
# Newly installed: the build script looks again for what the tests can use (build.rs).
touch "$(dirname "$0")/../build.rs"
printf '%s\n' "$PY"
