#!/usr/bin/env bash
# install-nsys.sh DIR
#
# Puts a command-line Nsight Systems (2023.4, enough for `nsys export`, `nsys stats` and
# `nsys recipe` on a machine without a GPU) under DIR and prints the path of the `nsys`
# binary on stdout. Everything else (progress, apt output) goes to stderr.
#
# The CLI comes from Debian's non-free package `nsight-systems-target`. apt-get fetches it
# with a configuration, package lists and cache that live under DIR/apt, so nothing outside
# DIR changes and no root rights are needed; dpkg only unpacks the .deb (no installation).
# Running it again when DIR already holds a working nsys does nothing but print the path.
#
# Settings (environment):
#   NSYS_DEBIAN_MIRROR   default http://deb.debian.org/debian
#   NSYS_DEBIAN_SUITE    default trixie (the Debian release that ships 2023.4)
#   NSYS_DEBIAN_VERSION  default 2023.4.4.54~12.4.1-2; any available version is taken when
#                        this exact one is gone from the mirror
#   NSYS_APT_KEYRING     keyring that signs the mirror; default Debian's archive keyring
#                        when the machine has it, else apt's own trusted keys
set -euo pipefail

log() { printf 'install-nsys: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

[[ $# -eq 1 && -n "$1" ]] || die "usage: install-nsys.sh DIR"
mkdir -p -- "$1"
DEST=$(cd -- "$1" && pwd -P)
NSYS="$DEST/target-linux-x64/nsys"

if [[ -x "$NSYS" ]] && "$NSYS" --version >/dev/null 2>&1; then
	log "already installed: $("$NSYS" --version 2>/dev/null)"
	printf '%s\n' "$NSYS"
	exit 0
fi

case "$(uname -m)" in
x86_64 | amd64) ;;
*) die "only x86-64 Linux is supported (this is $(uname -m))" ;;
esac
for tool in apt-get dpkg; do
	command -v "$tool" >/dev/null || die "$tool is needed (a Debian or Ubuntu machine)"
done

MIRROR=${NSYS_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=${NSYS_DEBIAN_SUITE:-trixie}
WANT=${NSYS_DEBIAN_VERSION:-2023.4.4.54~12.4.1-2}
KEYRING=${NSYS_APT_KEYRING:-}
if [[ -z "$KEYRING" && -r /usr/share/keyrings/debian-archive-keyring.gpg ]]; then
	KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
fi

# A private apt tree: its own sources, lists, cache, and no preferences or extra sources
# from the machine.
APT="$DEST/apt"
mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial" "$APT/sources.d" "$APT/prefs.d" \
	"$APT/download"
if [[ -n "$KEYRING" ]]; then
	echo "deb [arch=amd64 signed-by=$KEYRING] $MIRROR $SUITE non-free" >"$APT/sources.list"
else
	echo "deb [arch=amd64] $MIRROR $SUITE non-free" >"$APT/sources.list"
fi
apt_opts=(
	-o "Dir::Etc::SourceList=$APT/sources.list"
	-o "Dir::Etc::SourceParts=$APT/sources.d"
	-o "Dir::Etc::Preferences=$APT/preferences"
	-o "Dir::Etc::PreferencesParts=$APT/prefs.d"
	-o "Dir::State::Lists=$APT/lists"
	-o "Dir::Cache=$APT/cache"
	-o "APT::Sandbox::User=$(id -un)"
	-o "Acquire::Retries=3"
	-o "Acquire::Languages=none"
)
: >"$APT/preferences"

log "reading the package list of Debian $SUITE non-free from $MIRROR"
apt-get "${apt_opts[@]}" -q update >&2 || die "apt-get update failed (network, mirror or keyring; see above)"

log "downloading nsight-systems-target"
rm -f "$APT/download"/*.deb
if ! (cd "$APT/download" && apt-get "${apt_opts[@]}" -q download "nsight-systems-target=$WANT" >&2); then
	log "version $WANT is not available; taking the one the mirror has"
	(cd "$APT/download" && apt-get "${apt_opts[@]}" -q download nsight-systems-target >&2) ||
		die "cannot download nsight-systems-target"
fi
debs=("$APT/download"/nsight-systems-target_*.deb)
[[ -f "${debs[0]}" ]] || die "apt-get reported success but left no .deb in $APT/download"

# Unpack beside the destination and move into place in one step, so an interrupted run
# never leaves a half-filled target-linux-x64.
UNPACK=$(mktemp -d "$DEST/.unpack.XXXXXX")
trap 'rm -rf -- "$UNPACK"' EXIT
log "unpacking $(basename -- "${debs[0]}")"
dpkg-deb -x "${debs[0]}" "$UNPACK" || die "cannot unpack ${debs[0]}"
found=$(find "$UNPACK" -type f -name nsys -path '*/target-linux-x64/nsys' -print -quit)
[[ -n "$found" ]] || die "the package holds no target-linux-x64/nsys"
rm -rf -- "$DEST/target-linux-x64"
mv -- "$(dirname -- "$found")" "$DEST/target-linux-x64"
rm -f "$APT/download"/*.deb

"$NSYS" --version >&2 || die "the unpacked nsys does not run"
printf '%s\n' "$NSYS"
