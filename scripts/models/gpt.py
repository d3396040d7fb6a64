"""A GPT-style decoder training step with cuDNN fused attention: the workload of
tests/data/models/gpt-cudnn*/ and (FSDP=1, 2 GPUs) tests/data/models/fsdp-gpt/.

Model (pre-LayerNorm GPT-2 block without biases), bf16 compute on f32 master parameters:
  x = wte[tokens] + wpe[positions]                         (gathers)
  LAYERS x:  h = LN(x); q, k, v = split(h @ wqkv)          (D x 3D)
             a = jax.nn.dot_product_attention(q, k, v, is_causal=CAUSAL,
                                              implementation='cudnn')   (B, S, H, Dh)
             x = x + a @ wo                                (D x D)
             h = LN(x); x = x + gelu(h @ w1) @ w2          (D x F, F x D; F = MLP x D)
  logits = LN(x) @ wout (D x V); loss = mean softmax cross-entropy (f32)
  optax.adamw(1e-4) update; params and optimizer state donated.
The attention is XLA's cuDNN flash attention custom call (`__cudnn$fmhaSoftmax*` forward,
`__cudnn$fmhaSoftmaxBackward*` backward).

FSDP=1: the same step over all visible devices (2 for the capture) through a Mesh with one
axis "fsdp": every parameter and the optimizer state sharded on their first dimension, the
batch on its rows; in the forward each weight is constrained to be replicated
(with_sharding_constraint to P()), so XLA all-gathers it, and the weight gradients come back
reduce-scattered.

DP=1: data parallel over all visible devices: parameters and optimizer state replicated, the
batch sharded on its rows (mesh axis "dp"); XLA all-reduces the gradients.

ATTN=xla: XLA's attention (jax.nn.dot_product_attention implementation='xla'): the full S x S
scores with the mask applied, so its hardware FLOPs are the full rectangle's, forward and
backward (2 x forward, no recomputation).

Ground truth printed by formula (per step, all devices): matmuls 2*M*N*K each, every one
with a data gradient and a weight gradient in the backward (every matmul's input depends on
parameters: the embeddings), so backward = 2 x forward; attention forward 4*B*H*pairs*Dh
(pairs = S*S, causal S*(S+1)/2), backward model FLOPs 2 x forward (dQ, dK, dV, dP), hardware
2.5 x forward (the flash backward recomputes Q K^T).

MATMUL=f32: every dense matmul (qkv, out projection, MLP, lm head) takes f32 operands at
precision HIGHEST (the FP32 units), its result cast back to bf16; everything else as in the
default, where they take bf16 operands (tensor cores, f32 accumulation). The attention keeps
its bf16 operands.

VARLEN=1: each call of the step gets a batch of another length, S - 8 * (its call number)
tokens per row (the warm-up's calls included), so JAX traces and XLA compiles the step again at
every call, as a loop over unbucketed variable-length batches does. VARLEN=pad: the same
batches padded to S tokens with the padding masked out of the loss, so the step has one shape
and is compiled once. Both compute the loss as a masked mean (all ones for VARLEN=1); without
VARLEN the mask is not there.

Environment: B (8), S (2048), D (2048), H (16), LAYERS (2), V (32768), CAUSAL (1), MLP (4: the
MLP's width F = MLP x D), FSDP (0), DP (0), MATMUL (bf16), VARLEN (unset), STEPS, WARMUP, ATTN
(common.py).
"""
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import common

B = common.env_int("B", 8)
S = common.env_int("S", 2048)
D = common.env_int("D", 2048)
H = common.env_int("H", 16)
LAYERS = common.env_int("LAYERS", 2)
V = common.env_int("V", 32768)
CAUSAL = bool(common.env_int("CAUSAL", 1))
FSDP = bool(common.env_int("FSDP", 0))
DP = bool(common.env_int("DP", 0))
assert not (FSDP and DP), "FSDP=1 or DP=1, not both"
MATMUL = os.environ.get("MATMUL", "bf16")
assert MATMUL in ("bf16", "f32"), "MATMUL=bf16 or MATMUL=f32"
VARLEN = os.environ.get("VARLEN", "")
assert VARLEN in ("", "1", "pad"), "VARLEN=1 or VARLEN=pad"
MLP = common.env_int("MLP", 4)
F = MLP * D
DH = D // H
T = B * S
BF = jnp.bfloat16

