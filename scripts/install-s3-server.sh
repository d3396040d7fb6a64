#!/usr/bin/env bash
# install-s3-server.sh DIR
#
# An S3-protocol server for the remote cache's tests: moto's standalone server (`moto[server]`
# from PyPI) in a Python virtual environment under DIR; prints the path of its `moto_server`
# program on stdout (progress goes to stderr). The tests start it on a free localhost port.
# Nothing outside DIR changes. Running it again when DIR already has it does nothing but
# print the path.
#
# Settings (environment):
#   NSYS_JAX_PIPE_MOTO  the requirement to install; default moto[server]==5.2.5
#   PYTHON              the Python that makes the environment; default python3
set -euo pipefail

# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

[[ $# -eq 1 && -n "$1" ]] || die "usage: install-s3-server.sh DIR"
want=${NSYS_JAX_PIPE_MOTO:-moto[server]==5.2.5}
python=${PYTHON:-python3}
mkdir -p -- "$1"
DEST=$(cd -- "$1" && pwd -P)
SERVER="$DEST/bin/moto_server"

if [[ -x "$SERVER" ]] && "$DEST/bin/python" -c 'import moto.server' 2>/dev/null; then
	log "already installed: $("$DEST/bin/python" -c 'import moto; print("moto", moto.__version__)')"
	printf '%s\n' "$SERVER"
	exit 0
fi
command -v "$python" >/dev/null || die "no $python"
log "making a virtual environment in $DEST"
"$python" -m venv "$DEST" >&2 || die "$python -m venv failed (on Debian: apt-get install python3-venv)"
log "installing $want"
"$DEST/bin/python" -m pip install --quiet --disable-pip-version-check "$want" >&2 || die "pip install $want failed"
[[ -x "$SERVER" ]] || die "$want installed no moto_server"
log "installed: $("$DEST/bin/python" -c 'import moto; print("moto", moto.__version__)')"
# Newly installed: the build script looks again for what the tests can use (build.rs).
touch "$(dirname "$0")/../build.rs"
printf '%s\n' "$SERVER"
