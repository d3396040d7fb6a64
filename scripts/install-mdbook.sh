#!/usr/bin/env bash
# install-mdbook.sh DIR
#
# Makes sure mdBook (the guide in docs/ is an mdBook: book.toml) is installed and prints the
# path of its binary on stdout; progress goes to stderr. An `mdbook` on PATH (or $MDBOOK) is
# used as it is; otherwise mdBook is built from crates.io into DIR with cargo (without its
# server and search features, which building the book does not need: about 1.5 minutes on 2
# cores), once.
set -euo pipefail

# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

[[ $# -eq 1 && -n "$1" ]] || die "usage: install-mdbook.sh DIR"
VERSION=0.5.4
if [[ -n "${MDBOOK:-}" && -x "$MDBOOK" ]]; then
	printf '%s\n' "$MDBOOK"
	exit 0
fi
if command -v mdbook >/dev/null 2>&1; then
	command -v mdbook
	exit 0
fi
mkdir -p -- "$1"
DEST=$(cd -- "$1" && pwd -P)
if [[ ! -x "$DEST/bin/mdbook" ]]; then
	log "building mdbook $VERSION into $DEST (cargo install)"
	cargo install --quiet --locked --no-default-features --version "$VERSION" --root "$DEST" mdbook >&2 ||
		die "cargo install mdbook failed"
fi
printf '%s\n' "$DEST/bin/mdbook"