common.describe("gpt" + (" fsdp" if FSDP else "") + (" dp" if DP else ""))
print(f"shapes: B={B} S={S} D={D} H={H} Dh={DH} LAYERS={LAYERS} V={V} F={F} (MLP={MLP}) "
      f"causal={CAUSAL} fsdp={FSDP} dp={DP} tokens/step={T} matmul={MATMUL} "
      f"varlen={VARLEN or 'no'}", flush=True)
if VARLEN:
    print(f"ground truth: call c (warm-up included, from 0) has {S} - 8c tokens per row"
          + (f", padded to {S} and masked: one compilation" if VARLEN == "pad" else
             ": a new shape, so a new compilation, at every call; the FLOPs below are at S"),
          flush=True)

# Ground truth (whole step, all devices).
mm = lambda m, n, k: 2 * m * n * k  # noqa: E731
per_layer = {"qkv": mm(T, 3 * D, D), "out proj": mm(T, D, D), "mlp up": mm(T, F, D),
             "mlp down": mm(T, D, F)}
attn_f = common.attention_flops(B, H, S, S, DH, CAUSAL)
attn_full = common.attention_flops(B, H, S, S, DH, False)
table = []
for name, f in per_layer.items():
    table.append((f"{LAYERS} layers {name} fwd", LAYERS * f, LAYERS * f))
    table.append((f"{LAYERS} layers {name} bwd (dgrad+wgrad)", 2 * LAYERS * f, 2 * LAYERS * f))
table.append(("lm head fwd", mm(T, V, D), mm(T, V, D)))
table.append(("lm head bwd", 2 * mm(T, V, D), 2 * mm(T, V, D)))
if common.ATTN == "xla":  # full S x S scores, masked; the backward from stored probabilities
    table.append((f"{LAYERS} layers attention fwd (XLA: full scores)", LAYERS * attn_f,
                  LAYERS * attn_full))
    table.append((f"{LAYERS} layers attention bwd (model 2x, hardware 2x the full scores)",
                  2 * LAYERS * attn_f, 2 * LAYERS * attn_full))
else:
    table.append((f"{LAYERS} layers attention fwd", LAYERS * attn_f, LAYERS * attn_f))
    table.append((f"{LAYERS} layers attention bwd (model 2x, hardware 2.5x)",
                  2 * LAYERS * attn_f, int(2.5 * LAYERS * attn_f)))
print(f"attention fwd per layer: {attn_f:.6e} FLOP ({'causal, lower triangle' if CAUSAL else 'full'};"
      f" the full S x S rectangle is {attn_full:.6e})", flush=True)
MODEL, HW = common.print_flops(
    table, "XLA attention: the full score rectangle, masked" if common.ATTN == "xla" else
    "hardware for causal attention assumes exactly the lower triangle; a flash kernel "
    "computes whole diagonal tiles")
nparams = V * D + S * D + LAYERS * (4 * D * D + 2 * D * F + 2 * D) + D + D * V  # no biases
print(f"parameters: {nparams} ({nparams / 1e6:.1f} M); adamw: elementwise over them", flush=True)

devices = jax.devices() if FSDP or DP else jax.devices()[:1]
NDEV = len(devices)
mesh = Mesh(devices, ("dp" if DP else "fsdp",))
shard0 = NamedSharding(mesh, P(mesh.axis_names[0]))
replicated = NamedSharding(mesh, P())


def init(key):
    ks = iter(jax.random.split(key, 4 + 4 * LAYERS))
    n = lambda shape, s=0.02: jax.random.normal(next(ks), shape, jnp.float32) * s  # noqa: E731
    layers = [dict(ln1=jnp.ones((D,)), wqkv=n((D, 3 * D)), wo=n((D, D)), ln2=jnp.ones((D,)),
                   w1=n((D, F)), w2=n((F, D))) for _ in range(LAYERS)]
    return dict(wte=n((V, D)), wpe=n((S, D)), layers=layers, lnf=jnp.ones((D,)),
                wout=n((D, V)))


def ln(x, g):
    x32 = x.astype(jnp.float32)
    mu = x32.mean(-1, keepdims=True)
    var = jnp.square(x32 - mu).mean(-1, keepdims=True)
    return ((x32 - mu) * jax.lax.rsqrt(var + 1e-5) * g).astype(BF)


