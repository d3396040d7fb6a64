"""The healthy side of rejit.py, written as the fix is usually made: the batch is built the
same way (`jnp.ones`, op by op, as rejit.py does) but at one fixed shape [N_MAX, 256], and
`jit_grow` masks the rows beyond this step's n inside the program (n is an argument), so
nothing is compiled after the warm-up. Against rejit.py only the compilations go; the host
runs the same Python per step, plus one scalar argument.

The masked rows are zeros: tanh(x @ x.T).sum() over them equals rejit.py's sum on [n, 256].
Captured with XLA_FLAGS=--xla_gpu_autotune_level=0 like rejit.py.

Ground truth: jit_grow and the array's maker (broadcast_in_dim) compiled once each, before the
profiled range; none inside it.
"""
import jax
import jax.numpy as jnp

from common import STEPS, WARMUP, describe, profiled

N_MAX = 512 + 8 * (STEPS + WARMUP)
compiles = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, secs, **kw: compiles.append(secs) if "backend_compile" in event else None)
describe("rejit_padded", f"{STEPS + WARMUP} batch sizes as [{N_MAX}, 256] ones, rows masked in "
         "jit_grow: compiled once")


@jax.jit
def grow(x, n):
    x = jnp.where(jnp.arange(N_MAX)[:, None] < n, x, 0.0)
    return jnp.tanh(x @ x.T).sum()


at_range_start = []


def step(i):
    if i == 0:
        at_range_start.append(len(compiles))
    n = 512 + 8 * (i + WARMUP + 1)  # the rows rejit.py uses at this call
    grow(jnp.ones((N_MAX, 256), jnp.float32), n).block_until_ready()


profiled(step)
print(f"ground truth: backend compilations in the whole program {len(compiles)} "
      f"({sum(compiles):.3f} s), inside the profiled steps {len(compiles) - at_range_start[0]}",
      flush=True)
