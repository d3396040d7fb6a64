"""A mix of library and XLA kernels: the capture workload of tests/data/mixed-{cmdbuf,nocmdbuf}.

One jitted step that does, in this order (the ops are independent, so XLA may schedule them
in another order):
1. conv:     a bf16 convolution (jax.lax.conv_general_dilated, NHWC/HWIO/NHWC), batch 64,
             56x56x128 -> 128 channels, 3x3 kernel, stride 1, SAME padding (cuDNN);
2. mm_f32:   an f32 matmul 4096x4096x4096 at default precision (a1 @ b1);
3. mm_f32_hi: an f32 matmul 4096x4096x4096 with precision=HIGHEST (a2 @ b2; other operands
             than 2. so that XLA cannot merge or share the two);
4. bmm_bf16: a batched bf16 matmul, einsum('bij,bjk->bik'), 32 x (1024x1024 @ 1024x1024);
5. ew:       a memory-bound elementwise op on a 256M-element (2^28) f32 array,
             y = x * 1.5 + 2.0, returned, and its sum s = jnp.sum(y), returned too.
It compiles and warms up first (WARMUP steps), then runs STEPS steps, each with
block_until_ready, inside a cudaProfilerApi range (cuProfilerStart/Stop through ctypes, as
examples/workload.py does).

Ground truth (printed to the log by formula):
- FLOPs per step: conv 2*N*H*W*Cout*Cin*KH*KW; each matmul 2*M*N*K (times the batch);
  elementwise 2 per element for y (multiply, add), 1 per element for the sum.
- Bytes the elementwise op must move: read x (4 B/element) and write y (4 B/element),
  2^31 B = 2 GiB; the sum adds nothing if fused with y (else a re-read of y, 1 GiB).
- The device name and compute capability, and the wall time of each step.

The kernels XLA chose, their HLO instructions and measured times (H100, JAX 0.11.2):
tests/data/mixed-{cmdbuf,nocmdbuf}/README.md.

Environment: STEPS (default 10), WARMUP (default 3).
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

# conv
CB, CH, CW, CIN, COUT, KH, KW = 64, 56, 56, 128, 128, 3, 3
# matmuls
M = 4096
BB, BM = 32, 1024
# elementwise
E = 1 << 28

dev = jax.devices()[0]
print(f"jax {jax.__version__}, device {dev.device_kind}, "
      f"compute capability {getattr(dev, 'compute_capability', '?')}, "
      f"platform {dev.platform}, devices {len(jax.devices())}", flush=True)
print(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')}", flush=True)

flops = {
    "conv (bf16, cuDNN)": 2 * CB * CH * CW * COUT * CIN * KH * KW,
    "mm_f32 (default precision)": 2 * M * M * M,
    "mm_f32_hi (HIGHEST)": 2 * M * M * M,
    "bmm_bf16": 2 * BB * BM * BM * BM,
    "ew y=x*1.5+2 (2/element)": 2 * E,
    "ew sum(y) (1/element)": E,
}
for k, v in flops.items():
    print(f"ground truth FLOP/step {k}: {v:.6e}", flush=True)
print(f"ground truth FLOP/step total: {sum(flops.values()):.6e}", flush=True)
print(f"ground truth bytes/step ew: read x {4 * E} B + write y {4 * E} B = {8 * E} B "
      f"({8 * E / 2**30:.1f} GiB); sum fused with y adds none", flush=True)
print(f"ground truth bytes conv: input {CB * CH * CW * CIN * 2} B, output "
      f"{CB * CH * CW * COUT * 2} B, kernel {KH * KW * CIN * COUT * 2} B", flush=True)


@jax.jit
def step(img, kern, a1, b1, a2, b2, ba, bb, x):
    conv = jax.lax.conv_general_dilated(
        img, kern, window_strides=(1, 1), padding="SAME",
        dimension_numbers=("NHWC", "HWIO", "NHWC"))
    mm = a1 @ b1
    mm_hi = jnp.matmul(a2, b2, precision=jax.lax.Precision.HIGHEST)
    bmm = jnp.einsum("bij,bjk->bik", ba, bb)
    y = x * 1.5 + 2.0
    s = jnp.sum(y)
    return conv, mm, mm_hi, bmm, y, s


k = jax.random.split(jax.random.PRNGKey(0), 9)
img = jax.random.normal(k[0], (CB, CH, CW, CIN), jnp.bfloat16)
kern = (jax.random.normal(k[1], (KH, KW, CIN, COUT), jnp.float32) * 0.03).astype(jnp.bfloat16)
a1 = jax.random.normal(k[2], (M, M), jnp.float32)
b1 = jax.random.normal(k[3], (M, M), jnp.float32) * M ** -0.5
a2 = jax.random.normal(k[4], (M, M), jnp.float32)
b2 = jax.random.normal(k[5], (M, M), jnp.float32) * M ** -0.5
ba = jax.random.normal(k[6], (BB, BM, BM), jnp.bfloat16)
bb = (jax.random.normal(k[7], (BB, BM, BM), jnp.float32) * BM ** -0.5).astype(jnp.bfloat16)
x = jax.random.uniform(k[8], (E,), jnp.float32)
args = (img, kern, a1, b1, a2, b2, ba, bb, x)
jax.block_until_ready(args)

t = time.perf_counter()
for i in range(WARMUP):  # the first call compiles (and autotunes)
    out = jax.block_until_ready(step(*args))
print(f"compiled and warmed up ({WARMUP} steps) in {time.perf_counter() - t:.2f} s", flush=True)
del out

cuda = ctypes.CDLL("libcuda.so.1")
cuda.cuProfilerStart()
times = []
for i in range(STEPS):
    t = time.perf_counter()
    out = jax.block_until_ready(step(*args))
    times.append(time.perf_counter() - t)
    del out
cuda.cuProfilerStop()
for i, s in enumerate(times):
    print(f"step {i}: {s * 1e3:.3f} ms wall", flush=True)
out = step(*args)
print(f"best step {min(times) * 1e3:.3f} ms wall; sum(y) {float(out[5]):.6e} "
      f"(expected about {E * 2.75:.6e})", flush=True)
