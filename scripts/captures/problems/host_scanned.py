"""The healthy side of host_bound.py: the same CALLS (default 30) tiny computations per step
(x * 1.0001 + 0.5 on 4096 f32 elements), all inside ONE jitted call (`jit_scanned`, a
lax.fori_loop of CALLS iterations), and one device-to-host read (`float(x[0])`) per step
instead of one per computation.

Ground truth: one execution of `jit_scanned` per step (with the read's small modules), one
4-byte device-to-host copy per step; the same arithmetic as host_bound with CALLS=30.
"""
import os

import jax
import jax.numpy as jnp

from common import describe, profiled

CALLS = int(os.environ.get("CALLS", "30"))
describe("host_scanned", f"{CALLS} iterations of x * 1.0001 + 0.5 in one jit_scanned call per "
         "step (lax.fori_loop), then one D2H read")


@jax.jit
def scanned(x):
    return jax.lax.fori_loop(0, CALLS, lambda _, x: x * 1.0001 + 0.5, x)


x = jnp.ones(4096, jnp.float32)


def step(i):
    global x
    x = scanned(x)
    _ = float(x[0])  # the one host sync of the step


profiled(step)
print(f"x[0] = {float(x[0]):.6f}", flush=True)
