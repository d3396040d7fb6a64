"""Shared by the problem programs: the profiler range and the log of what ran."""
import ctypes
import os
import time

import jax

STEPS = int(os.environ.get("STEPS", "10"))
WARMUP = int(os.environ.get("WARMUP", "3"))
_cuda = ctypes.CDLL("libcuda.so.1")


def describe(name, truth):
    dev = jax.devices()[0]
    print(f"{name}: jax {jax.__version__}, {len(jax.devices())} device(s) {dev.device_kind}, "
          f"process {jax.process_index()} of {jax.process_count()}", flush=True)
    print(f"ground truth: {truth}", flush=True)


def profiled(step, steps=STEPS, warmup=WARMUP):
    """Run `step(i)` warmup times, then `steps` times inside a cudaProfilerApi range; print
    the wall time of each step."""
    for i in range(warmup):
        step(-1 - i)
    _cuda.cuProfilerStart()
    times = []
    for i in range(steps):
        t = time.perf_counter()
        step(i)
        times.append(time.perf_counter() - t)
    _cuda.cuProfilerStop()
    for i, s in enumerate(times):
        print(f"step {i}: {s * 1e3:.3f} ms wall", flush=True)
    print(f"median step {sorted(times)[len(times) // 2] * 1e3:.3f} ms", flush=True)
