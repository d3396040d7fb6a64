"""Dense layers with bias and activation: the capture workload of tests/data/gemm-epilogue-*.

One jitted step of four bf16 dense layers on 8192x8192 arrays, alternating
`gelu(x @ w + b)` (jax.nn.gelu, its tanh approximation) and `relu(x @ w + b)`:
  x = gelu(x @ w1 + b1); x = relu(x @ w2 + b2); x = gelu(x @ w3 + b3); x = relu(x @ w4 + b4)
XLA's GEMM rewriter folds the bias add and the activation into the cuBLASLt matmul as an
epilogue (`__cublas$lt$matmul` with "epilogue":"..." in its backend config, see
dump_rep/*.hlo.pb: `grep -aoE '"epilogue":"[A-Z_]*"'`). With JAX 0.11.2 on an H100 the relu
layers get "BIAS_RELU" (one library kernel per layer), the gelu layers "BIAS" only, the gelu
running as a separate fusion. The kernels, instructions and times:
tests/data/gemm-epilogue-{cmdbuf,nocmdbuf}/README.md.
It compiles and warms up first (WARMUP steps), then runs STEPS steps, each with
block_until_ready, inside a cudaProfilerApi range (cuProfilerStart/Stop through ctypes).

Ground truth (printed to the log by formula): FLOPs per step 4 x 2*M*N*K (matmuls) plus, per
layer, M*N bias adds and M*N activations (counted as one op per element); the device name
and compute capability; the wall time of each step.

Environment: STEPS (default 10), WARMUP (default 3), N (default 8192).
scripts/captures/capture-all.sh runs it as gemm-epilogue-cmdbuf (XLA's defaults) and
gemm-epilogue-nocmdbuf (--xla_gpu_enable_command_buffer=).
"""
import ctypes
import os
import time

import jax
import jax.numpy as jnp

STEPS = int(os.environ.get("STEPS", "10"))
WARMUP = int(os.environ.get("WARMUP", "3"))
N = int(os.environ.get("N", "8192"))
ACTS = ("gelu", "relu", "gelu", "relu")

dev = jax.devices()[0]
print(f"jax {jax.__version__}, device {dev.device_kind}, "
      f"compute capability {getattr(dev, 'compute_capability', '?')}, "
      f"platform {dev.platform}, devices {len(jax.devices())}", flush=True)
print(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')}", flush=True)

gemm_flops = 2 * N * N * N
for i, a in enumerate(ACTS):
    print(f"ground truth FLOP/step layer {i + 1} {a}(x @ w{i + 1} + b{i + 1}): matmul "
          f"{N}x{N}x{N} {gemm_flops:.6e}, bias add {N * N:.6e}, {a} {N * N:.6e} (1/element)",
          flush=True)
print(f"ground truth FLOP/step total matmuls: {len(ACTS) * gemm_flops:.6e}", flush=True)


@jax.jit
def step(x, ws, bs):
    for act, w, b in zip(ACTS, ws, bs):
        y = x @ w + b
        x = jax.nn.gelu(y) if act == "gelu" else jax.nn.relu(y)
    return x


keys = jax.random.split(jax.random.PRNGKey(0), 2 * len(ACTS) + 1)
scale = N ** -0.5
x = jax.random.normal(keys[0], (N, N), jnp.bfloat16)
ws = tuple((jax.random.normal(k, (N, N), jnp.float32) * scale).astype(jnp.bfloat16)
           for k in keys[1:len(ACTS) + 1])
bs = tuple((jax.random.normal(k, (N,), jnp.float32) * 0.1).astype(jnp.bfloat16)
           for k in keys[len(ACTS) + 1:])
jax.block_until_ready((x, ws, bs))

t = time.perf_counter()
for i in range(WARMUP):  # the first call compiles (and autotunes)
    x = jax.block_until_ready(step(x, ws, bs))
print(f"compiled and warmed up ({WARMUP} steps) in {time.perf_counter() - t:.2f} s", flush=True)

try:
    cuda = ctypes.CDLL("libcuda.so.1")
except OSError:  # no GPU here (a dry run on the CPU)
    cuda = None
if cuda:
    cuda.cuProfilerStart()
times = []
for i in range(STEPS):
    t = time.perf_counter()
    x = jax.block_until_ready(step(x, ws, bs))
    times.append(time.perf_counter() - t)
if cuda:
    cuda.cuProfilerStop()
total = len(ACTS) * gemm_flops
for i, s in enumerate(times):
    print(f"step {i}: {s * 1e3:.3f} ms wall, {total / s / 1e12:.1f} TFLOP/s", flush=True)
best = min(times)
print(f"best step {best * 1e3:.3f} ms wall -> {total / best / 1e12:.1f} TFLOP/s; checksum "
      f"{float(jnp.sum(x.astype(jnp.float32))):.4f}", flush=True)
