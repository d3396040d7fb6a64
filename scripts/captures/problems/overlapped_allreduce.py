"""The healthy side of exposed_allreduce.py: the same GEMM FLOPs and all-reduce bytes on 2 GPUs
of one process, but each all-reduce has independent work to hide behind.

The batch is split into two independent chains a and b of B/2 rows each; each runs the
LAYERS (4) layers of exposed_allreduce.py, h = tanh(psum(h @ w_i)) under shard_map with the
contraction dimension split across the devices, bf16 [B/2, D] with B = D = 8192. Per step:
2 x LAYERS all-reduces of 64 MiB (the same 4 x 128 MiB in all) and 2 x LAYERS GEMMs of
B/2 x D/2 x D per device (the same FLOPs). Chain a's all-reduce of layer i can run while
chain b's GEMM of layer i runs, and b's while a's GEMM of layer i+1 runs.

Captured, like exposed_allreduce.py for the pair, with
XLA_FLAGS="--xla_gpu_enable_latency_hiding_scheduler=true
--xla_gpu_all_reduce_combine_threshold_bytes=0" (XLA's latency-hiding scheduler on; no
combining of the two chains' independent all-reduces into one).

Ground truth printed: the all-reduce-start ops in the compiled, scheduled step and how many
of them have a GEMM scheduled between their start and done; the step times.
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
describe("overlapped_allreduce", f"2 independent chains x {LAYERS} all-reduces of "
         f"{B // 2 * D * 2 / 2**20:.0f} MiB per step, each after a {B // 2}x{D // 2}x{D} bf16 "
         f"GEMM per device; the same FLOPs and all-reduce bytes as exposed_allreduce "
         f"({LAYERS} x {B * D * 2 / 2**20:.0f} MiB)")
mesh = Mesh(jax.devices()[:2], ("d",))


def layers(ha, hb, ws):
    me = jax.lax.axis_index("d") * (D // 2)
    for w in ws:
        ra = jax.lax.psum(ha @ w, "d")  # hidden behind b's GEMM
        rb = jax.lax.psum(hb @ w, "d")  # hidden behind a's next GEMM
        ha = jax.lax.dynamic_slice_in_dim(jnp.tanh(ra), me, D // 2, 1)
        hb = jax.lax.dynamic_slice_in_dim(jnp.tanh(rb), me, D // 2, 1)
    return ha, hb


step_fn = jax.jit(shard_map(layers, mesh=mesh,
                            in_specs=(P(None, "d"), P(None, "d"), P("d", None)),
                            out_specs=(P(None, "d"), P(None, "d"))))
keys = jax.random.split(jax.random.PRNGKey(0), LAYERS + 1)
h = jax.random.normal(keys[0], (B, D), jnp.bfloat16)
ws = [(jax.random.normal(k, (D, D), jnp.float32) * D ** -0.5).astype(jnp.bfloat16)
      for k in keys[1:]]
hs = jax.sharding.NamedSharding(mesh, P(None, "d"))
ha, hb = jax.device_put(h[:B // 2], hs), jax.device_put(h[B // 2:], hs)
ws = [jax.device_put(w, jax.sharding.NamedSharding(mesh, P("d", None))) for w in ws]
hlo = step_fn.lower(ha, hb, ws).compile().as_text()
starts, hidden = async_overlap(hlo)
print(f"ground truth: compiled step: {starts} all-reduce-start ops ({count_ops(hlo, 'all-reduce')}"
      f" synchronous all-reduce), {hidden} of them with a GEMM scheduled between start and done",
      flush=True)


def step(i):
    global ha, hb
    ha, hb = step_fn(ha, hb, ws)
    jax.block_until_ready((ha, hb))


profiled(step)
