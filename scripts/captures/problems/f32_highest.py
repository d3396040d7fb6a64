"""f32 matmuls at HIGHEST precision: three chained 4096^3 GEMMs with
`precision=jax.lax.Precision.HIGHEST` run on the FP32 units, where bf16 (or TF32 at the
default precision) would use tensor cores.

Ground truth: 3 x 2*4096^3 = 4.12e11 FLOP per step, all of it on FP32 units (a few per cent
of the bf16 peak).
"""
import jax
import jax.numpy as jnp

from common import describe, profiled

N = 4096
describe("f32_highest", f"3 GEMMs {N}^3 f32 HIGHEST, {3 * 2 * N**3:.3e} FLOP per step")


@jax.jit
def chain(x, ws):
    for w in ws:
        x = jnp.tanh(jnp.dot(x, w, precision=jax.lax.Precision.HIGHEST))
    return x


keys = jax.random.split(jax.random.PRNGKey(0), 4)
x = jax.random.normal(keys[0], (N, N), jnp.float32)
ws = [jax.random.normal(k, (N, N), jnp.float32) * N ** -0.5 for k in keys[1:]]


def step(i):
    global x
    x = chain(x, ws)
    x.block_until_ready()


profiled(step)
