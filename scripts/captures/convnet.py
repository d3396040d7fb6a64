"""A small CNN training step: the capture workload of tests/data/convnet-*.

One jitted training step (forward, backward, SGD update) in bf16, NHWC / HWIO:
  conv1 3x3 64->64, relu; conv2 3x3 64->128, relu; conv3 3x3 128->128, relu;
  conv4 3x3 128->128, relu (all stride 1, SAME, no bias); global average pool;
  dense 128->10 (with bias); loss = mean softmax cross-entropy over the batch;
  params <- params - LR * grads.
Batch 64 of 56x56 images with 64 channels (a feature map, so that every conv suits cuDNN).
XLA lowers each convolution (forward, backward-input, backward-filter) to cuDNN
(`__cudnn$convForward`, `__cudnn$convBackwardInput`, `__cudnn$convBackwardFilter` custom
calls, kConvolution thunks); whether they run inside command buffers depends on
--xla_gpu_enable_command_buffer (see dump_rep/*.thunk_sequence_after_thunk_passes.txt): with
JAX 0.11.2's defaults they run outside, with =+CONVOLUTION inside. The kernels, instructions
and times (H100): tests/data/convnet-{cmdbuf,nocmdbuf,cudnn-cmdbuf}/README.md.
It compiles and warms up first (WARMUP steps), then runs STEPS steps, each with
block_until_ready, inside a cudaProfilerApi range (cuProfilerStart/Stop through ctypes).

Ground truth (printed to the log by formula): forward conv 2*N*H*W*Cout*Cin*KH*KW; backward
convs 2x that (data gradient and filter gradient, each as many FLOPs as the forward), except
conv1, whose data gradient is not needed (the input is no parameter): 1x; dense 2*N*K*C
forward, 2x that backward; the device name and compute capability; the wall time of each step.

Environment: STEPS (default 10), WARMUP (default 3), BATCH (default 64).
scripts/captures/capture-all.sh runs it as convnet-cmdbuf (XLA's defaults), convnet-nocmdbuf
(--xla_gpu_enable_command_buffer=) and convnet-cudnn-cmdbuf (convolutions in command
buffers: CONVNET_CMDBUF_FLAG, see capture-all.sh).
"""
import ctypes
import os
import time

import jax
import jax.numpy as jnp

STEPS = int(os.environ.get("STEPS", "10"))
WARMUP = int(os.environ.get("WARMUP", "3"))
B = int(os.environ.get("BATCH", "64"))
H, W, C0 = 56, 56, 64
CONVS = ((64, 64), (64, 128), (128, 128), (128, 128))  # (Cin, Cout), 3x3
K = 3
CLASSES = 10
LR = 0.01

dev = jax.devices()[0]
print(f"jax {jax.__version__}, device {dev.device_kind}, "
      f"compute capability {getattr(dev, 'compute_capability', '?')}, "
      f"platform {dev.platform}, devices {len(jax.devices())}", flush=True)
print(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')}", flush=True)

flops = {}
for i, (cin, cout) in enumerate(CONVS):
    f = 2 * B * H * W * cout * cin * K * K
    flops[f"conv{i + 1} forward ({cin}->{cout})"] = f
    flops[f"conv{i + 1} backward filter"] = f
    if i > 0:
        flops[f"conv{i + 1} backward data"] = f
cl = CONVS[-1][1]
flops["dense forward"] = 2 * B * cl * CLASSES
flops["dense backward (data + weights)"] = 2 * 2 * B * cl * CLASSES
for k, v in flops.items():
    print(f"ground truth FLOP/step {k}: {v:.6e}", flush=True)
conv_total = sum(v for k, v in flops.items() if k.startswith("conv"))
print(f"ground truth FLOP/step convs: {conv_total:.6e}; total {sum(flops.values()):.6e}",
      flush=True)

DN = ("NHWC", "HWIO", "NHWC")


def forward(params, img):
    x = img
    for k in params["convs"]:
        x = jax.lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=DN)
        x = jax.nn.relu(x)
    x = jnp.mean(x.astype(jnp.float32), axis=(1, 2)).astype(jnp.bfloat16)
    return x @ params["w"] + params["b"]


def loss_fn(params, img, labels):
    logits = forward(params, img).astype(jnp.float32)
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))


@jax.jit
def step(params, img, labels):
    loss, grads = jax.value_and_grad(loss_fn)(params, img, labels)
    params = jax.tree.map(lambda p, g: (p - LR * g).astype(p.dtype), params, grads)
    return params, loss


keys = jax.random.split(jax.random.PRNGKey(0), len(CONVS) + 3)
params = {
    "convs": [(jax.random.normal(k, (K, K, cin, cout), jnp.float32)
               * (2.0 / (K * K * cin)) ** 0.5).astype(jnp.bfloat16)
              for k, (cin, cout) in zip(keys, CONVS)],
    "w": (jax.random.normal(keys[-3], (cl, CLASSES), jnp.float32) * cl ** -0.5
          ).astype(jnp.bfloat16),
    "b": jnp.zeros((CLASSES,), jnp.bfloat16),
}
img = jax.random.normal(keys[-2], (B, H, W, C0), jnp.bfloat16)
labels = jax.random.randint(keys[-1], (B,), 0, CLASSES)
jax.block_until_ready((params, img, labels))

t = time.perf_counter()
for i in range(WARMUP):  # the first call compiles (and autotunes)
    params, loss = jax.block_until_ready(step(params, img, labels))
print(f"compiled and warmed up ({WARMUP} steps) in {time.perf_counter() - t:.2f} s; "
      f"loss {float(loss):.4f}", flush=True)

try:
    cuda = ctypes.CDLL("libcuda.so.1")
except OSError:  # no GPU here (a dry run on the CPU)
    cuda = None
if cuda:
    cuda.cuProfilerStart()
times = []
for i in range(STEPS):
    t = time.perf_counter()
    params, loss = jax.block_until_ready(step(params, img, labels))
    times.append(time.perf_counter() - t)
if cuda:
    cuda.cuProfilerStop()
total = sum(flops.values())
for i, s in enumerate(times):
    print(f"step {i}: {s * 1e3:.3f} ms wall, {total / s / 1e12:.1f} TFLOP/s", flush=True)
best = min(times)
print(f"best step {best * 1e3:.3f} ms wall -> {total / best / 1e12:.1f} TFLOP/s; "
      f"loss {float(loss):.4f}", flush=True)
