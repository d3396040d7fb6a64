#!/usr/bin/env bash
# gpu-run.sh NSYS_JAX_PIPE NSYS OUTDIR
#
# `nsys-jax-pipe run` on a GPU machine with JAX, end to end: the example workload profiled
# into OUTDIR/rank0.zip, then the cases that need a real Nsight Systems: the program's exit
# code through nsys, a stop-shutdown capture, and SIGTERM while the program runs (no archive,
# nothing left in TMPDIR). For each archive run it also times a bare `nsys export` of the
# same report, to compare with what `run` spends after the program exits.
# Like capture-example.sh, the workload runs from a neutral folder in its own PID namespace
# with a minimal environment, so the reports hold nothing of the machine but the workload.
set -uo pipefail
[[ $# -eq 3 ]] || { echo "usage: gpu-run.sh NSYS_JAX_PIPE NSYS OUTDIR" >&2; exit 2; }
BIN=$(realpath "$1"); NSYS=$(realpath "$2"); mkdir -p "$3"; OUTDIR=$(realpath "$3")
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p /opt/nsys-jax-pipe-example
cp "$HERE/../examples/workload.py" /opt/nsys-jax-pipe-example/workload.py
cd /opt/nsys-jax-pipe-example || exit 1
export TMPDIR=/tmp/gpu-run-tmp; rm -rf "$TMPDIR"; mkdir -p "$TMPDIR"

clean() { # clean ENV... -- COMMAND...: a minimal environment in a new PID namespace
	env -i PATH="$PATH" HOME=/root LANG=C.UTF-8 LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" \
		TMPDIR="$TMPDIR" NSYS="$NSYS" NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 \
		TORCH_SYMM_MEM_DISABLE_MULTICAST=1 "$@"
}

TIME=()
[[ -x /usr/bin/time ]] && TIME=(/usr/bin/time -f 'wall %e s, peak RSS %M KiB (largest process)')

echo "== 1. profile, archive and analyse"
clean RANK=0 STEPS=12 PROFILE_FROM=4 unshare --pid --fork --mount-proc \
	"${TIME[@]}" "$BIN" run -o "$OUTDIR/rank%q{RANK}" --capture-range=cudaProfilerApi --capture-range-end=stop \
	-- python3 /opt/nsys-jax-pipe-example/workload.py
echo "rc=$?"

echo "== 2. bare nsys export of the same report (3 times each)"
mkdir -p "$TMPDIR/bare" && cd "$TMPDIR/bare" && python3 -c "
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1]); z.extract('rank0.nsys-rep', '.')" "$OUTDIR/rank0.zip"
for t in sqlite arrowdir; do
	for i in 1 2 3; do
		rm -rf "bare.$t"
		start=$EPOCHREALTIME
		"$NSYS" export --type "$t" --quiet true --output "bare.$t" rank0.nsys-rep >/dev/null 2>&1 \
			|| echo "nsys export --type $t failed"
		awk -v a="$start" -v b="$EPOCHREALTIME" -v t="$t" 'BEGIN { printf "nsys export --type %s: %.2f s\n", t, b - a }'
	done
done
"$BIN" run --help >/dev/null && echo "(help ok)"
cd /opt/nsys-jax-pipe-example || exit 1

echo "== 3. the program's exit code through nsys"
clean "$BIN" run -o "$TMPDIR/fail" --no-analysis -- python3 -c 'import sys; sys.exit(3)'
echo "rc=$? (want 3)"

echo "== 4. stop-shutdown capture"
clean STEPS=12 PROFILE_FROM=4 "$BIN" run -o "$TMPDIR/shutdown" -q \
	--capture-range=cudaProfilerApi --capture-range-end=stop-shutdown \
	-- python3 /opt/nsys-jax-pipe-example/workload.py
echo "rc=$? (want 0)"

echo "== 5. SIGTERM while the program runs"
# to nsys-jax-pipe alone (`kill PID`), then to its whole process group (`kill -- -PGID`, as
# a job scheduler may): either way nsys must get exactly one signal.
for target in process group; do
	rm -f "$TMPDIR/term.log"
	# setsid: its own process group, whose id is its pid (env execs nsys-jax-pipe in place).
	setsid env -i PATH="$PATH" HOME=/root LANG=C.UTF-8 TMPDIR="$TMPDIR" NSYS="$NSYS" \
		NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
		STEPS=100000 PROFILE_FROM=4 "$BIN" run -o "$TMPDIR/interrupted" \
		--capture-range=cudaProfilerApi --capture-range-end=stop \
		-- python3 /opt/nsys-jax-pipe-example/workload.py >"$TMPDIR/term.log" 2>&1 &
	pid=$!
	for _ in $(seq 1 120); do grep -q '^step 20:' "$TMPDIR/term.log" && break; sleep 1; done
	start=$EPOCHREALTIME
	if [[ $target == process ]]; then kill -TERM "$pid"; else kill -TERM -- "-$pid"; fi
	wait "$pid"
	rc=$?
	awk -v a="$start" -v b="$EPOCHREALTIME" -v rc="$rc" -v t="$target" \
		'BEGIN { printf "SIGTERM to the %s: rc=%d (want 143) after %.1f s\n", t, rc, b - a }'
	tail -2 "$TMPDIR/term.log"
	sleep 2
	pgrep -af workload.py | sed 's/^/still running: /'
	ls "$TMPDIR" | grep -v '^bare$\|^fail.zip$\|^shutdown.zip$\|^term.log$\|^nvidia$' | sed 's/^/left in TMPDIR: /'
	ls "$TMPDIR/interrupted.zip" 2>/dev/null && echo "archive written despite the interrupt"
done
ls -la "$OUTDIR"
