#!/usr/bin/env bash
# install.sh [WHEEL] — the Python side of this profile, on a laptop or workstation.
#
# Makes the virtual environment nsys_jax_pipe_venv beside this script (once), installs into it
# nsys_jax_pipe @VERSION@ (the version that wrote this archive: from WHEEL, a wheel file,
# when given, else from the package index pip is set up for) and JupyterLab, then opens
# Analysis.ipynb, the notebook beside this script. Run it from anywhere: paths are taken
# relative to this script.
#
# Settings (environment):
#   PYTHON                 the Python that makes the environment (3.10 or newer); default python3
#   NSYS_JAX_PIPE_WHEEL    a wheel file, as the WHEEL argument
#   NSYS_JAX_PIPE_NO_LAB   set to 1: set up only, do not start JupyterLab (for scripts and CI)
set -euo pipefail

log() { printf 'install.sh: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
venv="$here/nsys_jax_pipe_venv"
python=${PYTHON:-python3}
command -v "$python" >/dev/null || die "no $python (set PYTHON to a Python 3.10 or newer)"
wheel=${1:-${NSYS_JAX_PIPE_WHEEL:-}}
if [[ -n $wheel ]]; then
	[[ -f $wheel ]] || die "$wheel: no such wheel file"
	package=$(cd -- "$(dirname -- "$wheel")" && pwd -P)/$(basename -- "$wheel")
else
	package="nsys-jax-pipe==@VERSION@"
fi

if [[ ! -x "$venv/bin/python" ]]; then
	log "making the virtual environment $venv"
	"$python" -m venv "$venv" || die "$python -m venv failed"
fi
log "installing $package and JupyterLab"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$package" jupyterlab \
	|| die "pip install failed"
"$venv/bin/python" -c 'import nsys_jax_pipe, jupyterlab, nbclient' \
	|| die "the environment lacks nsys_jax_pipe, jupyterlab or nbclient"
log "ready: $venv"
if [[ ${NSYS_JAX_PIPE_NO_LAB:-} == 1 ]]; then
	exit 0
fi
cd -- "$here"
exec "$venv/bin/jupyter" lab Analysis.ipynb
