"""Host-bound: a loop of tiny jitted calls, each followed by a device-to-host read.

Each step runs CALLS (default 200) calls of `jit_tiny` on 4096 f32 elements and reads one
element back (`float(x[0])`) after each: the GPU works a few microseconds per call and waits
for Python the rest. Ground truth: GPU idle between modules is nearly all of the step; the
module is `jit_tiny`, the sync is on the line of `float(x[0])`.
"""
import os

import jax
import jax.numpy as jnp

from common import describe, profiled

CALLS = int(os.environ.get("CALLS", "200"))
describe("host_bound", f"{CALLS} executions of jit_tiny per step, each followed by a D2H read")


@jax.jit
def tiny(x):
    return x * 1.0001 + 0.5


x = jnp.ones(4096, jnp.float32)


def step(i):
    global x
    for _ in range(CALLS):
        x = tiny(x)
        _ = float(x[0])  # the host sync


profiled(step)
