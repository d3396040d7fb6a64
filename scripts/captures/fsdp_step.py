"""An FSDP-sharded MLP training step on the GPUs of one process: the workload of
tests/data/fsdp2-*.

A 4-layer MLP, each layer D x D (D = 8192) in bf16, `h = relu(h @ w_i)` (no relu after the
last), loss = mean((h - target)^2) (in f32), SGD update. One process drives every visible GPU
(2 for the captures) through a jax.sharding.Mesh with one axis, "fsdp": the parameters are
sharded on their first (input) dimension, the batch (B = 8192 rows) on its rows, both over
"fsdp"; `jax.jit` with in/out shardings, the parameters donated. In the forward pass each
weight is constrained to be replicated (jax.lax.with_sharding_constraint to P()), as FSDP
does, so XLA emits an all-gather per weight; the weight gradients, summed over the batch
shards, come back sharded, so XLA emits reduce-scatters (and an all-reduce for the loss).
It compiles and warms up first (WARMUP steps), then runs STEPS steps, each with
block_until_ready, inside a cudaProfilerApi range (cuProfilerStart/Stop through ctypes).

Ground truth (printed to the log by formula), per step over all devices (each device does
1/n of it): forward 4 GEMMs of 2*B*D*D; backward 4 weight-gradient GEMMs and 3 data-gradient
GEMMs (layer 1's input needs no gradient), each 2*B*D*D; the bytes each collective moves;
the device names; the wall time of each step. The kernels, instructions and times per device
(2 H100s, JAX 0.11.2): tests/data/fsdp2-{cmdbuf,nocmdbuf}/README.md.

Environment: STEPS (default 10), WARMUP (default 3), D (default 8192), B (default 8192),
LAYERS (default 4). Set NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 (capture-all.sh does).
scripts/captures/capture-all.sh runs it as fsdp2-cmdbuf (XLA's defaults) and fsdp2-nocmdbuf
(--xla_gpu_enable_command_buffer=).
"""
import ctypes
import os
import time

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

STEPS = int(os.environ.get("STEPS", "10"))
WARMUP = int(os.environ.get("WARMUP", "3"))
D = int(os.environ.get("D", "8192"))
B = int(os.environ.get("B", "8192"))
LAYERS = int(os.environ.get("LAYERS", "4"))
LR = 0.01

devices = jax.devices()
n = len(devices)
print(f"jax {jax.__version__}, devices {n}: "
      + ", ".join(f"{d.id}={d.device_kind} (cc {getattr(d, 'compute_capability', '?')})"
                  for d in devices), flush=True)
print(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')}", flush=True)
mesh = Mesh(devices, ("fsdp",))
rows = NamedSharding(mesh, P("fsdp", None))
replicated = NamedSharding(mesh, P())

g = 2 * B * D * D
flops = {}
for i in range(LAYERS):
    flops[f"layer {i + 1} forward h @ w{i + 1}"] = g
for i in reversed(range(LAYERS)):
    flops[f"layer {i + 1} backward weight gradient h^T @ dy"] = g
    if i > 0:
        flops[f"layer {i + 1} backward data gradient dy @ w^T"] = g
for k, v in flops.items():
    print(f"ground truth FLOP/step {k}: {v:.6e} ({v / n:.6e} per device)", flush=True)
total = sum(flops.values())
print(f"ground truth FLOP/step total: {total:.6e} ({total / n:.6e} per device; "
      f"{len(flops)} GEMMs of {B}x{D}x{D} globally, {B // n}x{D}x{D} per device)", flush=True)
wbytes = D * D * 2
print(f"ground truth collectives/step: {LAYERS} weight all-gathers (each {wbytes} B result, "
      f"{wbytes // n} B in per device), {LAYERS} gradient reduce-scatters (each {wbytes} B "
      f"in, {wbytes // n} B out per device), a scalar loss all-reduce; XLA may combine them",
      flush=True)


def loss_fn(ws, x, target):
    h = x
    for i, w in enumerate(ws):
        w = jax.lax.with_sharding_constraint(w, replicated)  # FSDP: all-gather the weight
        h = h @ w
        if i < len(ws) - 1:
            h = jax.nn.relu(h)
    return jnp.mean(jnp.square(h.astype(jnp.float32) - target.astype(jnp.float32)))


def step(ws, x, target):  # named step: its XLA module is jit_step
    loss, grads = jax.value_and_grad(loss_fn)(ws, x, target)
    ws = tuple((w - LR * gr).astype(w.dtype) for w, gr in zip(ws, grads))
    return ws, loss


step = jax.jit(step, in_shardings=((rows,) * LAYERS, rows, rows),
               out_shardings=((rows,) * LAYERS, replicated), donate_argnums=(0,))


def init(key):
    ks = jax.random.split(key, LAYERS + 2)
    ws = tuple((jax.random.normal(k, (D, D), jnp.float32) * D ** -0.5).astype(jnp.bfloat16)
               for k in ks[:LAYERS])
    x = jax.random.normal(ks[-2], (B, D), jnp.bfloat16)
    t = (jax.random.normal(ks[-1], (B, D), jnp.float32) * 0.1).astype(jnp.bfloat16)
    return ws, x, t


ws, x, target = jax.jit(init, out_shardings=((rows,) * LAYERS, rows, rows))(
    jax.random.PRNGKey(0))
jax.block_until_ready((ws, x, target))

t = time.perf_counter()
for i in range(WARMUP):  # the first call compiles (and autotunes)
    ws, loss = jax.block_until_ready(step(ws, x, target))
print(f"compiled and warmed up ({WARMUP} steps) in {time.perf_counter() - t:.2f} s; "
      f"loss {float(loss):.6f}", flush=True)

try:
    cuda = ctypes.CDLL("libcuda.so.1")
except OSError:  # no GPU here (a dry run on the CPU)
    cuda = None
if cuda:
    cuda.cuProfilerStart()
times = []
for i in range(STEPS):
    t = time.perf_counter()
    ws, loss = jax.block_until_ready(step(ws, x, target))
    times.append(time.perf_counter() - t)
if cuda:
    cuda.cuProfilerStop()
for i, s in enumerate(times):
    print(f"step {i}: {s * 1e3:.3f} ms wall, {total / s / 1e12:.1f} TFLOP/s (all devices)",
          flush=True)
best = min(times)
print(f"best step {best * 1e3:.3f} ms wall -> {total / best / 1e12:.1f} TFLOP/s all devices, "
      f"{total / n / best / 1e12:.1f} per device; loss {float(loss):.6f}", flush=True)
