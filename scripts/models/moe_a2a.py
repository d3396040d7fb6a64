"""An expert-parallel mixture-of-experts training step: tokens dispatched to the experts'
devices with jax.lax.all_to_all inside shard_map, over all visible devices of one process
(2 GPUs for the capture): the workload of tests/data/models/moe-a2a/.

Mesh with one axis "ep" over NDEV devices. The dense parts (embedding, norms, router, lm
head, loss) are data parallel: batch rows sharded on "ep", their parameters replicated (XLA
all-reduces their gradients). Each MoE block runs in shard_map (GShard/MaxText-style
capacity-based dispatch, top-K of E experts, E/NDEV experts per device):
  h = RMSNorm(x) (local T/NDEV tokens); logits = h @ wr; vals, idx = top_k(logits, K);
  gates = softmax(vals); position of each (token, slot) in its expert's queue = running
  count (cumsum of one-hot); slots past the capacity C are dropped;
  buf[e, pos] = h[token]                      (E, C, D) scatter
  recv = all_to_all(buf, split_axis=0, concat_axis=1)   -> (E/NDEV, NDEV*C, D)
  y = SwiGLU experts as batched einsums over the capacity slots ('ecd,edf->ecf', E/NDEV x
      D x F, F x D)
  back = all_to_all(y, split_axis=1, concat_axis=0)    -> (E, C, D)
  x = x + sum_k gates * back[e, pos] (dropped slots give 0)
  C = ceil(CF * (T/NDEV) * K / E) per expert and source device.
optax.adamw; parameters and optimizer state donated; the expert weights sharded on E.

Ground truth printed by formula (per step, all devices): model FLOPs count the routed rows
(T*K when nothing is dropped; the program prints the kept rows of every profiled step), the
hardware FLOPs every capacity slot (NDEV*E*C = CF * T*K rows, padding included): experts
3 x 2*rows*D*F per layer forward, 2 x that backward; router 2*T*D*E and lm head 2*T*D*V,
backward 2x. Collectives per MoE block: forward 2 all-to-alls of E*C*D bf16 per device,
backward 2 more.

Environment: B (4), S (2048), D (1024), F (2048), E (8), K (2), CF (1.25), LAYERS (2),
V (8192), STEPS, WARMUP (common.py).
"""
import math
import os
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

B = common.env_int("B", 4)
S = common.env_int("S", 2048)
D = common.env_int("D", 1024)
F = common.env_int("F", 2048)
E = common.env_int("E", 8)
K = common.env_int("K", 2)
CF = float(os.environ.get("CF", "1.25"))
LAYERS = common.env_int("LAYERS", 2)
V = common.env_int("V", 8192)
devices = jax.devices()
NDEV = len(devices)
T = B * S
TL = T // NDEV
EL = E // NDEV
C = math.ceil(CF * TL * K / E)
R = T * K
SLOTS = NDEV * E * C
BF = jnp.bfloat16

common.describe("moe-a2a")
print(f"shapes: B={B} S={S} T={T} ({TL} per device) D={D} F={F} E={E} ({EL} per device) "
      f"top-k={K} CF={CF} capacity C={C} per expert per source device; routed rows {R}, "
      f"capacity slots {SLOTS} ({SLOTS // NDEV} per device); LAYERS={LAYERS} V={V}",
      flush=True)

mm = lambda m, n, k: 2 * m * n * k  # noqa: E731
table = [(f"{LAYERS} layers router fwd", LAYERS * mm(T, E, D), LAYERS * mm(T, E, D)),
         (f"{LAYERS} layers router bwd", 2 * LAYERS * mm(T, E, D), 2 * LAYERS * mm(T, E, D))]
for name, rows_m, rows_h in (("experts", R, SLOTS),):
    f_m = 3 * mm(rows_m, F, D)
    f_h = 3 * mm(rows_h, F, D)
    table.append((f"{LAYERS} layers {name} fwd (3 matmuls; model: routed rows, hardware: "
                  "capacity slots)", LAYERS * f_m, LAYERS * f_h))
    table.append((f"{LAYERS} layers {name} bwd (dgrad+wgrad)", 2 * LAYERS * f_m,
                  2 * LAYERS * f_h))
table.append(("lm head fwd", mm(T, V, D), mm(T, V, D)))
table.append(("lm head bwd", 2 * mm(T, V, D), 2 * mm(T, V, D)))
MODEL, HW = common.print_flops(table, "model assumes no dropped rows; see the kept rows below")
per_row = 3 * 3 * mm(1, F, D)
print(f"model expert FLOP per kept routed row (fwd+bwd, 3 matmuls): {per_row}", flush=True)
a2a_bytes = E * C * D * 2
print(f"all-to-all per device: {a2a_bytes} B in ({a2a_bytes // NDEV} B to each device), "
      f"{2 * LAYERS} forward + {2 * LAYERS} backward per step", flush=True)

mesh = Mesh(devices, ("ep",))
rep = NamedSharding(mesh, P())
rows_sh = NamedSharding(mesh, P("ep", None))
exp_sh = NamedSharding(mesh, P("ep"))


