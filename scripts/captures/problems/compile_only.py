"""Compilation profile: one function (`jit_train_grad`, the loss and gradients of a 3-layer
MLP) called with SHAPES (default 40) different batch sizes, so JAX compiles it SHAPES times;
each call runs once. Captured as users profile compilation: `--trace=nvtx` and no capture
range (the whole program; the program calls no cuProfilerStart).

Inputs are numpy arrays (copied at each call), so nothing else is compiled: the only backend
compilations are those of `jit_train_grad`, counted with a jax.monitoring listener.

Ground truth printed: per shape, the batch and the wall time of the first call (trace,
lowering, compilation, one run); the number of backend compilations and their summed
duration; the program's wall time from the first call to the last.

Environment: SHAPES (40), D (512).
"""
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

SHAPES = int(os.environ.get("SHAPES", "40"))
D = int(os.environ.get("D", "512"))
events = {}


def listener(event, secs, **kw):
    n, s = events.get(event, (0, 0.0))
    events[event] = (n + 1, s + secs)


jax.monitoring.register_event_duration_secs_listener(listener)
dev = jax.devices()[0]
print(f"compile_only: jax {jax.__version__}, {len(jax.devices())} device(s) {dev.device_kind}",
      flush=True)
print(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')}", flush=True)
print(f"ground truth: jit_train_grad (3-layer MLP, D={D}, loss and gradients) compiled for "
      f"{SHAPES} batch sizes, one call each", flush=True)


def loss(ws, x):
    h = x
    for w in ws:
        h = jnp.tanh(h @ w)
    return jnp.mean(h * h)


@jax.jit
def train_grad(ws, x):  # its XLA module: jit_train_grad
    return jax.value_and_grad(loss)(ws, x)


rng = np.random.default_rng(0)
ws = [rng.standard_normal((D, D), dtype=np.float32) * D ** -0.5 for _ in range(3)]
t0 = time.perf_counter()
for k in range(SHAPES):
    b = 128 + 32 * k
    x = rng.standard_normal((b, D), dtype=np.float32)
    t = time.perf_counter()
    val, _ = train_grad(ws, x)
    val = float(val)
    print(f"shape {k}: batch {b}: first call {(time.perf_counter() - t) * 1e3:.1f} ms "
          f"(loss {val:.5f})", flush=True)
wall = time.perf_counter() - t0
for event, (n, s) in sorted(events.items()):
    print(f"jax.monitoring {event}: {n} events, {s:.3f} s", flush=True)
n, s = events.get("/jax/core/compile/backend_compile_duration", (0, 0.0))
print(f"ground truth: {n} backend compilations ({s:.3f} s summed) for {SHAPES} shapes; "
      f"wall time of the {SHAPES} first calls {wall:.3f} s", flush=True)
if hasattr(train_grad, "_cache_size"):
    print(f"cache of jit_train_grad: {train_grad._cache_size()} entries", flush=True)
