"""The workload of the example profile shipped with nsys-jax-pipe.

A two-layer MLP trained with its parameters and batch sharded over every visible GPU
(fully sharded data parallel), so the profile has XLA modules, thunks and, with two or more
GPUs, all-gather / reduce-scatter collectives. Steps from PROFILE_FROM on run inside a
cudaProfilerApi capture range, after compilation and autotuning.

Environment: STEPS (default 8), PROFILE_FROM (default 3; -1 = no capture range).
"""
import ctypes
import os

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec

STEPS = int(os.environ.get("STEPS", "8"))
PROFILE_FROM = int(os.environ.get("PROFILE_FROM", "3"))
WIDTH, HIDDEN = 1024, int(os.environ.get("HIDDEN", "4096"))

devices = jax.devices()
mesh = Mesh(devices, ("data",))
batch = 128 * len(devices)
sharded_rows = NamedSharding(mesh, PartitionSpec("data", None))


def init_params(key):
    k_in, k_out = jax.random.split(key)
    scale = WIDTH ** -0.5
    return {
        "w_in": jax.random.normal(k_in, (WIDTH, HIDDEN), jnp.float32) * scale,
        "w_out": jax.random.normal(k_out, (HIDDEN, WIDTH), jnp.float32) * scale,
    }


def predict(params, x):
    with jax.named_scope("hidden"):
        h = jax.nn.relu(x @ params["w_in"])
    with jax.named_scope("output"):
        return h @ params["w_out"]


def loss(params, x, target):
    return jnp.mean(jnp.square(predict(params, x) - target))


@jax.jit
def train_step(params, x, target):
    value, grads = jax.value_and_grad(loss)(params, x, target)
    params = jax.tree.map(lambda p, g: p - 0.01 * g, params, grads)
    return params, value


params = jax.jit(init_params, out_shardings=sharded_rows)(jax.random.PRNGKey(1))
x = jax.device_put(jnp.full((batch, WIDTH), 0.5, jnp.float32), sharded_rows)
target = jax.device_put(jnp.zeros((batch, WIDTH), jnp.float32), sharded_rows)
cuda = ctypes.CDLL("libcuda.so.1")
for step in range(STEPS):
    if step == PROFILE_FROM:
        cuda.cuProfilerStart()
    params, value = train_step(params, x, target)
    print(f"step {step}: loss {float(value):.6f}", flush=True)
if PROFILE_FROM >= 0:
    cuda.cuProfilerStop()
