"""Exposed communication: on 2 GPUs of one process, each layer's all-reduce is needed by the
next matmul, so nothing can hide it.

`step` runs LAYERS layers of `h = tanh(psum(h @ w_i))` under shard_map over a 2-device mesh,
the contraction dimension split across devices (each device holds half of h's columns and
half of w's rows), bf16 [B=8192, D=8192]: each layer all-reduces 128 MiB that the next layer
reads at once. Ground truth: all-reduce time is exposed (hidden fraction near 0), a large
share of the step.
"""
import os

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec as P

from common import async_overlap, count_ops, describe, profiled

try:
    from jax import shard_map
except ImportError:  # older JAX
    from jax.experimental.shard_map import shard_map

LAYERS = int(os.environ.get("LAYERS", "4"))
B = D = int(os.environ.get("N", "8192"))
describe("exposed_allreduce", f"{LAYERS} dependent all-reduces of {B * D * 2 / 2**20:.0f} MiB "
         f"per step, each after a {B}x{D // 2}x{D} bf16 GEMM per device")
mesh = Mesh(jax.devices()[:2], ("d",))


def layers(h, ws):
    for w in ws:
        h = jnp.tanh(jax.lax.psum(h @ w, "d"))
        h = jax.lax.dynamic_slice_in_dim(h, jax.lax.axis_index("d") * (D // 2), D // 2, 1)
    return h


step_fn = jax.jit(shard_map(layers, mesh=mesh, in_specs=(P(None, "d"), P("d", None)),
                            out_specs=P(None, "d")))
keys = jax.random.split(jax.random.PRNGKey(0), LAYERS + 1)
h = jax.random.normal(keys[0], (B, D), jnp.bfloat16)
ws = [(jax.random.normal(k, (D, D), jnp.float32) * D ** -0.5).astype(jnp.bfloat16)
      for k in keys[1:]]
h = jax.device_put(h, jax.sharding.NamedSharding(mesh, P(None, "d")))
ws = [jax.device_put(w, jax.sharding.NamedSharding(mesh, P("d", None))) for w in ws]
hlo = step_fn.lower(h, ws).compile().as_text()
starts, hidden = async_overlap(hlo)
print(f"compiled step: {starts} all-reduce-start ops ({count_ops(hlo, 'all-reduce')} "
      f"synchronous all-reduce), {hidden} of them with a GEMM scheduled between start and done",
      flush=True)


def step(i):
    global h
    h = step_fn(h, ws)
    h.block_until_ready()


profiled(step)
