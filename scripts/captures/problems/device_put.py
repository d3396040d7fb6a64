"""Host-to-device copies in the steady state: each step `device_put`s a 256 MiB host array
(numpy, pageable memory) and then runs a small computation on it.

Ground truth: one 256 MiB H2D copy per step (tens of ms at pageable-memory speed), the GPU
idle outside it except for a short reduction; `ops` without the copies calls it idle.
"""
import os

import jax
import jax.numpy as jnp
import numpy as np

from common import describe, profiled

MIB = int(os.environ.get("MIB", "256"))
describe("device_put", f"one {MIB} MiB host-to-device copy per step")
host = np.random.default_rng(0).standard_normal(MIB * 2**20 // 4, dtype=np.float32)


@jax.jit
def consume(x):
    return jnp.sum(x * 2.0)


def step(i):
    x = jax.device_put(host)
    consume(x).block_until_ready()


profiled(step)
