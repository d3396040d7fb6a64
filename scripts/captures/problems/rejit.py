"""Recompilation: a jitted function called with a new shape every step (a growing batch), so
JAX compiles `jit_grow` again each time, inside the profiled range.

Ground truth: STEPS + WARMUP compilations of `jit_grow`, each a distinct program (another
fingerprint); compile time most of each step. Captured with XLA_FLAGS=--xla_gpu_autotune_level=0
(capture.sh): the autotuner's CUDA 13 driver calls are beyond what Nsight Systems 2023.4 can
import.
"""
import jax
import jax.numpy as jnp

from common import describe, profiled, STEPS, WARMUP

describe("rejit", f"{STEPS + WARMUP} shapes of jit_grow, one compilation each")


@jax.jit
def grow(x):
    return jnp.tanh(x @ x.T).sum()


def step(i):
    n = 512 + 8 * (i + WARMUP + 1)  # a new shape every call, warm-up included
    grow(jnp.ones((n, 256), jnp.float32)).block_until_ready()


profiled(step)
