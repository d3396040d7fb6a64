"""User NVTX ranges and marks around a JAX loop: the workload of tests/data/nvtx-user/.

A small jitted step (a 1024x1024 f32 matmul chain) run in a loop, annotated with the `nvtx`
PyPI package (0.2.x) as a user would:
  with nvtx.annotate("train_step"): step(...)            (default domain "NVTX")
  with nvtx.annotate("eval", domain="myapp"): evaluate(...)
  nvtx.mark("checkpoint")                                 (default domain)
plus, to tell what reaches a report captured with
`nsys profile --trace=cuda,nvtx --capture-range=cudaProfilerApi --capture-range-end=stop`:
- "outer_before" (push_range before cuProfilerStart, pop_range after cuProfilerStop);
- "open_before_closed_inside" (pushed before the range starts, popped inside it);
- "se_before_end_inside" (start_range before, end_range inside: a start/end range);
- "inside_first" (default domain) and "late"/"late_range" (domain first used inside),
  "mark_inside_first", "myapp"/"mark_myapp": names first registered inside the range;
- "open_inside_closed_after" (pushed inside, popped after cuProfilerStop);
- "se_inside" (start/end range wholly inside).
NVTX_WARMUP_ANNOTATE=1 (the default) annotates the warm-up steps as the loop does (the user's
pattern: domains and strings are created and registered before the capture range);
NVTX_WARMUP_ANNOTATE=0 makes the first nvtx call of the program inside the range (except
the *_before ranges, whose domain is "before").
PROFILE=0 runs without cuProfilerStart/Stop (for a whole-program capture).
NVTX_FORCE_DOMAINS=1 works around the package's nvtxDomainIsEnabled check (see below), so
that its calls reach the tool even where that check says no.
Inside the loop it also opens a jax.profiler.TraceAnnotation("jax_trace_annotation").

The program prints, before and inside the range, whether the nvtx package sees a tool
(nvtx.enabled(), and whether a domain it creates is a real Domain or the DummyDomain it uses
when nvtxDomainIsEnabled says no tool is attached), and at the end what it emitted: the
ground truth to compare with `nsys stats --report nvtx_sum,nvtx_pushpop_trace`.

What reached the reports (Nsight Systems 2023.4.4, H100, JAX 0.11.2):
tests/data/nvtx-user/README.md.

Environment: STEPS (default 10), WARMUP (default 3), NVTX_WARMUP_ANNOTATE, PROFILE,
NVTX_FORCE_DOMAINS. scripts/captures/capture-all.sh runs it as nvtx-range (the user's
pattern), nvtx-whole (no capture range), nvtx-range-forced and nvtx-whole-forced (the
workaround on) and nvtx-mem (forced, --cuda-memory-usage=true).
"""
import collections
import importlib.metadata
import ctypes
import os
import time

import jax
import jax.numpy as jnp
import nvtx
from nvtx._lib import Domain as _Domain, DummyDomain

STEPS = int(os.environ.get("STEPS", "10"))
WARMUP = int(os.environ.get("WARMUP", "3"))
WARM_ANNOTATE = os.environ.get("NVTX_WARMUP_ANNOTATE", "1") == "1"
PROFILE = os.environ.get("PROFILE", "1") == "1"
FORCE = os.environ.get("NVTX_FORCE_DOMAINS", "0") == "1"
N = 1024

if FORCE:
    # Work around the nvtx package's check: nvtx.get_domain (which annotate, mark and
    # push_range use) returns the no-op DummyDomain when nvtxDomainIsEnabled (an NVTX payload
    # extension call) returns 0, which it does under Nsight Systems releases whose injection
    # library lacks InitializeInjectionNvtxExtension (2023.4.4 does). Make real domains.
    import functools
    import nvtx.nvtx as _nvtx_py
    from nvtx._lib import lib as _nvtx_lib

    @functools.lru_cache(maxsize=None)
    def _forced_domain(name):
        d = object.__new__(_nvtx_lib.Domain)
        d.handle = _nvtx_lib.DomainHandle(name)
        d.__init__(name)
        return d

    _nvtx_py._get_domain_cached = _forced_domain

emitted = collections.Counter()


