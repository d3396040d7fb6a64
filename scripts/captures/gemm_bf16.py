"""Four chained bf16 GEMMs: the capture workload of tests/data/gemm-bf16-{cmdbuf,nocmdbuf}.

One jitted step, `x = tanh(x @ w_i)` for four different weights w_1..w_4, on 8192x8192 bf16
arrays. XLA lowers each dot to a cuBLAS (or Triton) GEMM and each tanh to a loop fusion (or an
epilogue). It compiles and warms up first (WARMUP steps), then runs STEPS steps, each with
block_until_ready, inside a cudaProfilerApi range (cuProfilerStart/Stop through ctypes, as
examples/workload.py does), so `nsys profile --capture-range=cudaProfilerApi` records only
the steady state.

Ground truth (printed to the log by formula):
- FLOPs per step: 4 GEMMs x 2*M*N*K = 4 x 2*8192^3 = 4.398e12 (matmuls) + 4 x 8192^2 tanh
  (2.7e8 elementwise ops, counted as one op per element).
- The device name and compute capability, and the wall time of each step.

The kernels XLA chose, their HLO instructions and measured times (H100, JAX 0.11.2):
tests/data/gemm-bf16-{cmdbuf,nocmdbuf}/README.md.

Environment: STEPS (default 10), WARMUP (default 3), N (default 8192).
scripts/captures/capture-all.sh runs it with XLA's command buffers on (defaults) and off
(XLA_FLAGS=--xla_gpu_enable_command_buffer=).
"""
import ctypes
import os
import time

import jax
import jax.numpy as jnp

STEPS = int(os.environ.get("STEPS", "10"))
WARMUP = int(os.environ.get("WARMUP", "3"))
N = int(os.environ.get("N", "8192"))
LAYERS = 4

dev = jax.devices()[0]
print(f"jax {jax.__version__}, device {dev.device_kind}, "
      f"compute capability {getattr(dev, 'compute_capability', '?')}, "
      f"platform {dev.platform}, devices {len(jax.devices())}", flush=True)
print(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')}", flush=True)

gemm_flops = 2 * N * N * N
print(f"ground truth per step: {LAYERS} GEMMs {N}x{N}x{N} bf16, {gemm_flops:.6e} FLOP each, "
      f"{LAYERS * gemm_flops:.6e} FLOP total; {LAYERS} tanh of {N * N} elements "
      f"({LAYERS * N * N:.6e} elementwise ops)", flush=True)


@jax.jit
def step(x, ws):
    for w in ws:
        x = jnp.tanh(x @ w)
    return x


keys = jax.random.split(jax.random.PRNGKey(0), LAYERS + 1)
scale = N ** -0.5
x = jax.random.normal(keys[0], (N, N), jnp.bfloat16)
ws = tuple((jax.random.normal(k, (N, N), jnp.float32) * scale).astype(jnp.bfloat16)
           for k in keys[1:])
x.block_until_ready()

t = time.perf_counter()
for i in range(WARMUP):  # the first call compiles (and autotunes)
    x = step(x, ws)
    x.block_until_ready()
print(f"compiled and warmed up ({WARMUP} steps) in {time.perf_counter() - t:.2f} s", flush=True)

cuda = ctypes.CDLL("libcuda.so.1")
cuda.cuProfilerStart()
times = []
for i in range(STEPS):
    t = time.perf_counter()
    x = step(x, ws)
    x.block_until_ready()
    times.append(time.perf_counter() - t)
cuda.cuProfilerStop()
for i, s in enumerate(times):
    print(f"step {i}: {s * 1e3:.3f} ms wall, {LAYERS * gemm_flops / s / 1e12:.1f} TFLOP/s",
          flush=True)
best = min(times)
print(f"best step {best * 1e3:.3f} ms wall -> {LAYERS * gemm_flops / best / 1e12:.1f} TFLOP/s; "
      f"checksum {float(jnp.sum(x.astype(jnp.float32))):.4f}", flush=True)
