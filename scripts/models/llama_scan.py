"""A Llama-style decoder training step, layers under jax.lax.scan with jax.checkpoint (full
rematerialisation): the workload of tests/data/models/llama-scan*/.

Model, bf16 compute on f32 master parameters, layer parameters stacked on a leading LAYERS
axis and scanned over (as MaxText's scan_layers):
  x = embed[tokens]                                        (gather)
  scan over LAYERS of jax.checkpoint(layer, prevent_cse=False) (policy: save nothing):
     h = RMSNorm(x); q = h @ wq (D x H*Dh); k = h @ wk, v = h @ wv (D x KVH*Dh, GQA);
     q, k = RoPE(q), RoPE(k)
     a = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation='cudnn')
     x = x + a @ wo                                        (H*Dh x D)
     h = RMSNorm(x); x = x + (silu(h @ wg) * (h @ wu)) @ wd   (SwiGLU: D x F, D x F, F x D)
  logits = RMSNorm(x) @ lm_head (D x V); loss = mean softmax cross-entropy (f32)
  optax.adamw(1e-4); parameters and optimizer state donated.

Ground truth printed by formula (per step): matmuls 2*M*N*K, backward 2 x forward (every
input depends on parameters); attention forward 4*B*H*Dh*S*(S+1)/2 (causal, GQA counted by
the H query heads), backward model 2x, hardware 2.5x forward. Rematerialisation: the
backward pass recomputes every layer's forward (its matmuls and its attention forward):
hardware FLOPs, not model FLOPs; it recomputes only what the gradients need, so
every matmul but wd's (the layer output itself is needed by no gradient) and the attention
forward (its output and softmax statistics feed the cuDNN backward).

Environment: B (4), S (2048), D (2048), H (16), KVH (4), F (5632), LAYERS (4), V (32768),
STEPS, WARMUP, ATTN (common.py).
"""
import jax
import jax.numpy as jnp
import optax

import common

B = common.env_int("B", 4)
S = common.env_int("S", 2048)
D = common.env_int("D", 2048)
H = common.env_int("H", 16)
KVH = common.env_int("KVH", 4)
F = common.env_int("F", 5632)
LAYERS = common.env_int("LAYERS", 4)
V = common.env_int("V", 32768)
DH = D // H
T = B * S
BF = jnp.bfloat16

common.describe("llama-scan")
print(f"shapes: B={B} S={S} D={D} H={H} KVH={KVH} Dh={DH} F={F} LAYERS={LAYERS} V={V} "
      f"tokens/step={T}", flush=True)

mm = lambda m, n, k: 2 * m * n * k  # noqa: E731
per_layer = {"wq": mm(T, H * DH, D), "wk": mm(T, KVH * DH, D), "wv": mm(T, KVH * DH, D),
             "wo": mm(T, D, H * DH), "wg": mm(T, F, D), "wu": mm(T, F, D), "wd": mm(T, D, F)}
attn_f = common.attention_flops(B, H, S, S, DH, True)
table = []
for name, f in per_layer.items():
    table.append((f"{LAYERS} layers {name} fwd", LAYERS * f, LAYERS * f))
    table.append((f"{LAYERS} layers {name} bwd (dgrad+wgrad)", 2 * LAYERS * f, 2 * LAYERS * f))
    # The backward recomputes what the gradients need: not wd's product (the layer's output
    # is needed by nothing in the backward), so wd's forward is not recomputed.
    if name != "wd":
        table.append((f"{LAYERS} layers {name} remat recompute", 0, LAYERS * f))
table.append(("lm head fwd", mm(T, V, D), mm(T, V, D)))
table.append(("lm head bwd", 2 * mm(T, V, D), 2 * mm(T, V, D)))
table.append((f"{LAYERS} layers attention fwd", LAYERS * attn_f, LAYERS * attn_f))
table.append((f"{LAYERS} layers attention fwd remat recompute", 0, LAYERS * attn_f))
table.append((f"{LAYERS} layers attention bwd (model 2x, hardware 2.5x)", 2 * LAYERS * attn_f,
              int(2.5 * LAYERS * attn_f)))
print(f"attention fwd per layer: {attn_f:.6e} FLOP (causal lower triangle, {H} query heads)",
      flush=True)
