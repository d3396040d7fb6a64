"""Near the memory limit: a step whose buffers (arguments + outputs + temporaries, from XLA's
memory analysis of the compiled step) take about TARGET_GIB (default 112) GiB, run with
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 (JAX's pool 0.95 x the GPU's memory, 133 GiB on an
H200: it fits); with JAX's default fraction (0.75, 105 GiB) the same step does not fit.

The step, over SETS (6) pairs of f32 arrays x_i, y_i of [R, 1024] (each under 2^31
elements):
    h_i = (bf16(x_i) @ w).astype(f32)            (w: [1024, 1024] bf16)
    x_i' = x_i + tanh(h_i); y_i' = 0.5 * y_i + h_i
nothing donated, so the old and new arrays are live together. R is chosen from the memory
analysis of two small compilations (the bytes grow linearly with R) so that the total is
TARGET_GIB, then the step is compiled at R and its analysis printed.

Ground truth printed: the GPU's total memory, the pool limit of 0.95 (and 0.75) x total,
JAX's memory_stats (bytes_limit, peak_bytes_in_use) after the steps, the step's
argument / output / temp / alias bytes, and the step times. Without the fraction variable the
program prints the out-of-memory error and exits with 1.

Environment: STEPS, WARMUP, TARGET_GIB (112), SETS (6), XLA_PYTHON_CLIENT_MEM_FRACTION.
"""
import ctypes
import os
import sys

import jax
import jax.numpy as jnp

from common import describe, profiled

GIB = 2**30
TARGET = float(os.environ.get("TARGET_GIB", "112")) * GIB
SETS = int(os.environ.get("SETS", "6"))
C = 1024
FRACTION = os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION")
describe("near_oom", f"a step of about {TARGET / GIB:.0f} GiB of buffers; "
         f"XLA_PYTHON_CLIENT_MEM_FRACTION={FRACTION or '(unset: JAX default 0.75)'}")


def total_memory():
    try:
        cu = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    dev, total = ctypes.c_int(), ctypes.c_size_t()
    cu.cuInit(0)
    cu.cuDeviceGet(ctypes.byref(dev), 0)
    cu.cuDeviceTotalMem_v2(ctypes.byref(total), dev)
    return total.value


total = total_memory()
if total:
    print(f"GPU total memory {total} B = {total / GIB:.2f} GiB; 0.95 x total = "
          f"{0.95 * total / GIB:.2f} GiB; 0.75 x total (JAX default) = {0.75 * total / GIB:.2f} GiB",
          flush=True)


def stats(when):
    s = jax.devices()[0].memory_stats() or {}
    keys = ("bytes_limit", "bytes_in_use", "peak_bytes_in_use", "largest_alloc_size")
    print(f"memory_stats {when}: " + ", ".join(
        f"{k} {s[k]} B ({s[k] / GIB:.2f} GiB)" for k in keys if k in s), flush=True)


stats("at start")


@jax.jit
def step(xs, ys, w):
    out_x, out_y = [], []
    for x, y in zip(xs, ys):
        h = (x.astype(jnp.bfloat16) @ w).astype(jnp.float32)
        out_x.append(x + jnp.tanh(h))
        out_y.append(0.5 * y + h)
    return out_x, out_y


def analysis(rows):
    a = jax.ShapeDtypeStruct((rows, C), jnp.float32)
    compiled = step.lower([a] * SETS, [a] * SETS,
                          jax.ShapeDtypeStruct((C, C), jnp.bfloat16)).compile()
    m = compiled.memory_analysis()
    tot = (m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
           - m.alias_size_in_bytes)
    return compiled, m, tot


r0, r1 = 1 << 16, 1 << 17
_, _, b0 = analysis(r0)
_, _, b1 = analysis(r1)
per_row = (b1 - b0) / (r1 - r0)
R = int((TARGET - (b0 - per_row * r0)) / per_row) // 1024 * 1024
compiled, m, tot = analysis(R)
print(f"shapes: {SETS} sets of x_i, y_i f32 [{R}, {C}] ({R * C * 4 / GIB:.3f} GiB each), "
      f"w bf16 [{C}, {C}]; {per_row:.1f} B of buffers per row", flush=True)
print(f"ground truth memory_analysis of jit_step: argument_size_in_bytes "
      f"{m.argument_size_in_bytes}, output_size_in_bytes {m.output_size_in_bytes}, "
      f"temp_size_in_bytes {m.temp_size_in_bytes}, alias_size_in_bytes "
      f"{m.alias_size_in_bytes}, generated_code_size_in_bytes "
      f"{m.generated_code_size_in_bytes}; arguments + outputs + temporaries - aliases = "
      f"{tot} B = {tot / GIB:.2f} GiB", flush=True)
if total:
    frac = float(FRACTION) if FRACTION else 0.75
    print(f"ground truth: {tot / GIB:.2f} GiB of {frac} x {total / GIB:.2f} GiB = "
          f"{frac * total / GIB:.2f} GiB ({tot / (frac * total) * 100:.1f} % of the limit)",
          flush=True)
gemm = 2 * SETS * R * C * C
print(f"FLOP per step: {gemm:.6e} (bf16 GEMMs); bytes of the arrays read and written per "
      f"step at least {4 * SETS * R * C * 4 / GIB:.1f} GiB", flush=True)

keys = jax.random.split(jax.random.PRNGKey(0), 2 * SETS + 1)
make = jax.jit(lambda k: jax.random.normal(k, (R, C), jnp.float32))
xs = [make(k) for k in keys[:SETS]]
ys = [make(k) for k in keys[SETS:2 * SETS]]
w = (jax.random.normal(keys[-1], (C, C), jnp.float32) * C ** -0.5).astype(jnp.bfloat16)
jax.block_until_ready((xs, ys, w))
stats("with the arguments allocated")


def one(i):
    global xs, ys
    xs, ys = compiled(xs, ys, w)
    jax.block_until_ready((xs, ys))


try:
    profiled(one)
except Exception as e:  # noqa: BLE001 (the out-of-memory error without the fraction)
    print(f"ground truth: the step did not fit: {type(e).__name__}: {str(e)[:600]}", flush=True)
    stats("after the failure")
    sys.exit(1)
stats("after the steps")
print(f"checksum {float(jnp.sum(xs[0][:4])):.4f}", flush=True)
