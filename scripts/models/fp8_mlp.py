"""An MLP training step with FP8 GEMMs written the way users write them (current scaling):
the workload of tests/data/models/fp8-gemm*/.

Every matmul goes through `fp8_dot`, a jax.custom_vjp:
  forward:  x8 = (x / sx) as float8_e4m3fn, w8 = (w / sw) as float8_e4m3fn, with the
            per-tensor scales sx = amax(|x|)/448, sw = amax(|w|)/448 computed in the step;
            y = dot_general(x8, w8, preferred_element_type=bfloat16) * (sx * sw)
  backward: g8 = (g / sg) as float8_e5m2 (sg = amax(|g|)/57344);
            dx = dot_general(g8, w8^T) (e5m2 x e4m3 -> bf16) * (sg * sw)
            dw = dot_general(x8^T, g8) (e4m3 x e5m2 -> f32) * (sx * sg)
(scaled dot_general on fp8 operands with bf16/f32 results, as Transformer Engine's and
Flax's fp8 recipes do; XLA's GEMM rewriter turns such dots into cuBLASLt fp8 GEMMs,
`__cublas$lt$matmul$f8`).
Model: x (T x D, bf16 data); BLOCKS x  x = x + fc2(gelu(fc1(x)))  (fc1: D x F, fc2: F x D,
f32 master weights quantized every step); loss = mean((x - target)^2) in f32; optax.adamw;
weights and optimizer state donated.

Ground truth printed by formula (per step): each GEMM 2*T*D*F; forward 2 per block; backward
dgrad + wgrad for each, except block 1's fc1, whose input is data (its dx is dead code):
2*BLOCKS + 2*2*BLOCKS - 1 GEMMs, all fp8. Plus the amax reductions and quantizing fusions.

Environment: T (8192), D (4096), F (16384), BLOCKS (2), STEPS, WARMUP (common.py).
"""
import jax
import jax.numpy as jnp
import optax

import common

T = common.env_int("T", 8192)
D = common.env_int("D", 4096)
F = common.env_int("F", 16384)
BLOCKS = common.env_int("BLOCKS", 2)
E4, E5 = jnp.float8_e4m3fn, jnp.float8_e5m2
E4_MAX, E5_MAX = 448.0, 57344.0
BF = jnp.bfloat16

common.describe("fp8-mlp")
print(f"shapes: T={T} D={D} F={F} BLOCKS={BLOCKS}", flush=True)
g = 2 * T * D * F
table = [(f"{BLOCKS} blocks fc1+fc2 fwd (fp8 e4m3 x e4m3)", 2 * BLOCKS * g, 2 * BLOCKS * g),
         (f"{BLOCKS} blocks fc1+fc2 wgrad (fp8 e4m3 x e5m2)", 2 * BLOCKS * g, 2 * BLOCKS * g),
         (f"{BLOCKS} blocks dgrad (fp8 e5m2 x e4m3; none for block 1 fc1)",
          (2 * BLOCKS - 1) * g, (2 * BLOCKS - 1) * g)]
MODEL, HW = common.print_flops(table, f"{6 * BLOCKS - 1} GEMMs of {T}x{D}x{F}, {g:.6e} each")


def quant(x, dtype, vmax):
    amax = jnp.max(jnp.abs(x.astype(jnp.float32)))
    s = jnp.maximum(amax, 1e-12) / vmax
    return jnp.clip(x.astype(jnp.float32) / s, -vmax, vmax).astype(dtype), s


DN = lambda cl, cr: (((cl,), (cr,)), ((), ()))  # noqa: E731


@jax.custom_vjp
def fp8_dot(x, w):
    return _fwd(x, w)[0]


def _fwd(x, w):
    x8, sx = quant(x, E4, E4_MAX)
    w8, sw = quant(w, E4, E4_MAX)
    y = jax.lax.dot_general(x8, w8, DN(1, 0), preferred_element_type=BF)
    return y * (sx * sw).astype(BF), (x8, sx, w8, sw)


def _bwd(res, gy):
    x8, sx, w8, sw = res
    g8, sg = quant(gy, E5, E5_MAX)
    dx = jax.lax.dot_general(g8, w8, DN(1, 1), preferred_element_type=BF) * (sg * sw).astype(BF)
    dw = jax.lax.dot_general(x8, g8, DN(0, 0), preferred_element_type=jnp.float32) * (sx * sg)
    return dx, dw


fp8_dot.defvjp(_fwd, _bwd)


def loss_fn(ws, x, target):
    for w1, w2 in ws:
        x = x + fp8_dot(jax.nn.gelu(fp8_dot(x, w1)), w2)
    return jnp.mean(jnp.square(x.astype(jnp.float32) - target.astype(jnp.float32)))


opt = optax.adamw(1e-4)


def step(ws, opt_state, x, target):  # named step: its XLA module is jit_step
    loss, grads = jax.value_and_grad(loss_fn)(ws, x, target)
    updates, opt_state = opt.update(grads, opt_state, ws)
    return optax.apply_updates(ws, updates), opt_state, loss


def init(key):
    ks = jax.random.split(key, 2 * BLOCKS + 2)
    ws = tuple((jax.random.normal(ks[2 * i], (D, F), jnp.float32) * D ** -0.5,
                jax.random.normal(ks[2 * i + 1], (F, D), jnp.float32) * F ** -0.5)
               for i in range(BLOCKS))
    x = jax.random.normal(ks[-2], (T, D), jnp.float32).astype(BF)
    t = (jax.random.normal(ks[-1], (T, D), jnp.float32)).astype(BF)
    return ws, x, t


ws, x, target = jax.jit(init)(jax.random.PRNGKey(0))
opt_state = jax.jit(opt.init)(ws)
jstep = jax.jit(step, donate_argnums=(0, 1))


def one(state):
    w, o, loss = jstep(state[0], state[1], x, target)
    return (w, o), loss


common.run(one, (ws, opt_state), MODEL, HW,
           after=lambda i, loss: print(f"step {i}: loss {float(loss):.6f}", flush=True))
