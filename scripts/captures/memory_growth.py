"""Device memory that grows and shrinks inside the capture range: the workload of
tests/data/memory/.

Run under `nsys profile --cuda-memory-usage=true --capture-range=cudaProfilerApi` (or
`nsys-jax-pipe run --memory --capture-range=cudaProfilerApi ...`) with
  XLA_PYTHON_CLIENT_PREALLOCATE=false   XLA's allocator takes device memory as it needs it
                                        (growth steps inside the range), or
  XLA_PYTHON_CLIENT_ALLOCATOR=platform  every buffer is its own allocation, freed when dropped.
With XLA's defaults (a pool of 75 % of the device taken at start-up) the range sees only the
pool, as an allocation held from its start.

Inside the range it keeps GROW arrays of 2**i * 64 MiB (i = 0..GROW-1, f32) alive, runs a jitted
step on the largest, drops every array, then allocates one 64 MiB array. It prints each
allocation it asked for: the ground truth to compare with the report's memory-usage events.
"""
import ctypes
import os
import time

import jax
import jax.numpy as jnp

GROW = int(os.environ.get("GROW", "5"))
MIB = 1 << 20

dev = jax.devices()[0]
print(f"jax {jax.__version__}, device {dev.device_kind}, "
      f"XLA_PYTHON_CLIENT_PREALLOCATE={os.environ.get('XLA_PYTHON_CLIENT_PREALLOCATE', '(unset)')}, "
      f"XLA_PYTHON_CLIENT_ALLOCATOR={os.environ.get('XLA_PYTHON_CLIENT_ALLOCATOR', '(unset)')}",
      flush=True)


@jax.jit
def step(x):
    return jnp.tanh(x) * 2.0


def make(nbytes, seed):
    return jnp.full((nbytes // 4,), float(seed), jnp.float32)


# Compile and run everything once before the range.
jax.block_until_ready(step(make(64 * MIB, 0)))
for i in range(GROW):
    jax.block_until_ready(make((1 << i) * 64 * MIB, i))

try:
    cuda = ctypes.CDLL("libcuda.so.1")
except OSError:
    cuda = None
if cuda:
    cuda.cuProfilerStart()
t0 = time.perf_counter()
kept = []
for i in range(GROW):
    nbytes = (1 << i) * 64 * MIB
    kept.append(jax.block_until_ready(make(nbytes, i + 1)))
    print(f"asked: array {i} of {nbytes} B (held {sum(a.nbytes for a in kept)} B)", flush=True)
    time.sleep(0.02)
y = jax.block_until_ready(step(kept[-1]))
print(f"asked: step output of {y.nbytes} B", flush=True)
time.sleep(0.02)
del kept, y
time.sleep(0.02)
z = jax.block_until_ready(make(64 * MIB, 99))
print(f"asked: after dropping everything, array of {z.nbytes} B", flush=True)
time.sleep(0.02)
dt = time.perf_counter() - t0
if cuda:
    cuda.cuProfilerStop()
print(f"range {dt * 1e3:.1f} ms; device memory stats: {dev.memory_stats()}", flush=True)
