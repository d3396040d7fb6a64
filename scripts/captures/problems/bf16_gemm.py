"""The healthy side of f32_highest.py: the same three chained 4096^3 GEMMs with tanh, in bf16
at the default precision (tensor cores). Each step waits for the GPU (block_until_ready), as
a loop that reads its loss every step does.

SYNC=0 (`bf16_async`): the same steps without the wait; JAX queues them back to back and the
loop waits once, after the last one. The healthy side of the per-step wait.

Ground truth: 3 x 2*4096^3 = 4.12e11 FLOP per step, all of it bf16 GEMMs on the tensor cores.
"""
import os

import jax
import jax.numpy as jnp

from common import describe, profiled

N = 4096
SYNC = os.environ.get("SYNC", "1") == "1"
describe("bf16_gemm" if SYNC else "bf16_async",
         f"3 GEMMs {N}^3 bf16 (default precision), {3 * 2 * N**3:.3e} FLOP per step, "
         + ("each step waited for" if SYNC else "steps queued back to back, one wait at the end"))


@jax.jit
def chain(x, ws):
    for w in ws:
        x = jnp.tanh(jnp.dot(x, w))
    return x


keys = jax.random.split(jax.random.PRNGKey(0), 4)
x = jax.random.normal(keys[0], (N, N), jnp.float32).astype(jnp.bfloat16)
ws = [(jax.random.normal(k, (N, N), jnp.float32) * N ** -0.5).astype(jnp.bfloat16)
      for k in keys[1:]]


def step(i):
    global x
    x = chain(x, ws)
    if SYNC:
        x.block_until_ready()


profiled(step, finish=None if SYNC else lambda: x.block_until_ready())