def init(key):
    ks = iter(jax.random.split(key, 16))
    n = lambda shape, s=0.02: jax.random.normal(next(ks), shape, jnp.float32) * s  # noqa: E731
    layers = [dict(norm=jnp.ones((D,)), wr=n((D, E)), wg=n((E, D, F)), wu=n((E, D, F)),
                   wd=n((E, F, D))) for _ in range(LAYERS)]
    return dict(embed=n((V, D)), layers=layers, norm=jnp.ones((D,)), wout=n((D, V)))


def rmsnorm(x, g):
    x32 = x.astype(jnp.float32)
    return (x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, -1, keepdims=True) + 1e-6) * g).astype(BF)


@partial(shard_map, mesh=mesh, in_specs=(P("ep", None), P(), P("ep"), P("ep"), P("ep")),
         out_specs=(P("ep", None), P("ep")))
def moe_block(h, wr, wg, wu, wd):
    logits = jnp.dot(h, wr.astype(BF), preferred_element_type=jnp.float32)  # (TL, E)
    vals, idx = jax.lax.top_k(logits, K)
    gates = jax.nn.softmax(vals, axis=-1)                                  # (TL, K)
    flat = idx.reshape(-1)                                                 # (TL*K,)
    onehot = jax.nn.one_hot(flat, E, dtype=jnp.int32)
    pos = jnp.sum((jnp.cumsum(onehot, axis=0) - 1) * onehot, axis=-1)     # queue position
    keep = pos < C
    tok = jnp.arange(TL * K) // K
    buf = jnp.zeros((E, C, D), BF).at[flat, pos].set(h[tok], mode="drop")
    recv = jax.lax.all_to_all(buf, "ep", 0, 1, tiled=True)                # (EL, NDEV*C, D)
    a = jnp.einsum("ecd,edf->ecf", recv, wg.astype(BF))
    b = jnp.einsum("ecd,edf->ecf", recv, wu.astype(BF))
    y = jnp.einsum("ecf,efd->ecd", jax.nn.silu(a) * b, wd.astype(BF))
    back = jax.lax.all_to_all(y, "ep", 1, 0, tiled=True)                   # (E, C, D)
    rows = back.at[flat, pos].get(mode="fill", fill_value=0)               # (TL*K, D)
    rows = rows * keep[:, None].astype(BF)
    out = jnp.sum(rows.reshape(TL, K, D).astype(jnp.float32) * gates[..., None], axis=1)
    kept = jnp.sum(onehot * keep[:, None], axis=0)                         # (E,)
    return out.astype(BF), kept[None]


def loss_fn(params, tokens, labels):
    x = params["embed"].astype(BF)[tokens.reshape(-1)]                    # (T, D), rows on ep
    x = jax.lax.with_sharding_constraint(x, rows_sh)
    kept = []
    for p in params["layers"]:
        h = rmsnorm(x, p["norm"])
        out, k = moe_block(h, p["wr"], p["wg"], p["wu"], p["wd"])
        x = x + out
        kept.append(k)
    logits = rmsnorm(x, params["norm"]) @ params["wout"].astype(BF)
    loss = optax.softmax_cross_entropy_with_integer_labels(
        logits.astype(jnp.float32), labels.reshape(-1)).mean()
    return loss, jnp.stack(kept)                                           # (LAYERS, NDEV, E)


opt = optax.adamw(1e-4)


def step(params, opt_state, tokens, labels):  # named step: its XLA module is jit_step
    (loss, kept), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, tokens, labels)
    updates, opt_state = opt.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss, kept


def leaf_sh(path, x):
    name = jax.tree_util.keystr(path)
    return exp_sh if any(f"'{w}'" in name for w in ("wg", "wu", "wd")) else rep


key = jax.random.PRNGKey(0)
p_sh = jax.tree_util.tree_map_with_path(leaf_sh, jax.eval_shape(init, key))
o_sh = jax.tree_util.tree_map_with_path(
    leaf_sh, jax.eval_shape(opt.init, jax.eval_shape(init, key)))
params = jax.jit(init, out_shardings=p_sh)(key)
opt_state = jax.jit(opt.init, out_shardings=o_sh)(params)
tk = jax.random.split(jax.random.PRNGKey(1))
data_sh = NamedSharding(mesh, P("ep", None))
tokens = jax.device_put(jax.random.randint(tk[0], (B, S), 0, V, jnp.int32), data_sh)
labels = jax.device_put(jax.random.randint(tk[1], (B, S), 0, V, jnp.int32), data_sh)
jstep = jax.jit(step, in_shardings=(p_sh, o_sh, data_sh, data_sh),
                out_shardings=(p_sh, o_sh, rep, rep), donate_argnums=(0, 1))


def one(state):
    p, o, loss, kept = jstep(state[0], state[1], tokens, labels)
    return (p, o), (loss, kept)


def show(i, aux):
    loss, kept = aux
    total = 0
    for layer, per_dev in enumerate(kept.tolist()):
        rows = sum(map(sum, per_dev))
        total += rows
        print(f"step {i}: layer {layer} kept rows per (source device, expert) {per_dev}; "
              f"kept {rows} of {R} routed, dropped {R - rows}", flush=True)
    print(f"step {i}: model expert FLOP from kept rows {total * per_row:.6e}; loss "
          f"{float(loss):.6f}", flush=True)


common.run(one, (params, opt_state), MODEL, HW, NDEV, after=show)
