#!/usr/bin/env bash
# Install NVIDIA JAX-Toolbox's Python `nsys-jax` package (nsys-jax-combine and the
# bundled analysis recipes) into a CPU-only virtual environment, with a `protoc`
# provided by PyPI's grpcio-tools (no GitHub download needed).
#
# Usage: bash install-nsys-jax-python.sh VENV_DIR
#
# Environment variables (all optional):
#   JAX_TOOLBOX_SRC  a folder holding .github/container/nsys_jax (a checkout), or a
#                    bare git dir of JAX-Toolbox
#                    (default: a shallow clone of github.com/NVIDIA/JAX-Toolbox)
#   JAX_TOOLBOX_REF  git revision to use when JAX_TOOLBOX_SRC is a git dir (default HEAD)
#   PYTHON           python >= 3.12 used to create the venv
#                    (default: the first of python3.13, python3.12, python3 on PATH that is)
#
# Idempotent: re-running reuses the venv, re-installs the package from the source
# and rewrites the protoc wrapper.
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 VENV_DIR" >&2
    exit 2
fi

VENV=$(realpath -m -- "$1")
SRC=${JAX_TOOLBOX_SRC:-}
REF=${JAX_TOOLBOX_REF:-HEAD}
PKG_SUBDIR=.github/container/nsys_jax

PYTHON=${PYTHON:-}
if [[ -z "$PYTHON" ]]; then
    for p in python3.13 python3.12 python3; do
        if command -v "$p" >/dev/null && "$p" -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then
            PYTHON=$(command -v "$p")
            break
        fi
    done
fi
if [[ -z "$PYTHON" ]] || ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then
    echo "error: need python >= 3.12 (set PYTHON=...); got '${PYTHON}'" >&2
    exit 1
fi

# Runtime dependencies of nsys-jax-combine + the summary/communication recipes.
# jax and cuda-python (declared deps) are deliberately skipped: only needed for
# profiling / jax-nccl-test, not for combining and analysing archives.
# grpcio-tools provides protoc (python -m grpc_tools.protoc) and pins a protobuf
# runtime range compatible with the code its bundled protoc generates.
DEPS=(numpy pandas pyarrow protobuf uncertainties prettytable ipython requests grpcio-tools)

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
if [[ -z "$SRC" ]]; then
    git clone --quiet --depth 1 --bare https://github.com/NVIDIA/JAX-Toolbox.git "$WORK/jax-toolbox.git"
    SRC="$WORK/jax-toolbox.git"
fi

# 1. Get the package source into a scratch dir (never build inside the source tree).
if [[ -f "$SRC/$PKG_SUBDIR/pyproject.toml" ]]; then
    echo ">> using source folder $SRC/$PKG_SUBDIR"
    cp -r "$SRC/$PKG_SUBDIR" "$WORK/nsys_jax"
    chmod -R u+w "$WORK/nsys_jax"  # source may be read-only; the build writes egg-info here
elif git --git-dir="$SRC" rev-parse --verify --quiet "$REF^{commit}" >/dev/null 2>&1; then
    echo ">> using git dir $SRC @ $(git --git-dir="$SRC" rev-parse --short "$REF")"
    mkdir -p "$WORK/nsys_jax"
    # Archive only the package subtree (the bare mirror may lack large unrelated blobs).
    git --git-dir="$SRC" archive --format=tar "$REF:$PKG_SUBDIR" | tar -x -C "$WORK/nsys_jax"
else
    echo "error: JAX_TOOLBOX_SRC=$SRC is neither a folder with $PKG_SUBDIR nor a git dir" >&2
    exit 1
fi
[[ -f "$WORK/nsys_jax/pyproject.toml" ]] || { echo "error: no pyproject.toml extracted" >&2; exit 1; }

# 2. Create (or reuse) the venv.
if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
    echo ">> reusing venv $VENV"
else
    echo ">> creating venv $VENV with $PYTHON"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip)
"${PIP[@]}" install --quiet --upgrade pip

# 3. Dependencies + build backend (so the package builds without build isolation).
"${PIP[@]}" install --quiet --upgrade-strategy only-if-needed \
    "${DEPS[@]}" "setuptools>=64" "setuptools_scm>=8" wheel

# 4. The package itself, without its jax / cuda-python dependencies. setuptools_scm
# cannot find a git checkout at root "../../..", so pretend a version.
SETUPTOOLS_SCM_PRETEND_VERSION=${SETUPTOOLS_SCM_PRETEND_VERSION:-0.0.0} \
SETUPTOOLS_SCM_PRETEND_VERSION_FOR_NSYS_JAX=${SETUPTOOLS_SCM_PRETEND_VERSION:-0.0.0} \
    "${PIP[@]}" install --quiet --no-deps --no-build-isolation --force-reinstall "$WORK/nsys_jax"

# 5. protoc: nsys_jax.protobuf_utils looks up `protoc` on PATH, with the venv's bin/
# prepended when running inside the venv. Wrap grpc_tools' bundled protoc; running
# grpc_tools.protoc as __main__ adds the google/protobuf/*.proto well-known-type
# include path automatically.
cat > "$VENV/bin/protoc" <<EOF
#!/bin/sh
exec "$VENV/bin/python" -m grpc_tools.protoc "\$@"
EOF
chmod 755 "$VENV/bin/protoc"

# 6. Smoke test: imports, protoc version vs protobuf runtime, and a tiny compile that
# imports a well-known type and loads the generated module.
"$VENV/bin/python" - <<'EOF'
import importlib.metadata as md, os, subprocess, sys, tempfile
import nsys_jax, google.protobuf, pandas, pyarrow, uncertainties, prettytable  # noqa
from nsys_jax.protobuf_utils import which
protoc = which("protoc")
ver = subprocess.run([protoc, "--version"], check=True, capture_output=True, text=True).stdout.strip()
print(f">> nsys-jax {md.version('nsys-jax')}, protobuf runtime {google.protobuf.__version__}, "
      f"grpcio-tools {md.version('grpcio-tools')}, {ver} at {protoc}")
with tempfile.TemporaryDirectory() as d:
    os.makedirs(f"{d}/in/t"); os.makedirs(f"{d}/out")
    with open(f"{d}/in/t/smoke.proto", "w") as f:
        f.write('syntax = "proto3"; package t; import "google/protobuf/any.proto";'
                ' message M { google.protobuf.Any a = 1; int64 x = 2; }')
    nsys_jax.compile_protos(f"{d}/in", f"{d}/out")
    sys.path.insert(0, f"{d}/out")
    from t import smoke_pb2
    assert smoke_pb2.M(x=3).x == 3
print(">> smoke test OK")
EOF
echo ">> installed: $VENV/bin/nsys-jax-combine"