def probe(when, cached=True):
    # A fresh Domain (not nvtx.get_domain, which caches): DummyDomain if nvtxDomainIsEnabled
    # returned 0 for it, i.e. the package thinks no tool is attached. With cached, also the
    # type of the (cached) default and myapp domains that annotate/mark use (this creates
    # them if not yet created, so the cold run asks only after the range).
    d = _Domain(f"probe_{when}")
    msg = (f"nvtx probe {when}: nvtx.enabled()={nvtx.enabled()}, new domain "
           f"{'DummyDomain (disabled)' if isinstance(d, DummyDomain) else 'Domain (enabled)'}")
    if cached:
        msg += (f"; cached default domain {type(nvtx.get_domain(None)).__name__}, "
                f"myapp {type(nvtx.get_domain('myapp')).__name__}, "
                f"before {type(nvtx.get_domain('before')).__name__}")
    print(msg, flush=True)


dev = jax.devices()[0]
print(f"jax {jax.__version__}, nvtx {importlib.metadata.version('nvtx')}, device "
      f"{dev.device_kind}, platform {dev.platform}, devices {len(jax.devices())}", flush=True)
print(f"NVTX_INJECTION64_PATH={os.environ.get('NVTX_INJECTION64_PATH', '(unset)')}",
      flush=True)
print(f"ground truth FLOP/step: 2 matmuls {N}^3 = {2 * 2 * N ** 3:.6e}", flush=True)


@jax.jit
def step(x, w):
    return jnp.tanh(jnp.tanh(x @ w) @ w)


@jax.jit
def evaluate(x):
    return jnp.sum(x * x)


x = jax.random.normal(jax.random.PRNGKey(0), (N, N), jnp.float32)
w = jax.random.normal(jax.random.PRNGKey(1), (N, N), jnp.float32) * N ** -0.5
x = jax.block_until_ready(step(x, w))
jax.block_until_ready(evaluate(x))

for i in range(WARMUP):
    if WARM_ANNOTATE:
        with nvtx.annotate("train_step"):
            x = jax.block_until_ready(step(x, w))
        with nvtx.annotate("eval", domain="myapp"):
            jax.block_until_ready(evaluate(x))
        nvtx.mark("checkpoint")
        emitted["warmup: train_step, eval@myapp, mark checkpoint"] += 1
    else:
        x = jax.block_until_ready(step(x, w))
        jax.block_until_ready(evaluate(x))

probe("before_range", cached=WARM_ANNOTATE)
nvtx.push_range("outer_before", domain="before")
nvtx.push_range("open_before_closed_inside", domain="before")
se_before = nvtx.start_range("se_before_end_inside", domain="before")
emitted["before: push outer_before, push open_before_closed_inside, start "
        "se_before_end_inside (domain before)"] += 1

cuda = None
if PROFILE:
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:  # no GPU here (a dry run on the CPU)
        cuda = None
if cuda:
    cuda.cuProfilerStart()
t0 = time.perf_counter()
probe("inside_range", cached=False)
nvtx.pop_range(domain="before")  # open_before_closed_inside
nvtx.end_range(se_before)
se_inside = nvtx.start_range("se_inside", domain="myapp")
for i in range(STEPS):
    with nvtx.annotate("train_step"):
        x = jax.block_until_ready(step(x, w))
    with nvtx.annotate("eval", domain="myapp"):
        jax.block_until_ready(evaluate(x))
    nvtx.mark("checkpoint")
    with nvtx.annotate("inside_first"):
        pass
    with nvtx.annotate("late_range", domain="late"):
        pass
    with jax.profiler.TraceAnnotation("jax_trace_annotation"):
        pass
    nvtx.mark("mark_inside_first")
    nvtx.mark("mark_myapp", domain="myapp")
nvtx.end_range(se_inside)
nvtx.push_range("open_inside_closed_after")
emitted[f"inside ({STEPS} each): train_step, eval@myapp, mark checkpoint, inside_first, "
        f"late_range@late, jax.profiler.TraceAnnotation jax_trace_annotation, "
        f"mark mark_inside_first, mark mark_myapp@myapp"] += 1
emitted["inside (once): pop open_before_closed_inside@before, end se_before_end_inside@before, "
        "start/end se_inside@myapp, push open_inside_closed_after"] += 1
dt = time.perf_counter() - t0
if cuda:
    cuda.cuProfilerStop()
nvtx.pop_range()  # open_inside_closed_after
nvtx.pop_range(domain="before")  # outer_before
emitted["after: pop open_inside_closed_after, pop outer_before@before"] += 1
probe("after_range")
print(f"{STEPS} annotated steps in {dt * 1e3:.2f} ms; checksum "
      f"{float(jnp.sum(x)):.4f}", flush=True)
for k, v in emitted.items():
    print(f"emitted: {k}", flush=True)
