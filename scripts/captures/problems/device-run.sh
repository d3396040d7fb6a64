#!/usr/bin/env bash
# device-run.sh stash|unpack|start|collect [SECONDS]
#
# Drives capture2.sh on a 2-GPU machine without network access, from the repository root,
# in steps that each fit in one command (the pieces may arrive in separate commands):
#   stash    keeps the pieces of the bundle present now (.nsysbundle/*.tar.xz.part*, made with
#            `split -b 8M -d X.tar.xz X.tar.xz.part`) under /opt/nsys-parts, for a tree too large
#            to carry a whole tarball beside it: carry a few pieces per command, then unpack.
#   unpack   unpacks what is present of .nsysbundle/nsys-target.tar.xz (Nsight Systems 2023.4
#            CLI -> /opt/nsys/target-linux-x64), .nsysbundle/nsys-importer.tar.xz (its
#            importer -> /opt/nsys/host-linux-x64) and .devbin/nsys-jax-pipe.xz (a release
#            build of nsys-jax-pipe -> /opt/njp); skips what is already there.
#   start    checks the three, installs the wheels of .whl/ (the `nvtx` package) into
#            /tmp/site when `import nvtx` fails, records the machine's software (RUN/env.txt)
#            and starts capture2.sh in the background (setsid: it outlives the shell that
#            started it) with its results under RUN=/tmp/problems-run/out; RUN/DONE at the end.
#   collect  waits until RUN/DONE or SECONDS (default 500) have passed, then packs the files of
#            the captures finished since the last collect (RUN/out/finished.txt), and the
#            driver's logs, into $OUT/partN.tar.xz.NN (15 MB pieces).
# NAMES (optional) is passed to capture2.sh as its list of captures.
set -u
RUN=/tmp/problems-run
HERE=$(cd "$(dirname "$0")" && pwd)
NSYS=/opt/nsys/target-linux-x64/nsys
# A tarball: the bundle's own, else joined from the stashed pieces.
tarball() {
	if [[ -f .nsysbundle/$1 ]]; then
		echo ".nsysbundle/$1"
	elif ls /opt/nsys-parts/"$1".part* >/dev/null 2>&1; then
		cat /opt/nsys-parts/"$1".part* >"/tmp/$1" && echo "/tmp/$1"
	fi
}
case ${1:-} in
stash)
	mkdir -p /opt/nsys-parts
	cp .nsysbundle/*.tar.xz.part* /opt/nsys-parts/ 2>/dev/null
	ls -la /opt/nsys-parts
	;;
unpack)
	mkdir -p /opt/nsys/host-linux-x64
	target=$(tarball nsys-target.tar.xz)
	importer=$(tarball nsys-importer.tar.xz)
	[[ -n $target && ! -x $NSYS ]] && tar -xJf "$target" -C /opt/nsys
	[[ -n $importer && ! -x /opt/nsys/host-linux-x64/QdstrmImporter ]] &&
		tar -xJf "$importer" -C /opt/nsys/host-linux-x64
	[[ -f .devbin/nsys-jax-pipe.xz && ! -x /opt/njp ]] &&
		xz -dc .devbin/nsys-jax-pipe.xz >/opt/njp && chmod +x /opt/njp
	ls -la "$NSYS" /opt/nsys/host-linux-x64/QdstrmImporter /opt/njp 2>&1
	;;
start)
	for f in "$NSYS" /opt/nsys/host-linux-x64/QdstrmImporter /opt/njp; do
		[[ -x $f ]] || { echo "missing $f: unpack first"; exit 1; }
	done
	mkdir -p "$RUN/out"
	if ! python3 -c 'import nvtx' 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
		python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
			--target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
	fi
	{
		date -u
		"$NSYS" --version
		/opt/njp --version
		nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv
		python3 --version
		python3 -m pip list 2>/dev/null | grep -iE '^(jax|jaxlib|jax-cuda|flax|optax|numpy|nvtx|nvidia-(cudnn|cublas|nccl|cuda-runtime))'
		python3 -c 'import nvtx, importlib.metadata as m; print("nvtx", m.version("nvtx"), nvtx.__file__)'
		nproc
	} >"$RUN/env.txt" 2>&1
	# shellcheck disable=SC2086 # a list of names
	setsid nohup bash -c "bash '$HERE/capture2.sh' /opt/njp '$NSYS' '$RUN/out' ${NAMES:-}; touch '$RUN/DONE'" \
		</dev/null >"$RUN/driver.log" 2>&1 &
	echo "started; env:"
	cat "$RUN/env.txt"
	;;
collect)
	limit=${2:-500}
	t0=$SECONDS
	while [[ ! -e $RUN/DONE && $((SECONDS - t0)) -lt $limit ]]; do sleep 5; done
	[[ -e $RUN/DONE ]] && echo "all done" || echo "not done after $limit s"
	cat "$RUN/driver.log"
	cd "$RUN/out" || exit 1
	touch sent.txt finished.txt
	n=$(($(ls "$RUN"/part*.list 2>/dev/null | wc -l) + 1))
	# a file is sent again when its size or time changed (a capture made again)
	sort -u finished.txt | while read -r f; do
		[[ -e $f ]] && ! grep -qxF "$(stat -c '%n %s %Y' "$f")" sent.txt && echo "$f"
	done >"$RUN/part$n.list"
	cp "$RUN/env.txt" "$RUN/driver.log" . 2>/dev/null
	echo env.txt >>"$RUN/part$n.list"
	echo driver.log >>"$RUN/part$n.list"
	tar -cf - -T "$RUN/part$n.list" | xz -1 -T0 | split -b 15M -d - "$OUT/part$n.tar.xz."
	xargs -r stat -c '%n %s %Y' <"$RUN/part$n.list" >>sent.txt
	ls -la "$OUT"
	;;
*) echo "usage: device-run.sh stash|unpack|start|collect [SECONDS]" >&2; exit 2 ;;
esac
