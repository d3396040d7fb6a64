"""A late rank with many collectives: two processes (one GPU each) run the same step of LAYERS
(default 6) dependent all-reduces; rank 1 sleeps SLEEP_MS (default 15) before each step, so
rank 0 waits for it in the step's first all-reduce and the rest run in step.

The step (shard_map over the 2 devices, the contraction dimension split, as
exposed_allreduce.py): LAYERS layers of h = tanh(psum(h @ w_i)), h bf16 [B, D] with
B = D = N (4096), so each layer's all-reduce is N*N*2 B (32 MiB) that the next layer needs.
SLEEP_MS=0 is the pair's healthy side (`late_none`).

Run as two processes: RANK=0 and RANK=1, COORDINATOR=host:port (default 127.0.0.1:12355),
each with its own GPU (CUDA_VISIBLE_DEVICES). Without RANK: one process over all its devices
(a dry run: JAX_PLATFORMS=cpu XLA_FLAGS=--xla_force_host_platform_device_count=2).

Ground truth printed: the sleep, the all-reduces per step (counted in the compiled HLO too),
each step's wall time on each rank.
"""
import os
import time

import jax

RANK = int(os.environ["RANK"]) if "RANK" in os.environ else None
if RANK is not None:
    jax.distributed.initialize(os.environ.get("COORDINATOR", "127.0.0.1:12355"), 2, RANK)

import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

from common import count_ops, describe, profiled  # noqa: E402

try:
    from jax import shard_map
except ImportError:  # older JAX
    from jax.experimental.shard_map import shard_map

SLEEP_MS = float(os.environ.get("SLEEP_MS", "15"))
LAYERS = int(os.environ.get("LAYERS", "6"))
B = D = int(os.environ.get("N", "4096"))
describe("late_many" if SLEEP_MS else "late_none",
         f"rank 1 sleeps {SLEEP_MS} ms before each step; {LAYERS} dependent all-reduces of "
         f"{B * D * 2 / 2**20:.0f} MiB per step, each after a {B}x{D // 2}x{D} bf16 GEMM per "
         f"device; this is rank {jax.process_index()}")
mesh = Mesh(jax.devices()[:2], ("d",))
h_spec, w_spec = NamedSharding(mesh, P(None, "d")), NamedSharding(mesh, P("d", None))


def layers(h, ws):
    for w in ws:
        h = jnp.tanh(jax.lax.psum(h @ w, "d"))
        h = jax.lax.dynamic_slice_in_dim(h, jax.lax.axis_index("d") * (D // 2), D // 2, 1)
    return h


step_fn = jax.jit(shard_map(layers, mesh=mesh, in_specs=(P(None, "d"), P("d", None)),
                            out_specs=P(None, "d")))


def filled(shape, spec, value):
    return jax.make_array_from_callback(
        shape, spec, lambda idx: jnp.full(tuple(
            (s.stop or n) - (s.start or 0) for s, n in zip(idx, shape)), value, jnp.bfloat16))


h = filled((B, D), h_spec, 0.5)
ws = [filled((D, D), w_spec, (i + 1) * 1e-4) for i in range(LAYERS)]
hlo = step_fn.lower(h, ws).compile().as_text()
print(f"compiled step: {count_ops(hlo, 'all-reduce-start')} all-reduce-start, "
      f"{count_ops(hlo, 'all-reduce')} all-reduce ops", flush=True)


def step(i):
    global h
    if jax.process_index() == 1 and i >= 0:
        time.sleep(SLEEP_MS / 1e3)
    h = step_fn(h, ws)
    h.block_until_ready()


profiled(step)
