"""Input-bound training loop: the host prepares each batch (numpy, no GPU work) in an NVTX range
`load_batch` taking about LOAD_MS (default 95) ms, then a `train_step` range copies the batch
to the GPU and runs a jitted MLP training step of about 2 ms of GPU work; the GPU idles while
the next batch is prepared.

READY=1 (the pair's healthy side, `input_ready`): the same batches, all prepared before the
profiled range; the step loop only copies each batch to the GPU and trains (`train_step`).

The step: a bf16 MLP D_IN -> HIDDEN -> HIDDEN -> D_IN (f32 master weights), mean squared
error against the batch itself, SGD; the batch f32 [BATCH, D_IN] (8 MiB) is copied host to
device inside `train_step` (jax.device_put) and the step blocks on the loss. The batch work:
a random array plus numpy passes over blocks of rows (sort of each row, a cumulative sum,
normalisation), their number calibrated at start so that it lasts LOAD_MS.

Ranges with the `nvtx` package (`nsys-jax-pipe run` makes its domains real); where the package
is missing, no user ranges (the log says so). Ground truth printed: per step, the host time of
load_batch and of train_step, and the median step; the GPU time of one train step measured
alone before the range.

Environment: STEPS, WARMUP, READY (0), LOAD_MS (95), BATCH (2048), D_IN (1024), HIDDEN (8192).
"""
import contextlib
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from common import STEPS, WARMUP, describe, median, profiled

try:
    import nvtx

    annotate = nvtx.annotate
    import importlib.metadata

    NVTX = f"nvtx {importlib.metadata.version('nvtx')}"
except ImportError:  # no user ranges then
    annotate = lambda name: contextlib.nullcontext()  # noqa: E731
    NVTX = "no nvtx package: no user NVTX ranges"

READY = os.environ.get("READY", "0") == "1"
LOAD_MS = float(os.environ.get("LOAD_MS", "95"))
BATCH = int(os.environ.get("BATCH", "2048"))
D_IN = int(os.environ.get("D_IN", "1024"))
HIDDEN = int(os.environ.get("HIDDEN", "8192"))
name = "input_ready" if READY else "input_bound"
mm = 2 * BATCH * (D_IN * HIDDEN + HIDDEN * HIDDEN + HIDDEN * D_IN)
nparams = D_IN * HIDDEN + HIDDEN * HIDDEN + HIDDEN * D_IN
describe(name, ("all batches prepared before the profiled range; each step: train_step "
                "(H2D copy + MLP step)") if READY else
         f"each step: load_batch (host numpy, ~{LOAD_MS:.0f} ms, no GPU work), then train_step "
         "(H2D copy + MLP step)")
print(f"{NVTX}; batch f32 [{BATCH}, {D_IN}] = {BATCH * D_IN * 4 / 2**20:.1f} MiB copied host to "
      f"device per step; MLP {D_IN}->{HIDDEN}->{HIDDEN}->{D_IN} bf16, {nparams} parameters; "
      f"matmul FLOP per step (fwd + bwd) {3 * mm:.6e}", flush=True)

rng = np.random.default_rng(0)


def augment(b):
    b = np.sort(b, axis=1)
    b = np.cumsum(b, axis=1, dtype=np.float32)
    return ((b - b.mean(axis=1, keepdims=True)) / (b.std(axis=1, keepdims=True) + 1e-6)
            ).astype(np.float32)


CHUNK = max(1, BATCH // 16)  # rows per unit of work


def make_batch(units):
    """A random batch, then `units` passes of augment over CHUNK rows each, round robin."""
    b = rng.standard_normal((BATCH, D_IN), dtype=np.float32)
    for k in range(units):
        r = (k * CHUNK) % BATCH
        b[r:r + CHUNK] = augment(b[r:r + CHUNK])
    return b


# Calibrate: the number of units of work so that make_batch takes about LOAD_MS.
def timed(units, reps=3):
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        make_batch(units)
        best = min(best, time.perf_counter() - t)
    return best


timed(16, 1)
UNITS = max(1, round(LOAD_MS / 1e3 / (timed(32) / 32)))
UNITS = max(1, round(UNITS * LOAD_MS / 1e3 / timed(UNITS)))
print(f"load_batch: a random draw, then {UNITS} passes of augment (sort, cumsum, normalise) over "
      f"{CHUNK} rows each: {timed(UNITS) * 1e3:.2f} ms when calibrated", flush=True)


def init(key):
    ks = jax.random.split(key, 3)
    return [jax.random.normal(k, s, jnp.float32) * s[0] ** -0.5
            for k, s in zip(ks, [(D_IN, HIDDEN), (HIDDEN, HIDDEN), (HIDDEN, D_IN)])]


def loss_fn(ws, x):
    h = x.astype(jnp.bfloat16)
    for i, w in enumerate(ws):
        h = h @ w.astype(jnp.bfloat16)
        if i < len(ws) - 1:
            h = jax.nn.relu(h)
    return jnp.mean(jnp.square(h.astype(jnp.float32) - x))


@jax.jit
def train_step(ws, x):
    loss, g = jax.value_and_grad(loss_fn)(ws, x)
    return [w - 1e-3 * gw for w, gw in zip(ws, g)], loss


ws = init(jax.random.PRNGKey(0))
x0 = jax.device_put(make_batch(0))
for _ in range(3):
    ws, loss = jax.block_until_ready(train_step(ws, x0))
gpu = []
for _ in range(10):
    t = time.perf_counter()
    ws, loss = jax.block_until_ready(train_step(ws, x0))
    gpu.append(time.perf_counter() - t)
print(f"train step alone (batch already on the GPU): median {median(gpu) * 1e3:.3f} ms",
      flush=True)

ready = [make_batch(UNITS) for _ in range(STEPS + WARMUP)] if READY else None
load_ms, train_ms = [], []


def step(i):
    global ws, loss
    if READY:
        batch = ready[i + WARMUP]  # i runs -1..-WARMUP for the warm-up
    else:
        t = time.perf_counter()
        with annotate("load_batch"):
            batch = make_batch(UNITS)
        if i >= 0:
            load_ms.append((time.perf_counter() - t) * 1e3)
    t = time.perf_counter()
    with annotate("train_step"):
        ws, loss = train_step(ws, jax.device_put(batch))
        loss.block_until_ready()
    if i >= 0:
        train_ms.append((time.perf_counter() - t) * 1e3)


med = profiled(step)
for i in range(STEPS):
    print(f"step {i}: " + (f"load_batch {load_ms[i]:.3f} ms, " if load_ms else "")
          + f"train_step {train_ms[i]:.3f} ms", flush=True)
if load_ms:
    print(f"ground truth: load_batch median {median(load_ms):.3f} ms per step, train_step "
          f"median {median(train_ms):.3f} ms per step, step median {med * 1e3:.3f} ms "
          f"(load_batch {median(load_ms) / (med * 1e3) * 100:.1f} % of the step)", flush=True)
else:
    print(f"ground truth: train_step median {median(train_ms):.3f} ms per step, step median "
          f"{med * 1e3:.3f} ms", flush=True)
print(f"final loss {float(loss):.6f}", flush=True)
