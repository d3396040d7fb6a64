#!/usr/bin/env bash
# A stand-in for nsys, for testing `nsys-jax-pipe run` without a GPU: `nsys profile` runs the
# program like nsys would, then leaves a recorded capture where the real one would have
# written its report and XLA its dump; every other nsys command goes to the real nsys.
#   REAL_NSYS      the real nsys (for --version and export)
#   STANDIN_REPORT the report to leave at --output (unset: none, as when nsys fails)
#   STANDIN_DUMP   the XLA dump folder to copy to XLA_FLAGS' --xla_dump_to
#   STANDIN_LOG    where to append what it was asked to do (options, environment, program)
#   STANDIN_IMPORT_ERRORS  when set, print what Nsight Systems 2023.4 prints after importing
#                  a capture it could not fully read
# The options come first and `--output=` last, as `nsys-jax-pipe run` passes them.
#
# Capture ranges: the program stands for cudaProfilerStop by creating the file named by
# $STANDIN_PROFILER_STOP. Then, like nsys, a capture range that ends by stop-shutdown or
# repeat-shutdown (given, or nsys's default when --capture-range is set without
# --capture-range-end) ends the program's process group with the --kill signal (default
# SIGTERM; none: no signal), after STANDIN_KILL_DELAY seconds (default 0.3: nsys first
# closes the capture, so a program that exits at once exits first).
set -u
if [[ "${1:-}" != profile ]]; then exec "$REAL_NSYS" "$@"; fi
shift
log=${STANDIN_LOG:-/dev/null}
out=
range= end= kill=sigterm
while [[ $# -gt 0 ]]; do
  case "$1" in
    --output=*) out=${1#--output=}; shift; break ;;
  esac
  echo "nsys-option $1" >> "$log"
  case "$1" in
    --capture-range=*) range=${1#*=} ;;
    --capture-range | -c) range=${2:-} ;;
    --capture-range-end=*) end=${1#*=} ;;
    --capture-range-end) end=${2:-} ;;
    --kill=*) kill=${1#*=} ;;
    --kill) kill=${2:-} ;;
  esac
  shift
done
[[ -n "$range" && "$range" != none && -z "$end" ]] && end=stop-shutdown
signal=
if [[ "$end" == stop-shutdown* || "$end" == repeat-shutdown* ]]; then
  case "${kill,,}" in
    none) ;;
    sig*) signal=${kill:3} ;;
    *) signal=$kill ;;
  esac
fi
echo "XLA_FLAGS=${XLA_FLAGS-}" >> "$log"
echo "JAX_TRACEBACK_IN_LOCATIONS_LIMIT=${JAX_TRACEBACK_IN_LOCATIONS_LIMIT-}" >> "$log"
echo "JAX_ENABLE_COMPILATION_CACHE=${JAX_ENABLE_COMPILATION_CACHE-}" >> "$log"
echo "program $*" >> "$log"
# Like nsys, stop the program when stopped. The trap is set before the program starts, so
# that a signal arriving at any moment stops it; the program runs in the background so that
# the trap runs at once. Job control gives it a process group of its own (as nsys does), in
# which SIGINT is not ignored.
set -m
pid=
stopped=
trapped=
stop() {
  stopped=1 trapped=1
  [[ -n "$pid" ]] && kill -TERM "$pid" 2>/dev/null
}
trap stop TERM INT HUP
stop_file=$(mktemp -u "${TMPDIR:-/tmp}/standin-profiler-stop.XXXXXX")
STANDIN_PROFILER_STOP=$stop_file "$@" &
pid=$!
[[ -n "$stopped" ]] && kill -TERM "$pid" 2>/dev/null
# cudaProfilerStop, as nsys sees it: the program creates $STANDIN_PROFILER_STOP.
{
  while [[ ! -e "$stop_file" ]]; do
    kill -0 "$pid" 2>/dev/null || exit 0
    sleep 0.05
  done
  echo "capture range ended (end ${end:-none}, kill ${signal:-none})" >> "$log"
  [[ -z "$signal" ]] && exit 0
  sleep "${STANDIN_KILL_DELAY:-0.3}"
  kill -s "$signal" -- "-$pid" 2>/dev/null && echo "sent SIG${signal^^}" >> "$log"
} &
watcher=$!
# `wait` returns early when a trapped signal arrives: then wait again for the program itself
# (bash keeps the status of a program that ended meanwhile for the next `wait`).
rc=
while :; do
  trapped=
  wait "$pid"
  r=$?
  [[ $r == 127 && -n "$rc" ]] && break # already waited for (a trap ran just before `wait`)
  rc=$r
  [[ -z "$trapped" ]] && break
done
# The watcher ends by itself soon after the program (it polls for it, or has just signalled
# it); waiting for it rather than killing it keeps its log line when it did signal.
wait "$watcher" 2>/dev/null
rm -f "$stop_file"
trap - TERM INT HUP
[[ -n "$stopped" ]] && exit 143
dump=$(sed -n 's/.*--xla_dump_to=\([^ ]*\).*/\1/p' <<< "${XLA_FLAGS-}")
if [[ -n "$dump" && -n "${STANDIN_DUMP-}" ]]; then mkdir -p "$dump" && cp -r "$STANDIN_DUMP"/. "$dump"/; fi
if [[ -n "${STANDIN_IMPORT_ERRORS-}" ]]; then
  # As Nsight Systems 2023.4 printed it on CUDA 13 (the exception's location shortened).
  cat <<'MESSAGE'
Importer error status: Importation succeeded with non-fatal errors.
**** Analysis failed with:
Status: TargetProfilingFailed
Props {
  Items {
    Type: DeviceId
    Value: "Local (CLI)"
  }
}
Error {
  Type: RuntimeError
  SubError {
    Type: ProcessEventsError
    Props {
      Items {
        Type: ErrorText
        Value: "TraceProcessEvent.cpp(45): Throw in function GetAPICallbackName\nstd::exception::what: InvalidArgumentException\n[QuadDCommon::tag_message*] = Unknown driver API function index: 780\n"
      }
    }
  }
}


**** Errors occurred while processing the raw events. ****
**** Please see the Diagnostics Summary page after opening the report file in GUI. ****
MESSAGE
fi >&2
[[ -n "${STANDIN_REPORT-}" ]] && cp "$STANDIN_REPORT" "$out.nsys-rep"
exit $rc