MODEL, HW = common.print_flops(table, "hardware = model + the scanned layers' forward "
                               "again but wd (remat) + attention backward at 2.5x")


def init(key):
    ks = iter(jax.random.split(key, 16))
    n = lambda shape, s=0.02: jax.random.normal(next(ks), shape, jnp.float32) * s  # noqa: E731
    layers = dict(attn_norm=jnp.ones((LAYERS, D)), wq=n((LAYERS, D, H * DH)),
                  wk=n((LAYERS, D, KVH * DH)), wv=n((LAYERS, D, KVH * DH)),
                  wo=n((LAYERS, H * DH, D)), mlp_norm=jnp.ones((LAYERS, D)),
                  wg=n((LAYERS, D, F)), wu=n((LAYERS, D, F)), wd=n((LAYERS, F, D)))
    return dict(embed=n((V, D)), layers=layers, norm=jnp.ones((D,)), lm_head=n((D, V)))


def rmsnorm(x, g):
    x32 = x.astype(jnp.float32)
    return (x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, -1, keepdims=True) + 1e-6) * g).astype(BF)


def rope(x):  # (B, S, heads, DH), rotate halves; the angles computed in the step (iota)
    inv = 1.0 / (10000.0 ** (jnp.arange(0, DH, 2, dtype=jnp.float32) / DH))
    ang = jnp.arange(S, dtype=jnp.float32)[:, None] * inv[None, :]  # (S, DH/2)
    COS, SIN = jnp.cos(ang)[None, :, None, :], jnp.sin(ang)[None, :, None, :]
    x32 = x.astype(jnp.float32)
    x1, x2 = x32[..., :DH // 2], x32[..., DH // 2:]
    return jnp.concatenate([x1 * COS - x2 * SIN, x1 * SIN + x2 * COS], -1).astype(BF)


def layer(x, p):
    h = rmsnorm(x, p["attn_norm"])
    q = rope((h @ p["wq"].astype(BF)).reshape(B, S, H, DH))
    k = rope((h @ p["wk"].astype(BF)).reshape(B, S, KVH, DH))
    v = (h @ p["wv"].astype(BF)).reshape(B, S, KVH, DH)
    a = jax.nn.dot_product_attention(q, k, v, is_causal=True,
                                     implementation=None if common.ATTN == "xla" else "cudnn")
    x = x + a.reshape(B, S, H * DH) @ p["wo"].astype(BF)
    h = rmsnorm(x, p["mlp_norm"])
    g = jax.nn.silu(h @ p["wg"].astype(BF)) * (h @ p["wu"].astype(BF))
    return x + g @ p["wd"].astype(BF), None


def loss_fn(params, tokens, labels):
    x = params["embed"].astype(BF)[tokens]
    x, _ = jax.lax.scan(jax.checkpoint(layer, prevent_cse=False), x, params["layers"])
    logits = rmsnorm(x, params["norm"]) @ params["lm_head"].astype(BF)
    return optax.softmax_cross_entropy_with_integer_labels(
        logits.astype(jnp.float32), labels).mean()


opt = optax.adamw(1e-4)


def step(params, opt_state, tokens, labels):  # named step: its XLA module is jit_step
    loss, grads = jax.value_and_grad(loss_fn)(params, tokens, labels)
    updates, opt_state = opt.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


params = jax.jit(init)(jax.random.PRNGKey(0))
opt_state = jax.jit(opt.init)(params)
tk = jax.random.split(jax.random.PRNGKey(1))
tokens = jax.random.randint(tk[0], (B, S), 0, V, jnp.int32)
labels = jax.random.randint(tk[1], (B, S), 0, V, jnp.int32)
jstep = jax.jit(step, donate_argnums=(0, 1))
nparams = sum(x.size for x in jax.tree.leaves(params))
print(f"parameters: {nparams} ({nparams / 1e6:.1f} M)", flush=True)


def one(state):
    p, o, loss = jstep(state[0], state[1], tokens, labels)
    return (p, o), loss


common.run(one, (params, opt_state), MODEL, HW,
           after=lambda i, loss: print(f"step {i}: loss {float(loss):.6f}", flush=True))
