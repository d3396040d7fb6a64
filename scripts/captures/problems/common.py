"""Shared by the problem programs: the profiler range and the log of what ran."""
import ctypes
import os
import re
import time

import jax

STEPS = int(os.environ.get("STEPS", "10"))
WARMUP = int(os.environ.get("WARMUP", "3"))
try:
    _cuda = ctypes.CDLL("libcuda.so.1")
except OSError:  # no GPU here (a dry run on the CPU: JAX_PLATFORMS=cpu)
    _cuda = None


def describe(name, truth):
    dev = jax.devices()[0]
    print(f"{name}: jax {jax.__version__}, {len(jax.devices())} device(s) {dev.device_kind}, "
          f"process {jax.process_index()} of {jax.process_count()}", flush=True)
    print(f"ground truth: {truth}", flush=True)
    print(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')} STEPS={STEPS} WARMUP={WARMUP}",
          flush=True)


def profiled(step, steps=STEPS, warmup=WARMUP, finish=None):
    """Run `step(i)` warmup times, then `steps` times inside a cudaProfilerApi range; print
    the wall time of each step.

    finish: for steps that do not wait for the GPU (JAX queues them back to back), called
    after the last step inside the range to wait for them all; each step's time is then the
    host's time to queue it, and the step is the whole loop's time over `steps`, printed
    as the median step."""
    for i in range(warmup):
        step(-1 - i)
    if finish:
        finish()
    if _cuda:
        _cuda.cuProfilerStart()
    times = []
    t_loop = time.perf_counter()
    # STEP_RANGE=NAME: each profiled step inside an NVTX range NAME (the `nvtx` package), as
    # training loops mark their steps.
    mark = os.environ.get("STEP_RANGE")
    if mark:
        import nvtx
    for i in range(steps):
        t = time.perf_counter()
        if mark:
            with nvtx.annotate(mark):
                step(i)
        else:
            step(i)
        times.append(time.perf_counter() - t)
    if finish:
        finish()
    loop = time.perf_counter() - t_loop
    if _cuda:
        _cuda.cuProfilerStop()
    for i, s in enumerate(times):
        what = "to queue" if finish else "wall"
        print(f"step {i}: {s * 1e3:.3f} ms {what}", flush=True)
    if finish:
        med = loop / steps
        print(f"all {steps} steps queued back to back and waited for once: {loop * 1e3:.3f} ms",
              flush=True)
    else:
        med = sorted(times)[len(times) // 2]
    print(f"median step {med * 1e3:.3f} ms", flush=True)
    return med


def median(xs):
    return sorted(xs)[len(xs) // 2]


def async_overlap(hlo_text, start="all-reduce-start", done="all-reduce-done"):
    """In the scheduled, optimized HLO text of one module (`compiled.as_text()`): the number
    of `start` ops and how many of them have a GEMM (a cuBLAS custom call or a GEMM fusion)
    scheduled between the start and its done. Instructions print in schedule order."""
    inst = re.compile(r"^(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(\(.*?\)|\S+)\s+([\w\-]+)\((.*)$")
    open_ops, starts, overlapped = {}, 0, set()
    for line in hlo_text.splitlines():
        m = inst.match(line.strip())
        if not m:
            continue
        name, _, op, rest = m.groups()
        if op == start:
            starts += 1
            open_ops[name] = False
        elif op == done:
            arg = rest.split(")")[0].split()[-1].lstrip("%")
            if open_ops.pop(arg, False):
                overlapped.add(arg)
        elif (op == "custom-call" and ("__cublas" in rest or "gemm" in rest)) or (
                op == "fusion" and "kind=kCustom" in rest and "gemm" in rest):
            for k in open_ops:
                open_ops[k] = True
    return starts, len(overlapped)


def count_ops(hlo_text, opcode):
    """The instructions of `opcode` in an HLO text (`compiled.as_text()`)."""
    return len(re.findall(rf"\s{re.escape(opcode)}\(", hlo_text))
