"""A variational autoencoder trained in a jitted fori_loop over a whole epoch, shaped like the
JAX repository's mnist_vae example (encoder 784-512-512-(10, 10), decoder 10-512-512-784,
batch 32, momentum 0.9, 1,875 batches an epoch) on random binarized images of MNIST's shape
(no download), for the memory benchmark of a real graph-heavy capture: with XLA's defaults
the loop body runs as a CUDA graph, a few hundred thousand graph kernels in a few epochs.
EPOCHS epochs (default 2) are profiled through a cudaProfilerApi capture range, after one
warm-up epoch."""
import ctypes, os
import jax, jax.numpy as jnp

EPOCHS = int(os.environ.get("EPOCHS", "2"))
BATCH, IMAGES, STEP = 32, 60_000, 1e-3
BATCHES = IMAGES // BATCH


def dense(key, n_in, n_out):
    return (jax.random.normal(key, (n_in, n_out)) * (2.0 / n_in) ** 0.5, jnp.zeros(n_out))


def mlp(params, x):
    for i, (w, b) in enumerate(params):
        x = x @ w + b
        if i < len(params) - 1:
            x = jax.nn.relu(x)
    return x


def init(key):
    k = jax.random.split(key, 9)
    enc = [dense(k[0], 784, 512), dense(k[1], 512, 512)]
    heads = [dense(k[2], 512, 10), dense(k[3], 512, 10)]
    dec = [dense(k[4], 10, 512), dense(k[5], 512, 512), dense(k[6], 512, 784)]
    return enc, heads, dec


def elbo(key, params, images):
    enc, (mu_p, sig_p), dec = params
    h = jax.nn.relu(mlp(enc, images))
    mu = h @ mu_p[0] + mu_p[1]
    sigmasq = jax.nn.softplus(h @ sig_p[0] + sig_p[1])
    z = mu + jnp.sqrt(sigmasq) * jax.random.normal(key, mu.shape)
    logits = mlp(dec, z)
    logpdf = -jnp.sum(jnp.logaddexp(0.0, jnp.where(images, -1.0, 1.0) * logits))
    kl = -0.5 * jnp.sum(1.0 + jnp.log(sigmasq) - mu**2 - sigmasq)
    return logpdf - kl


@jax.jit
def run_epoch(key, params, velocity, images):
    def body(i, carry):
        key, params, velocity = carry
        key, elbo_key, data_key = jax.random.split(key, 3)
        batch = jax.lax.dynamic_slice_in_dim(images, i * BATCH, BATCH)
        batch = jax.random.bernoulli(data_key, batch)
        g = jax.grad(lambda p: -elbo(elbo_key, p, batch) / BATCH)(params)
        velocity = jax.tree.map(lambda v, g: 0.9 * v + g, velocity, g)
        params = jax.tree.map(lambda p, v: p - STEP * v, params, velocity)
        return key, params, velocity

    return jax.lax.fori_loop(0, BATCHES, body, (key, params, velocity))


key = jax.random.PRNGKey(0)
images = jax.random.uniform(jax.random.PRNGKey(1), (IMAGES, 784))
params = init(key)
velocity = jax.tree.map(jnp.zeros_like, params)
cuda = ctypes.CDLL("libcuda.so.1")
for epoch in range(EPOCHS + 1):
    if epoch == 1:
        cuda.cuProfilerStart()
    key, params, velocity = run_epoch(key, params, velocity, images)
    jax.block_until_ready(params)
    print("epoch", epoch, flush=True)
cuda.cuProfilerStop()
print("done")
