#!/usr/bin/env bash
# install-chromium.sh
#
# Makes sure a headless-capable Chromium is installed (the HTML report's tests open the
# reports in it) and prints the path of its binary on stdout. Everything else goes to stderr.
#
# An existing `chromium`, `chromium-browser` or `google-chrome` on PATH (or $CHROMIUM) is
# used as it is. Otherwise Debian's or Ubuntu's `chromium` package is installed with apt-get
# (as root, or through sudo).
set -euo pipefail

# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

found() {
	if [[ -n "${CHROMIUM:-}" && -x "$CHROMIUM" ]]; then
		printf '%s\n' "$CHROMIUM"
		return 0
	fi
	local n
	for n in chromium chromium-browser google-chrome; do
		if command -v "$n" >/dev/null 2>&1; then
			command -v "$n"
			return 0
		fi
	done
	return 1
}

if path=$(found); then
	log "already installed: $("$path" --version 2>/dev/null || echo "$path")"
	printf '%s\n' "$path"
	exit 0
fi

command -v apt-get >/dev/null 2>&1 || die "no Chromium and no apt-get: install Chromium and set CHROMIUM"
if [[ $(id -u) -eq 0 ]]; then
	as_root=()
elif command -v sudo >/dev/null 2>&1; then
	as_root=(sudo)
else
	die "no Chromium, and installing it needs root (or sudo)"
fi
log "installing chromium with apt-get"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq >&2 || die "apt-get update failed"
"${as_root[@]}" apt-get install -y -qq --no-install-recommends chromium >&2 ||
	die "apt-get install chromium failed"
path=$(found) || die "chromium installed but not on PATH"
log "installed: $("$path" --version 2>/dev/null || echo "$path")"
# Newly installed: the build script looks again for what the tests can use (build.rs).
touch "$(dirname "$0")/../build.rs"
printf '%s\n' "$path"
