# Sourced by the scripts beside it: messages to stderr prefixed with the script's name, and
# an error that ends the script.
log() { printf '%s: %s\n' "$(basename "$0" .sh)" "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}
