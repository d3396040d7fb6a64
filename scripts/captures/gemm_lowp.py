"""Chained low-precision GEMMs (f16 and fp8): the capture workload of tests/data/gemm-lowp-*.

One jitted step with two independent chains on 8192x8192 arrays (XLA may interleave them):
1. f16: `x = tanh(x @ w_i)` for four f16 weights w_1..w_4 (as gemm_bf16.py, in float16);
2. fp8:  four layers on float8_e4m3fn operands, bf16 results, in two forms:
   - layers 1-2, a direct fp8 dot: `y = dot_general(q8, w8t, contracting (1, 1),
     preferred_element_type=bfloat16) * (sx * sw)`, then `tanh`;
   - layers 3-4, the dequantize pattern XLA's GEMM rewriter matches for fp8 (as Flax's fp8
     layers write it): `dot_general(q8.astype(bf16) * sx, w8t.astype(bf16) * sw, ...)`,
     then `tanh`;
   with q8 = (x / sx).astype(float8_e4m3fn) (a quantizing fusion before each layer) and the
   weights stored transposed (w8t is N x K, "TN" as cuBLASLt fp8 wants), so that XLA needs no
   transpose. With JAX 0.11.2 on an H100 only the direct form becomes an fp8 GEMM
   (`__cublas$lt$matmul$f8`); XLA runs the dequantize pattern as bf16 fusions and a bf16
   `__cublas$lt$matmul` (tests/data/gemm-lowp-nocmdbuf/README.md).
It compiles and warms up first (WARMUP steps), then runs STEPS steps, each with
block_until_ready, inside a cudaProfilerApi range (cuProfilerStart/Stop through ctypes).

Ground truth (printed to the log by formula): FLOPs per step 2*M*N*K per matmul, 4 f16 and 4
fp8 matmuls of 8192^3; the device name and compute capability; the wall time of each step.
The kernels XLA chose, their HLO instructions and measured times (H100, JAX 0.11.2):
tests/data/gemm-lowp-{cmdbuf,nocmdbuf}/README.md.

Environment: STEPS (default 10), WARMUP (default 3), N (default 8192).
scripts/captures/capture-all.sh runs it as gemm-lowp-cmdbuf (XLA's defaults) and
gemm-lowp-nocmdbuf (--xla_gpu_enable_command_buffer=).
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
F8 = jnp.float8_e4m3fn
F8_MAX = 448.0

dev = jax.devices()[0]
print(f"jax {jax.__version__}, device {dev.device_kind}, "
      f"compute capability {getattr(dev, 'compute_capability', '?')}, "
      f"platform {dev.platform}, devices {len(jax.devices())}", flush=True)
print(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')}", flush=True)

gemm_flops = 2 * N * N * N
flops = {}
for i in range(LAYERS):
    flops[f"f16 matmul {i + 1} ({N}x{N}x{N})"] = gemm_flops
for i in range(LAYERS):
    form = "direct fp8 dot_general" if i < 2 else "dequantize pattern"
    flops[f"fp8 matmul {i + 1} ({N}x{N}x{N}, {form})"] = gemm_flops
for k, v in flops.items():
    print(f"ground truth FLOP/step {k}: {v:.6e}", flush=True)
print(f"ground truth FLOP/step total: {sum(flops.values()):.6e} (f16 {LAYERS * gemm_flops:.6e}, "
      f"fp8 {LAYERS * gemm_flops:.6e}); plus {2 * LAYERS} tanh and {LAYERS} quantize fusions "
      f"of {N * N} elements each", flush=True)

DN = (((1,), (1,)), ((), ()))  # contract x's dim 1 with w8t's dim 1 (w8t is N x K)


def quantize(x, s):
    return jnp.clip(x.astype(jnp.float32) / s, -F8_MAX, F8_MAX).astype(F8)


@jax.jit
def step(x16, ws16, x8, ws8, sws):
    for w in ws16:
        x16 = jnp.tanh(x16 @ w)
    sx = jnp.float32(1.0 / 16)  # |tanh| <= 1, so x / sx stays well inside e4m3's range
    for i, (w8t, sw) in enumerate(zip(ws8, sws)):
        q8 = quantize(x8, sx)
        if i < 2:
            y = jax.lax.dot_general(q8, w8t, DN, preferred_element_type=jnp.bfloat16)
            y = y * (sx * sw).astype(jnp.bfloat16)
        else:
            a = q8.astype(jnp.bfloat16) * sx.astype(jnp.bfloat16)
            b = w8t.astype(jnp.bfloat16) * sw.astype(jnp.bfloat16)
            y = jax.lax.dot_general(a, b, DN, preferred_element_type=jnp.bfloat16)
        x8 = jnp.tanh(y)
    return x16, x8


keys = jax.random.split(jax.random.PRNGKey(0), 2 * LAYERS + 2)
scale = N ** -0.5
x16 = jax.random.normal(keys[0], (N, N), jnp.float16)
ws16 = tuple((jax.random.normal(k, (N, N), jnp.float32) * scale).astype(jnp.float16)
             for k in keys[1:LAYERS + 1])
x8 = jnp.tanh(jax.random.normal(keys[LAYERS + 1], (N, N), jnp.float32)).astype(jnp.bfloat16)
ws8, sws = [], []
for k in keys[LAYERS + 2:]:
    w = jax.random.normal(k, (N, N), jnp.float32) * scale  # stored as N x K (transposed)
    sw = jnp.max(jnp.abs(w)) / F8_MAX
    ws8.append((w / sw).astype(F8))
    sws.append(sw.astype(jnp.float32))
ws8, sws = tuple(ws8), tuple(sws)
args = (x16, ws16, x8, ws8, sws)
jax.block_until_ready(args)

t = time.perf_counter()
for i in range(WARMUP):  # the first call compiles (and autotunes)
    x16, x8 = jax.block_until_ready(step(x16, ws16, x8, ws8, sws))
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
    x16, x8 = jax.block_until_ready(step(x16, ws16, x8, ws8, sws))
    times.append(time.perf_counter() - t)
if cuda:
    cuda.cuProfilerStop()
total = sum(flops.values())
for i, s in enumerate(times):
    print(f"step {i}: {s * 1e3:.3f} ms wall, {total / s / 1e12:.1f} TFLOP/s", flush=True)
best = min(times)
print(f"best step {best * 1e3:.3f} ms wall -> {total / best / 1e12:.1f} TFLOP/s; checksums "
      f"f16 {float(jnp.sum(x16.astype(jnp.float32))):.4f} "
      f"fp8 {float(jnp.sum(x8.astype(jnp.float32))):.4f}", flush=True)
