"""A mixture-of-experts training step with a top-k router and jax.lax.ragged_dot over E
experts (dropless, sort-based dispatch): the workload of tests/data/models/moe-ragged*/.

Model, bf16 compute on f32 master parameters:
  x = embed[tokens]                                         (T = B*S tokens, width D)
  LAYERS x MoE block (Mixtral-style SwiGLU experts):
     h = RMSNorm(x); logits = h @ wr (D x E, f32 out); vals, idx = top_k(logits, K)
     gates = softmax(vals)                                  (T, K)
     order = argsort(idx.flat) (stable); rows = h[order // K]        (T*K routed rows, sorted
     group_sizes = bincount(idx.flat, E)                               by expert)
     y = ragged_dot(silu(ragged_dot(rows, wg)) * ragged_dot(rows, wu), wd)   (wg, wu: E x D x F;
                                                                         wd: E x F x D)
     x = x + sum_k gates * unsort(y)
  logits = RMSNorm(x) @ wout (D x V); loss = mean softmax cross-entropy (f32); optax.adamw.
The routing is learned (top-k of the router's logits), so the group sizes change from step
to step; the step returns them and the program prints them for every profiled step. The
routed rows are always T*K (dropless), so the model FLOPs do not depend on the split.

Ground truth printed by formula (per step): router 2*T*D*E, experts 3 x 2*(T*K)*D*F per layer
(the routed rows), lm head 2*T*D*V; backward 2 x forward for each (data and weight
gradients; every input depends on parameters). What XLA executes for ragged_dot is read from
the dump (tests/data/models/moe-ragged/README.md): the "dense" hardware column here assumes
each ragged_dot is computed for every row against every expert (E x the routed FLOPs), as a
masked dense lowering does.

Environment: B (4), S (2048), D (1024), F (2048), E (8), K (2), LAYERS (2), V (8192),
STEPS, WARMUP (common.py).
"""
import jax
import jax.numpy as jnp
import optax

import common

B = common.env_int("B", 4)
S = common.env_int("S", 2048)
D = common.env_int("D", 1024)
F = common.env_int("F", 2048)
E = common.env_int("E", 8)
K = common.env_int("K", 2)
LAYERS = common.env_int("LAYERS", 2)
V = common.env_int("V", 8192)
T = B * S
R = T * K
BF = jnp.bfloat16

common.describe("moe-ragged")
print(f"shapes: B={B} S={S} T={T} D={D} F={F} E={E} top-k={K} routed rows={R} "
      f"LAYERS={LAYERS} V={V}", flush=True)

mm = lambda m, n, k: 2 * m * n * k  # noqa: E731
table = []
for name, f in (("router", mm(T, E, D)),):
    table.append((f"{LAYERS} layers {name} fwd", LAYERS * f, LAYERS * f))
    table.append((f"{LAYERS} layers {name} bwd", 2 * LAYERS * f, 2 * LAYERS * f))
for name, f in (("experts wg", mm(R, F, D)), ("experts wu", mm(R, F, D)),
                ("experts wd", mm(R, D, F))):
    table.append((f"{LAYERS} layers {name} fwd (ragged_dot, routed rows; dense = E x)",
                  LAYERS * f, E * LAYERS * f))
    table.append((f"{LAYERS} layers {name} bwd (dgrad+wgrad; dense = E x)", 2 * LAYERS * f,
                  2 * E * LAYERS * f))
table.append(("lm head fwd", mm(T, V, D), mm(T, V, D)))
table.append(("lm head bwd", 2 * mm(T, V, D), 2 * mm(T, V, D)))
MODEL, HW = common.print_flops(table, "hardware column: ragged_dot computed densely over all "
                               "E experts; the real lowering is in the README")
routed = sum(m for label, m, _ in table if "experts" in label)
print(f"routed expert FLOP/step (model): {routed:.6e}; if dense over E={E}: {E * routed:.6e}",
      flush=True)


def init(key):
    ks = iter(jax.random.split(key, 16))
    n = lambda shape, s=0.02: jax.random.normal(next(ks), shape, jnp.float32) * s  # noqa: E731
    layers = [dict(norm=jnp.ones((D,)), wr=n((D, E)), wg=n((E, D, F)), wu=n((E, D, F)),
                   wd=n((E, F, D))) for _ in range(LAYERS)]
    return dict(embed=n((V, D)), layers=layers, norm=jnp.ones((D,)), wout=n((D, V)))


def rmsnorm(x, g):
    x32 = x.astype(jnp.float32)
    return (x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, -1, keepdims=True) + 1e-6) * g).astype(BF)


def moe(x, p):
    h = rmsnorm(x, p["norm"])
    logits = jnp.dot(h, p["wr"].astype(BF), preferred_element_type=jnp.float32)
    vals, idx = jax.lax.top_k(logits, K)                     # (T, K)
    gates = jax.nn.softmax(vals, axis=-1)
    flat = idx.reshape(-1)                                   # (T*K,)
    order = jnp.argsort(flat, stable=True)
    group_sizes = jnp.bincount(flat, length=E).astype(jnp.int32)
    rows = h[order // K]                                     # (T*K, D), sorted by expert
    a = jax.lax.ragged_dot(rows, p["wg"].astype(BF), group_sizes)
    b = jax.lax.ragged_dot(rows, p["wu"].astype(BF), group_sizes)
    y = jax.lax.ragged_dot(jax.nn.silu(a) * b, p["wd"].astype(BF), group_sizes)  # (T*K, D)
    y = jnp.zeros_like(y).at[order].set(y).reshape(T, K, D)  # back to (token, slot)
    out = jnp.sum(y.astype(jnp.float32) * gates[..., None], axis=1).astype(BF)
    return x + out, group_sizes


def loss_fn(params, tokens, labels):
    x = params["embed"].astype(BF)[tokens.reshape(-1)]       # (T, D)
    sizes = []
    for p in params["layers"]:
        x, gs = moe(x, p)
        sizes.append(gs)
    logits = rmsnorm(x, params["norm"]) @ params["wout"].astype(BF)
    loss = optax.softmax_cross_entropy_with_integer_labels(
        logits.astype(jnp.float32), labels.reshape(-1)).mean()
    return loss, jnp.stack(sizes)


opt = optax.adamw(1e-4)


def step(params, opt_state, tokens, labels):  # named step: its XLA module is jit_step
    (loss, sizes), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, tokens, labels)
    updates, opt_state = opt.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss, sizes


params = jax.jit(init)(jax.random.PRNGKey(0))
opt_state = jax.jit(opt.init)(params)
tk = jax.random.split(jax.random.PRNGKey(1))
tokens = jax.random.randint(tk[0], (B, S), 0, V, jnp.int32)
labels = jax.random.randint(tk[1], (B, S), 0, V, jnp.int32)
jstep = jax.jit(step, donate_argnums=(0, 1))


def one(state):
    p, o, loss, sizes = jstep(state[0], state[1], tokens, labels)
    return (p, o), (loss, sizes)


def show(i, aux):
    loss, sizes = aux
    for layer, gs in enumerate(sizes.tolist()):
        print(f"step {i}: layer {layer} group sizes {gs} (sum {sum(gs)}, max {max(gs)}, "
              f"min {min(gs)})", flush=True)
    print(f"step {i}: loss {float(loss):.6f}", flush=True)


common.run(one, (params, opt_state), MODEL, HW, after=show)
