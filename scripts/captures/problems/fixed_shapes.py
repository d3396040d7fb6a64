"""The healthy side of rejit.py: the same growing batch (n = 512 + 8 * (call number) rows of
256 ones, a new n every step), padded to one fixed shape [N_MAX, 256] (N_MAX the largest n) so
that `jit_grow` and the array's maker `jit_make` are compiled once, during the warm-up.

The padding rows are zeros: tanh(x @ x.T).sum() over the padded array equals the unpadded
one (tanh(0) = 0), so every step computes what rejit computes, on the larger shape.
Captured with XLA_FLAGS=--xla_gpu_autotune_level=0 like rejit.py.

Ground truth: one compilation each of jit_make and jit_grow, both before the profiled range;
none inside it.
"""
import jax
import jax.numpy as jnp

from common import STEPS, WARMUP, describe, profiled

N_MAX = 512 + 8 * (STEPS + WARMUP)
compiles = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, secs, **kw: compiles.append(secs) if "backend_compile" in event else None)
describe("fixed_shapes", f"{STEPS + WARMUP} batch sizes padded to [{N_MAX}, 256]: jit_grow "
         "and jit_make compiled once each")


@jax.jit
def make(n):
    return jnp.where(jnp.arange(N_MAX)[:, None] < n, 1.0, 0.0) * jnp.ones((N_MAX, 256), jnp.float32)


@jax.jit
def grow(x):
    return jnp.tanh(x @ x.T).sum()


sums = []
at_range_start = []


def step(i):
    if i == 0:
        at_range_start.append(len(compiles))
    n = 512 + 8 * (i + WARMUP + 1)  # the rows rejit.py would use at this call
    s = grow(make(n))
    s.block_until_ready()
    if i >= 0:
        sums.append((n, float(s)))


profiled(step)
for n, s in sums:
    print(f"n={n}: sum {s:.1f} (n^2 = {n * n})", flush=True)
print(f"ground truth: backend compilations in the whole program {len(compiles)} "
      f"({sum(compiles):.3f} s), inside the profiled steps {len(compiles) - at_range_start[0]}",
      flush=True)
