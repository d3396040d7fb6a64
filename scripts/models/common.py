"""Shared by the model programs of scripts/models/: configuration from the environment, the
ground-truth printout, and the profiled loop.

Every program jits one function named `step` (so that its XLA module is `jit_step`, the one
capture.sh keeps), compiles and warms it up (WARMUP steps, each blocked on), then runs STEPS
steps inside a cudaProfilerApi range (cuProfilerStart/cuProfilerStop through ctypes from
libcuda.so.1), each step timed on the host with block_until_ready, and prints each step's
wall time and the median.

Environment common to all: STEPS (default 5), WARMUP (default 3). ATTN=xla replaces the cuDNN
attention by XLA's (for a dry run on a CPU: JAX_PLATFORMS=cpu, small shapes). SYNC=0: the
profiled steps are not waited for one by one; JAX queues them back to back and the loop waits
once, after the last: each step's host time is then the time to queue it, and the median step
is the loop's time over STEPS.
"""
import ctypes
import os
import time

import jax

STEPS = int(os.environ.get("STEPS", "5"))
WARMUP = int(os.environ.get("WARMUP", "3"))
ATTN = os.environ.get("ATTN", "cudnn")
SYNC = os.environ.get("SYNC", "1") == "1"


def env_int(name, default):
    return int(os.environ.get(name, str(default)))


def describe(name):
    devs = jax.devices()
    print(f"{name}: jax {jax.__version__}, {len(devs)} device(s): "
          + ", ".join(f"{d.id}={d.device_kind} (cc {getattr(d, 'compute_capability', '?')})"
                      for d in devs), flush=True)
    print(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')}", flush=True)
    print(f"STEPS={STEPS} WARMUP={WARMUP} ATTN={ATTN}", flush=True)


def print_flops(table, note=""):
    """table: list of (label, model FLOPs, hardware FLOPs) per step, whole step over all
    devices. Prints each row and the totals; returns (model, hardware) totals."""
    m_tot = h_tot = 0
    for label, m, h in table:
        print(f"ground truth FLOP/step {label}: model {m:.6e} hardware {h:.6e}", flush=True)
        m_tot += m
        h_tot += h
    print(f"ground truth FLOP/step TOTAL: model {m_tot:.6e} hardware {h_tot:.6e}"
          + (f" ({note})" if note else ""), flush=True)
    return m_tot, h_tot


def _cuda():
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:  # no GPU here (a dry run on the CPU)
        return None


def run(step_fn, state, model_flops, hardware_flops, ndev=1, after=None):
    """state, aux = step_fn(state) repeatedly: WARMUP steps, then STEPS inside the profiler
    range. `after(i, aux)` (optional) is called for each profiled step's aux (the loss, MoE
    group sizes: never the donated state) after the range closes. Returns the final state."""
    t = time.perf_counter()
    for _ in range(WARMUP):  # the first call compiles (and autotunes)
        state, aux = jax.block_until_ready(step_fn(state))
    print(f"compiled and warmed up ({WARMUP} steps) in {time.perf_counter() - t:.2f} s",
          flush=True)
    cuda = _cuda()
    if cuda:
        cuda.cuProfilerStart()
    times, results = [], []
    t_loop = time.perf_counter()
    for _ in range(STEPS):
        t = time.perf_counter()
        state, aux = step_fn(state)
        if SYNC:
            state, aux = jax.block_until_ready((state, aux))
        times.append(time.perf_counter() - t)
        results.append(aux)
    state, aux = jax.block_until_ready((state, aux))
    loop = time.perf_counter() - t_loop
    if cuda:
        cuda.cuProfilerStop()
    for i, s in enumerate(times):
        if SYNC:
            print(f"step {i}: {s * 1e3:.3f} ms wall, model {model_flops / s / 1e12:.1f} "
                  f"TFLOP/s, hardware {hardware_flops / s / 1e12:.1f} TFLOP/s (all {ndev} "
                  "device(s))", flush=True)
        else:
            print(f"step {i}: {s * 1e3:.3f} ms to queue", flush=True)
        if after:
            after(i, results[i])
    if SYNC:
        med = sorted(times)[len(times) // 2]
    else:
        med = loop / STEPS
        print(f"all {STEPS} steps queued back to back and waited for once: {loop * 1e3:.3f} ms",
              flush=True)
    print(f"median step {med * 1e3:.3f} ms wall -> model {model_flops / med / 1e12:.1f} "
          f"TFLOP/s, hardware {hardware_flops / med / 1e12:.1f} TFLOP/s over {ndev} "
          f"device(s) ({model_flops / med / 1e12 / ndev:.1f} / "
          f"{hardware_flops / med / 1e12 / ndev:.1f} per device)", flush=True)
    return state


def attention_flops(b, h, sq, skv, dh, causal):
    """Forward FLOPs of softmax(Q K^T) V for h query heads (GQA counted by query heads): two
    matmuls of 2*b*h*sq*skv*dh over the (query, key) pairs computed. Causal (sq == skv): the
    lower triangle with the diagonal, sq*(sq+1)/2 pairs per head."""
    pairs = sq * (sq + 1) // 2 if causal else sq * skv
    return 4 * b * h * pairs * dh
