#!/usr/bin/env bash
# A stand-in for nsys, for testing `nsys-jax-pipe run` without a GPU: `nsys profile` runs the
# program like nsys would, then leaves a recorded capture where the real one would have
# written its report and XLA its dump; every other nsys command goes to the real nsys.
#   REAL_NSYS      the real nsys (for --version and export)
#   STANDIN_REPORT the report to leave at --output (unset: none, as when nsys fails)
#   STANDIN_DUMP   the XLA dump folder to copy to XLA_FLAGS' --xla_dump_to
#   STANDIN_LOG    where to append what it was asked to do (options, environment, program)
# The options come first and `--output=` last, as `nsys-jax-pipe run` passes them.
set -u
if [[ "${1:-}" != profile ]]; then exec "$REAL_NSYS" "$@"; fi
shift
log=${STANDIN_LOG:-/dev/null}
out=
while [[ $# -gt 0 ]]; do
  case "$1" in
    --output=*) out=${1#--output=}; shift; break ;;
    *) echo "nsys-option $1" >> "$log"; shift ;;
  esac
done
echo "XLA_FLAGS=${XLA_FLAGS-}" >> "$log"
echo "JAX_TRACEBACK_IN_LOCATIONS_LIMIT=${JAX_TRACEBACK_IN_LOCATIONS_LIMIT-}" >> "$log"
echo "JAX_ENABLE_COMPILATION_CACHE=${JAX_ENABLE_COMPILATION_CACHE-}" >> "$log"
echo "program $*" >> "$log"
# Like nsys, stop the program when stopped. The trap is set before the program starts, so
# that a signal arriving at any moment stops it; the program runs in the background so that
# the trap runs at once.
pid=
stopped=
stop() {
  stopped=1
  [[ -n "$pid" ]] && kill -TERM "$pid" 2>/dev/null
}
trap stop TERM INT HUP
"$@" &
pid=$!
[[ -n "$stopped" ]] && kill -TERM "$pid" 2>/dev/null
wait "$pid"
rc=$?
# `wait` returns early when a trapped signal arrives: wait for the program itself.
while kill -0 "$pid" 2>/dev/null; do
  wait "$pid"
  rc=$?
done
trap - TERM INT HUP
[[ -n "$stopped" ]] && exit 143
dump=$(sed -n 's/.*--xla_dump_to=\([^ ]*\).*/\1/p' <<< "${XLA_FLAGS-}")
if [[ -n "$dump" && -n "${STANDIN_DUMP-}" ]]; then mkdir -p "$dump" && cp -r "$STANDIN_DUMP"/. "$dump"/; fi
[[ -n "${STANDIN_REPORT-}" ]] && cp "$STANDIN_REPORT" "$out.nsys-rep"
exit $rc
