#!/usr/bin/env bash
# install-qemu.sh DIR
#
# Installs, without root and without touching the system, what runs aarch64 Linux programs on
# an x86-64 machine: qemu's user-mode emulator (Debian's qemu-user-static, a static binary)
# and the aarch64 glibc and libgcc_s (Debian's libc6-arm64-cross, libgcc-s1-arm64-cross) as
# the programs' root, all unpacked from Debian's packages into DIR. Prints the path of
# DIR/run-aarch64, which runs `run-aarch64 PROGRAM ARGS...` under the emulator. Idempotent.
set -euo pipefail

# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

[[ $# -eq 1 && -n "$1" ]] || die "usage: install-qemu.sh DIR"
mkdir -p -- "$1"
DIR=$(cd -- "$1" && pwd -P)
RUN="$DIR/run-aarch64"
if [[ -x $RUN ]] && "$RUN" "$DIR/usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1" --version >/dev/null 2>&1; then
	printf '%s\n' "$RUN"
	exit 0
fi
command -v apt-get >/dev/null || die "needs apt-get and dpkg (Debian or Ubuntu)"
DEBS="$DIR/.debs"
rm -rf -- "$DEBS"
mkdir -p -- "$DEBS"
log "downloading qemu-user-static, libc6-arm64-cross and libgcc-s1-arm64-cross"
(cd "$DEBS" && apt-get download -qq qemu-user-static libc6-arm64-cross libgcc-s1-arm64-cross >&2 2>/dev/null ||
	apt-get download qemu-user-static libc6-arm64-cross libgcc-s1-arm64-cross >&2) ||
	die "apt-get download failed (is Debian's main archive reachable?)"
for deb in "$DEBS"/*.deb; do
	dpkg -x "$deb" "$DIR" || die "dpkg -x $deb failed"
done
rm -rf -- "$DEBS"
[[ -x "$DIR/usr/bin/qemu-aarch64-static" ]] || die "no qemu-aarch64-static in the package"
cat >"$RUN" <<EOF
#!/bin/sh
# Runs an aarch64 Linux program under qemu's user-mode emulator, with the aarch64 glibc of
# $DIR/usr/aarch64-linux-gnu as its root.
exec "$DIR/usr/bin/qemu-aarch64-static" -L "$DIR/usr/aarch64-linux-gnu" "\$@"
EOF
chmod +x "$RUN"
"$RUN" "$DIR/usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1" --version >/dev/null 2>&1 ||
	die "the emulator does not run the aarch64 loader"
log "qemu $("$DIR/usr/bin/qemu-aarch64-static" --version | head -1)"
printf '%s\n' "$RUN"