def gathered(w, dtype=BF):
    """FSDP: the full weight for this use (an all-gather); a plain cast otherwise."""
    if FSDP:
        w = jax.lax.with_sharding_constraint(w, replicated)
    return w.astype(dtype)


def dense(h, w):
    """h @ w in bf16 (tensor cores), or MATMUL=f32: f32 operands at HIGHEST precision."""
    if MATMUL == "f32":
        return jnp.dot(h.astype(jnp.float32), gathered(w, jnp.float32),
                       precision=jax.lax.Precision.HIGHEST).astype(BF)
    return h @ gathered(w)


def loss_fn(params, tokens, labels, mask=None):
    s = tokens.shape[1]  # S, or this batch's length (VARLEN=1)
    x = gathered(params["wte"])[tokens] + gathered(params["wpe"])[None, :s]
    for p in params["layers"]:
        h = ln(x, gathered(p["ln1"]))
        qkv = dense(h, p["wqkv"]).reshape(B, s, 3, H, DH)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        a = jax.nn.dot_product_attention(q, k, v, is_causal=CAUSAL,
                                         implementation="xla" if common.ATTN == "xla" else "cudnn")
        x = x + dense(a.reshape(B, s, D), p["wo"])
        h = ln(x, gathered(p["ln2"]))
        x = x + dense(jax.nn.gelu(dense(h, p["w1"])), p["w2"])
    logits = dense(ln(x, gathered(params["lnf"])), params["wout"])
    losses = optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), labels)
    if mask is None:
        return losses.mean()
    return (losses * mask).sum() / mask.sum()


opt = optax.adamw(1e-4)


def step(params, opt_state, tokens, labels, mask=None):  # named step: its module is jit_step
    loss, grads = jax.value_and_grad(loss_fn)(params, tokens, labels, mask)
    updates, opt_state = opt.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


key = jax.random.PRNGKey(0)
params_shape = jax.eval_shape(init, key)
leaf_sh = lambda x: shard0 if FSDP and x.ndim >= 1 else replicated  # noqa: E731
p_sh = jax.tree.map(leaf_sh, params_shape)
params = jax.jit(init, out_shardings=p_sh)(key)
o_sh = jax.tree.map(leaf_sh, jax.eval_shape(opt.init, params_shape))
opt_state = jax.jit(opt.init, out_shardings=o_sh)(params)
data_sh = (NamedSharding(mesh, P("fsdp", None)) if FSDP else
           NamedSharding(mesh, P("dp", None)) if DP else replicated)
tk = jax.random.split(jax.random.PRNGKey(1))
tokens = jax.device_put(jax.random.randint(tk[0], (B, S), 0, V, jnp.int32), data_sh)
labels = jax.device_put(jax.random.randint(tk[1], (B, S), 0, V, jnp.int32), data_sh)
jstep = jax.jit(step, in_shardings=(p_sh, o_sh, data_sh, data_sh) + ((data_sh,) * bool(VARLEN)),
                out_shardings=(p_sh, o_sh, replicated), donate_argnums=(0, 1))
calls = [0]
if VARLEN:  # the batches as a host loader makes them: numpy arrays, put on the device per call
    tokens_np, labels_np = np.asarray(tokens), np.asarray(labels)


def batch():
    """This call's tokens, labels (and mask with VARLEN): the whole batch, or its first
    S - 8c tokens per row, as they are (VARLEN=1) or padded to S and masked (VARLEN=pad)."""
    if not VARLEN:
        return tokens, labels
    n = S - 8 * calls[0]
    assert n > 0, f"VARLEN: call {calls[0]} would have {n} tokens per row; raise S"
    calls[0] += 1
    if VARLEN == "1":
        t, lab, m = tokens_np[:, :n], labels_np[:, :n], np.ones((B, n), np.float32)
    else:
        m = np.zeros((B, S), np.float32)
        m[:, :n] = 1
        t, lab = np.where(m > 0, tokens_np, 0), labels_np
    return tuple(jax.device_put(a, data_sh) for a in (t, lab, m))


def one(state):
    p, o, loss = jstep(state[0], state[1], *batch())
    return (p, o), loss


common.run(one, (params, opt_state), MODEL, HW, NDEV,
           after=lambda i, loss: print(f"step {i}: loss {float(loss):.6f}", flush=True))
