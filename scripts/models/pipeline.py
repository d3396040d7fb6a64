"""A GPipe-style pipeline-parallel training step written with shard_map and
jax.lax.ppermute over all visible devices of one process (2 GPUs, 2 stages, for the capture):
the workload of tests/data/models/pipeline/.

Model: an MLP of NS*LPS layers, h = gelu(h @ W) (D x D, bf16 compute on f32 master weights),
stage s holding layers s*LPS..(s+1)*LPS-1 (the weights W: (NS, LPS, D, D), sharded on the
stage axis). The batch (M*MB rows) is split into M microbatches. In shard_map every stage runs
the same program for M+NS-1 iterations (unrolled): stage 0 takes microbatch t
(jnp.where(stage == 0, x[t], state)), every stage applies its LPS layers, and the result goes
to the next stage with ppermute (stage i -> i+1); the last stage's results for t >= NS-1 are
the outputs. loss = mean((out - y)^2) on the last stage (psum over the stages). The backward
is JAX's transpose of that program (ppermute backwards, stage i+1 -> i). optax.adamw;
weights and optimizer state donated. As in every SPMD pipeline, each stage also computes in
the bubble iterations (on data that is thrown away): hardware FLOPs > model FLOPs.

Ground truth printed by formula (per step, all devices), each matmul 2*MB*D*D per microbatch:
- model: forward NS*LPS layers x M microbatches; backward weight gradients likewise, data
  gradients for all but the first layer (its input is data).
- hardware: every device, every one of the M+NS-1 iterations: LPS forward, LPS weight-gradient
  and LPS data-gradient matmuls, less the first layer's data gradient at iteration 0 (its
  input is a constant on every stage there).
- collectives: a ppermute of MB x D bf16 after each forward iteration but the last
  (M+NS-2 of them) and as many backward.

Environment: M (4), MB (2048), D (4096), LPS (2), STEPS, WARMUP (common.py).
"""
from functools import partial

import jax
import jax.numpy as jnp
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import common

try:
    from jax import shard_map  # JAX >= 0.7
except ImportError:  # pragma: no cover
    from jax.experimental.shard_map import shard_map

M = common.env_int("M", 4)
MB = common.env_int("MB", 2048)
D = common.env_int("D", 4096)
LPS = common.env_int("LPS", 2)
devices = jax.devices()
NS = len(devices)
ITERS = M + NS - 1
BF = jnp.bfloat16

common.describe("pipeline")
print(f"shapes: stages={NS} layers/stage={LPS} microbatches M={M} of MB={MB} rows "
      f"(batch {M * MB}), D={D}; iterations {ITERS}, bubble {(NS - 1) / ITERS:.3f}",
      flush=True)
g = 2 * MB * D * D
L = NS * LPS
table = [("forward", L * M * g, NS * ITERS * LPS * g),
         ("backward weight gradients", L * M * g, NS * ITERS * LPS * g),
         ("backward data gradients", (L * M - M) * g, (NS * ITERS * LPS - NS) * g)]
MODEL, HW = common.print_flops(table, f"matmuls of {MB}x{D}x{D}, {g:.6e} each: model "
                               f"{(3 * L - 1) * M}, hardware {NS * (3 * ITERS * LPS - 1)}")
print(f"ppermutes: {ITERS - 1} forward + {ITERS - 1} backward per step, {MB * D * 2} B each",
      flush=True)

mesh = Mesh(devices, ("stage",))
w_sh = NamedSharding(mesh, P("stage"))
rep = NamedSharding(mesh, P())


@partial(shard_map, mesh=mesh, in_specs=(P("stage"), P(), P()), out_specs=P())
def pipe_loss(w, x, y):  # w: (1, LPS, D, D) on each stage
    stage = jax.lax.axis_index("stage")
    state = jnp.zeros((MB, D), BF)
    outs = []
    for t in range(ITERS):
        h = jnp.where(stage == 0, x[min(t, M - 1)], state)
        for layer in range(LPS):
            h = jax.nn.gelu(h @ w[0, layer].astype(BF))
        if t >= NS - 1:
            outs.append(h)  # meaningful on the last stage
        if t < ITERS - 1:
            state = jax.lax.ppermute(h, "stage", [(i, i + 1) for i in range(NS - 1)])
    out = jnp.stack(outs).astype(jnp.float32)
    err = jnp.mean(jnp.square(out - y.astype(jnp.float32)))
    return jax.lax.psum(jnp.where(stage == NS - 1, err, 0.0), "stage")


opt = optax.adamw(1e-4)


def step(w, opt_state, x, y):  # named step: its XLA module is jit_step
    loss, grad = jax.value_and_grad(pipe_loss)(w, x, y)
    updates, opt_state = opt.update(grad, opt_state, w)
    return optax.apply_updates(w, updates), opt_state, loss


def init(key):
    k = jax.random.split(key, 3)
    w = jax.random.normal(k[0], (NS, LPS, D, D), jnp.float32) * D ** -0.5
    x = jax.random.normal(k[1], (M, MB, D), jnp.float32).astype(BF)
    y = (jax.random.normal(k[2], (M, MB, D), jnp.float32) * 0.1).astype(BF)
    return w, x, y


w, x, y = jax.jit(init, out_shardings=(w_sh, rep, rep))(jax.random.PRNGKey(0))
o_sh = jax.tree.map(lambda a: w_sh if a.ndim == 4 else rep, jax.eval_shape(opt.init, w))
opt_state = jax.jit(opt.init, out_shardings=o_sh)(w)
jstep = jax.jit(step, in_shardings=(w_sh, o_sh, rep, rep), out_shardings=(w_sh, o_sh, rep),
                donate_argnums=(0, 1))


def one(state):
    w_, o, loss = jstep(state[0], state[1], x, y)
    return (w_, o), loss


common.run(one, (w, opt_state), MODEL, HW, NS,
           after=lambda i, loss: print(f"step {i}: loss {float(loss):.6f}", flush=True))
