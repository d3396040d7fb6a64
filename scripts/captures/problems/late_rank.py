"""A late rank: two processes (one GPU each) run the same data-parallel step; rank 1 sleeps
SLEEP_MS (default 20) before each step, so rank 0 waits for it in the step's all-reduce.

Run as two processes: RANK=0 and RANK=1, COORDINATOR=host:port (default 127.0.0.1:12355),
each with its own GPU (CUDA_VISIBLE_DEVICES). The step: a 4096^3 bf16 GEMM per device, then
a psum of its 32 MiB result over the two processes. Ground truth: rank 1 arrives last at
every all-reduce; rank 0's wait per step is about SLEEP_MS.
"""
import os
import time

import jax

RANK = int(os.environ["RANK"])
jax.distributed.initialize(os.environ.get("COORDINATOR", "127.0.0.1:12355"), 2, RANK)

import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

from common import describe, profiled  # noqa: E402

SLEEP_MS = float(os.environ.get("SLEEP_MS", "20"))
N = 4096
describe("late_rank", f"rank 1 sleeps {SLEEP_MS} ms before each step; this is rank {RANK}")
mesh = Mesh(jax.devices(), ("d",))
spec = NamedSharding(mesh, P("d"))


@jax.jit
def train_step(x, w):
    y = jnp.tanh(x @ w)  # per-device rows
    return y, jax.lax.with_sharding_constraint(jnp.sum(y, axis=0), NamedSharding(mesh, P()))


x = jax.make_array_from_callback((2 * N, N), spec, lambda idx: jnp.ones((N, N), jnp.bfloat16))
w = jax.device_put(jnp.full((N, N), 1e-3, jnp.bfloat16), NamedSharding(mesh, P()))


def step(i):
    if RANK == 1 and i >= 0:
        time.sleep(SLEEP_MS / 1e3)
    y, s = train_step(x, w)
    s.block_until_ready()


profiled(step)
