#!/usr/bin/env bash
# install-nsys.sh DIR
#
# Puts a command-line Nsight Systems (2023.4) under DIR and prints the path of the `nsys`
# binary on stdout: enough for `nsys export`, `nsys stats` and `nsys recipe`, and for
# `nsys profile` (on a machine without a GPU, `--trace=nvtx`). Everything else (progress, apt
# output) goes to stderr.
#
# The CLI comes from Debian's non-free package `nsight-systems-target`; `nsys profile` also
# needs the importer that turns a capture into a report (`QdstrmImporter`), which is in the
# host package `nsight-systems`: only the importer and the libraries it loads are kept
# (DIR/host-linux-x64, about 60 MB), plus libssh, which it loads from the system (the
# machine's own libssh.so.4, else Debian's libssh-4 package unpacked beside it). apt-get
# fetches the packages with a configuration, package lists and cache that live under DIR/apt,
# so nothing outside DIR changes and no root rights are needed; dpkg only unpacks the .debs
# (no installation). Running it again when DIR already holds a working nsys and importer does
# nothing but print the path.
#
# Settings (environment):
#   NSYS_DEBIAN_MIRROR   default http://deb.debian.org/debian
#   NSYS_DEBIAN_SUITE    default trixie (the Debian release that ships 2023.4)
#   NSYS_DEBIAN_VERSION  default 2023.4.4.54~12.4.1-2; any available version is taken when
#                        this exact one is gone from the mirror
#   NSYS_APT_KEYRING     keyring that signs the mirror; default Debian's archive keyring
#                        when the machine has it, else apt's own trusted keys
set -euo pipefail

# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

[[ $# -eq 1 && -n "$1" ]] || die "usage: install-nsys.sh DIR"
mkdir -p -- "$1"
DEST=$(cd -- "$1" && pwd -P)
NSYS="$DEST/target-linux-x64/nsys"
IMPORTER="$DEST/host-linux-x64/QdstrmImporter"

nsys_works() { [[ -x "$NSYS" ]] && "$NSYS" --version >/dev/null 2>&1; }
# The importer runs when every library it loads is found (it prints its usage on --help).
importer_works() { [[ -x "$IMPORTER" ]] && "$IMPORTER" --help >/dev/null 2>&1; }

if nsys_works && importer_works; then
	log "already installed: $("$NSYS" --version 2>/dev/null), with its importer"
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

# download PACKAGE: its .deb (version $WANT when the mirror still has it) into
# $APT/download; prints the file.
download() {
	rm -f "$APT/download"/*.deb
	log "downloading $1"
	if ! (cd "$APT/download" && apt-get "${apt_opts[@]}" -q download "$1=$WANT" >&2); then
		log "version $WANT of $1 is not available; taking the one the mirror has"
		(cd "$APT/download" && apt-get "${apt_opts[@]}" -q download "$1" >&2) ||
			die "cannot download $1"
	fi
	local debs=("$APT/download/$1"_*.deb)
	[[ -f "${debs[0]}" ]] || die "apt-get reported success but left no .deb in $APT/download"
	printf '%s\n' "${debs[0]}"
}

# Unpack beside the destination and move into place in one step, so an interrupted run
# never leaves a half-filled folder.
UNPACK=$(mktemp -d "$DEST/.unpack.XXXXXX")
trap 'rm -rf -- "$UNPACK"' EXIT

if ! nsys_works; then
	deb=$(download nsight-systems-target)
	log "unpacking $(basename -- "$deb")"
	dpkg-deb -x "$deb" "$UNPACK/target" || die "cannot unpack $deb"
	found=$(find "$UNPACK/target" -type f -name nsys -path '*/target-linux-x64/nsys' -print -quit)
	[[ -n "$found" ]] || die "the package holds no target-linux-x64/nsys"
	rm -rf -- "$DEST/target-linux-x64"
	mv -- "$(dirname -- "$found")" "$DEST/target-linux-x64"
	rm -f "$APT/download"/*.deb
	"$NSYS" --version >&2 || die "the unpacked nsys does not run"
fi

if ! importer_works; then
	deb=$(download nsight-systems)
	log "unpacking the importer of $(basename -- "$deb")"
	dpkg-deb -x "$deb" "$UNPACK/host" || die "cannot unpack $deb"
	rm -f "$APT/download"/*.deb
	src=$(find "$UNPACK/host" -type f -name QdstrmImporter -path '*/host-linux-x64/*' -print -quit)
	[[ -n "$src" ]] || die "the package holds no host-linux-x64/QdstrmImporter"
	src=$(dirname -- "$src")
	keep="$UNPACK/host-linux-x64"
	mkdir -p "$keep"
	cp -- "$src/QdstrmImporter" "$keep/"
	# The libraries of the package it loads ($ORIGIN is its run path), found by ldd.
	LD_LIBRARY_PATH="$src" ldd "$src/QdstrmImporter" | awk '{print $3}' |
		grep -F -- "$src/" | while read -r lib; do cp -- "$lib" "$keep/"; done
	# libssh: the system's, else Debian's libssh-4 from the machine's own package lists.
	ssh=$(ldconfig -p 2>/dev/null | awk '/libssh\.so\.4 .*x86-64/ {print $NF; exit}')
	if [[ -z "$ssh" ]]; then
		log "no libssh.so.4 on this machine: unpacking Debian's libssh-4"
		(cd "$UNPACK" && apt-get -q download libssh-4 >&2) ||
			die "cannot download libssh-4 (install it: apt-get install libssh-4)"
		dpkg-deb -x "$UNPACK"/libssh-4_*.deb "$UNPACK/ssh" || die "cannot unpack libssh-4"
		ssh=$(find "$UNPACK/ssh" -name 'libssh.so.4*' -type f -print -quit)
		[[ -n "$ssh" ]] || die "the libssh-4 package holds no libssh.so.4"
	fi
	cp -L -- "$ssh" "$keep/libssh.so.4"
	ln -sf libssh.so.4 "$keep/libssh.so"
	rm -rf -- "$DEST/host-linux-x64"
	mv -- "$keep" "$DEST/host-linux-x64"
	importer_works || die "the unpacked importer does not run: $(LD_BIND_NOW=1 "$IMPORTER" --help 2>&1 | tail -1)"
	log "importer installed: $(du -sh "$DEST/host-linux-x64" | cut -f1)"
fi

# Newly installed: the build script looks again for what the tests can use (build.rs).
touch "$(dirname "$0")/../build.rs"
printf '%s\n' "$NSYS"
