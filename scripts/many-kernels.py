"""Many kernels for the kernel-count benchmark: a step of LAYERS small matmul + tanh layers
(two kernels each), run STEPS times on one GPU, profiled from step 3 through a cudaProfilerApi
capture range. 1500 steps of 200 layers give about 600k kernels; with
XLA_FLAGS=--xla_gpu_graph_min_graph_size=1 the step runs as one CUDA graph (Nsight Systems
2024.x fails to import graph-node traces much longer than 600 steps of it; 2023.4 imports a
million graph kernels, LAYERS=500 STEPS=1003, with --cuda-flush-interval=60000, and without it
stops at "Wrong event order")."""
import ctypes, os
import jax, jax.numpy as jnp
STEPS = int(os.environ.get("STEPS", "1500"))
LAYERS = int(os.environ.get("LAYERS", "200"))
def step(ws, x):
    for w in ws:
        x = jnp.tanh(x @ w)
    return x
ws = [jax.random.normal(jax.random.PRNGKey(i), (256, 256)) * 0.05 for i in range(LAYERS)]
x = jnp.ones((256, 256))
f = jax.jit(step)
cuda = ctypes.CDLL("libcuda.so.1")
for s in range(STEPS):
    if s == 3:
        x.block_until_ready()
        cuda.cuProfilerStart()
    x = f(ws, x)
    if s % 50 == 0:
        x.block_until_ready()
x.block_until_ready()
cuda.cuProfilerStop()
print("done", float(x[0, 0]))
