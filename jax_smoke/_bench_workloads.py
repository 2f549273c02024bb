"""The workloads of jax_smoke/bench.py, each as a JAX program and the same
math written in MLX (`mlx.core`, `mx.compile`d).

A workload is built by `make_jax(size)` / `make_mlx(size)`, which return a
Run: `call()` runs one call to readiness and returns its outputs (NumPy for
the numerics check), `outputs()` returns one call's outputs without waiting
(MLX: the lazy arrays whose graph is counted). Inputs come from a seeded
NumPy generator, so every process sees the same numbers.
"""
from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

EPS32 = float(np.finfo(np.float32).eps)


@dataclass
class Run:
    call: Callable[[], object]  # one call, synchronised; returns a pytree of arrays
    outputs: Callable[[], object] | None = None  # MLX: one call's unevaluated outputs
    units: int = 1  # MLX: evaluations per call (a Python loop of compiled steps)
    # JAX: one call's outputs -> the NumPy arrays the numerics check compares
    # (default: every output leaf, whole)
    digest: Callable[[object], list] | None = None


@dataclass
class Workload:
    name: str
    title: str
    make_jax: Callable
    make_mlx: Callable | None
    flops: Callable[[dict], float] | None
    # Normwise relative difference allowed between pjrtx and XLA:CPU per
    # output: chained sums of length K err by gamma_K each (Higham 3.5).
    rel: Callable[[dict], float]
    sizes: dict
    quick: dict | None  # None: not run with --quick
    unit: str = "ms"  # "ms" per call, or "tok/s"
    compile_time: bool = False  # measures jit(...).lower().compile()
    group: str = ""  # a name --only accepts for several rows (e.g. "allreduce")


def rng(seed=0):
    return np.random.default_rng(seed)


def normal(r, shape, scale=1.0):
    return (scale * r.standard_normal(shape)).astype(np.float32)


# ---------------------------------------------------------------- tiny call
def tiny_jax(s):
    import jax

    x = jax.device_put(np.arange(8, dtype=np.float32), s["device"])
    f = jax.jit(lambda x: x + 1)
    return Run(lambda: f(x).block_until_ready())


def tiny_mlx(s):
    import mlx.core as mx

    x = mx.array(np.arange(8, dtype=np.float32))
    f = mx.compile(lambda x: x + 1)

    def call():
        y = f(x)
        mx.eval(y)
        return y

    return Run(call, lambda: f(x))


# ---------------------------------------------------------------- MLP step
def mlp_params(s):
    r = rng(1)
    dims = s["dims"]
    ps = []
    for a, b in zip(dims[:-1], dims[1:]):
        ps += [normal(r, (a, b), 1 / math.sqrt(a)), np.zeros((b,), np.float32)]
    x = normal(r, (s["batch"], dims[0]))
    y = r.integers(0, dims[-1], s["batch"]).astype(np.int32)
    return ps, x, y


def mlp_flops(s):
    d = s["dims"]
    return 3 * 2 * s["batch"] * sum(a * b for a, b in zip(d[:-1], d[1:]))


def mlp_jax_step(lr=0.01):
    import jax
    import jax.numpy as jnp

    def loss(ps, x, y):
        h = x
        for i in range(0, len(ps) - 2, 2):
            h = jax.nn.relu(h @ ps[i] + ps[i + 1])
        logits = h @ ps[-2] + ps[-1]
        logp = jax.nn.log_softmax(logits)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    def step(ps, x, y):
        l, g = jax.value_and_grad(loss)(ps, x, y)
        return [p - lr * gp for p, gp in zip(ps, g)], l

    return step


def mlp_jax(s):
    import jax

    ps, x, y = mlp_params(s)
    ps, x, y = jax.device_put((ps, x, y), s["device"])
    f = jax.jit(mlp_jax_step())
    return Run(lambda: jax.block_until_ready(f(ps, x, y)))


def mlp_mlx(s, lr=0.01):
    import mlx.core as mx

    ps, x, y = mlp_params(s)
    ps = [mx.array(p) for p in ps]
    x, y = mx.array(x), mx.array(y)

    def loss(ps, x, y):
        h = x
        for i in range(0, len(ps) - 2, 2):
            h = mx.maximum(h @ ps[i] + ps[i + 1], 0)
        logits = h @ ps[-2] + ps[-1]
        logp = logits - mx.logsumexp(logits, axis=1, keepdims=True)
        return -mx.mean(mx.take_along_axis(logp, y[:, None], axis=1))

    vg = mx.value_and_grad(loss)

    @mx.compile
    def step(ps, x, y):
        l, g = vg(ps, x, y)
        return [p - lr * gp for p, gp in zip(ps, g)], l

    def call():
        out = step(ps, x, y)
        mx.eval(out)
        return out

    return Run(call, lambda: step(ps, x, y))


def mlp_compile_jax(s):
    import jax

    ps, x, y = mlp_params(s)
    ps, x, y = jax.device_put((ps, x, y), s["device"])

    def call():
        # A new function each time: JAX's caches are keyed on it, so every
        # call traces, lowers and compiles (the plugin's compile included).
        step = mlp_jax_step()
        return jax.jit(lambda *a: step(*a)).lower(ps, x, y).compile()

    return Run(call)


# ---------------------------------------------------------------- attention block
def attn_params(s):
    r = rng(2)
    d, f = s["d"], 4 * s["d"]
    p = {"wqkv": normal(r, (d, 3 * d), 1 / math.sqrt(d)), "wo": normal(r, (d, d), 1 / math.sqrt(d)),
         "w1": normal(r, (d, f), 1 / math.sqrt(d)), "w2": normal(r, (f, d), 1 / math.sqrt(f)),
         "g1": np.ones((d,), np.float32), "g2": np.ones((d,), np.float32)}
    x = normal(r, (s["batch"], s["seq"], d))
    return p, x


def attn_flops(s):
    b, t, d = s["batch"], s["seq"], s["d"]
    return 3 * b * t * (2 * 12 * d * d + 4 * t * d)


def attn_block(np_, p, x, heads, softmax, rsqrt):
    """One pre-norm transformer block written once for jnp and mx."""
    b, t, d = x.shape
    hd = d // heads

    def norm(v, g):
        mu = v.mean(axis=-1, keepdims=True)
        var = ((v - mu) ** 2).mean(axis=-1, keepdims=True)
        return (v - mu) * rsqrt(var + 1e-5) * g

    qkv = norm(x, p["g1"]) @ p["wqkv"]
    q, k, v = (qkv[..., i * d:(i + 1) * d].reshape(b, t, heads, hd).transpose(0, 2, 1, 3)
               for i in range(3))
    att = softmax((q @ k.transpose(0, 1, 3, 2)) * (1 / math.sqrt(hd)))
    o = (att @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
    h = x + o @ p["wo"]
    return h + np_.maximum(norm(h, p["g2"]) @ p["w1"], 0) @ p["w2"]


def attn_jax(s):
    import jax
    import jax.numpy as jnp

    p, x = jax.device_put(attn_params(s), s["device"])

    def loss(p, x):
        out = attn_block(jnp, p, x, s["heads"], lambda a: jax.nn.softmax(a, axis=-1), jax.lax.rsqrt)
        return jnp.mean(out ** 2)

    f = jax.jit(jax.value_and_grad(loss))
    return Run(lambda: jax.block_until_ready(f(p, x)))


def attn_mlx(s):
    import mlx.core as mx

    p, x = attn_params(s)
    p = {k: mx.array(v) for k, v in p.items()}
    x = mx.array(x)

    def loss(p, x):
        out = attn_block(mx, p, x, s["heads"], lambda a: mx.softmax(a, axis=-1), mx.rsqrt)
        return mx.mean(out ** 2)

    f = mx.compile(mx.value_and_grad(loss))

    def call():
        out = f(p, x)
        mx.eval(out)
        return out

    return Run(call, lambda: f(p, x))


# ---------------------------------------------------------------- Adam update
ADAM = dict(lr=1e-3, b1=0.9, b2=0.999, eps=1e-8)


def adam_data(s):
    r = rng(3)
    n, shape = s["tensors"], s["shape"]
    ps = [normal(r, shape) for _ in range(n)]
    gs = [normal(r, shape) for _ in range(n)]
    ms = [normal(r, shape, 0.1) for _ in range(n)]
    vs = [np.abs(normal(r, shape, 0.1)) for _ in range(n)]
    return ps, gs, ms, vs, np.float32(7.0)


def adam_update(np_, sqrt, ps, gs, ms, vs, t):
    a = ADAM
    out_p, out_m, out_v = [], [], []
    c1, c2 = 1 - a["b1"] ** t, 1 - a["b2"] ** t
    for p, g, m, v in zip(ps, gs, ms, vs):
        m = a["b1"] * m + (1 - a["b1"]) * g
        v = a["b2"] * v + (1 - a["b2"]) * g * g
        p = p - a["lr"] * (m / c1) / (sqrt(v / c2) + a["eps"])
        out_p.append(p), out_m.append(m), out_v.append(v)
    return out_p, out_m, out_v


def adam_jax(s):
    import jax
    import jax.numpy as jnp

    args = jax.device_put(adam_data(s), s["device"])
    f = jax.jit(lambda *a: adam_update(jnp, jnp.sqrt, *a))
    return Run(lambda: jax.block_until_ready(f(*args)))


def adam_mlx(s):
    import mlx.core as mx

    ps, gs, ms, vs, t = adam_data(s)
    args = ([mx.array(v) for v in ps], [mx.array(v) for v in gs], [mx.array(v) for v in ms],
            [mx.array(v) for v in vs], mx.array(t))
    f = mx.compile(lambda *a: adam_update(mx, mx.sqrt, *a))

    def call():
        out = f(*args)
        mx.eval(out)
        return out

    return Run(call, lambda: f(*args))


# ---------------------------------------------------------------- fori_loop
DECAY, SHIFT, EVAL_EVERY = 0.999, 0.001, 64


def loop_jax(s):
    import jax
    from jax import lax

    n = s["steps"]
    x = jax.device_put(np.linspace(-1, 1, 16, dtype=np.float32), s["device"])
    f = jax.jit(lambda x: lax.fori_loop(0, n, lambda i, c: c * DECAY + SHIFT, x))
    return Run(lambda: f(x).block_until_ready())


def loop_mlx(s):
    import mlx.core as mx

    n = s["steps"]
    x0 = mx.array(np.linspace(-1, 1, 16, dtype=np.float32))
    step = mx.compile(lambda x: x * DECAY + SHIFT)

    def call():
        x = x0
        for i in range(n):
            x = step(x)
            if i % EVAL_EVERY == EVAL_EVERY - 1:
                mx.eval(x)
        mx.eval(x)
        return x

    # Counted as one step's graph times the steps.
    return Run(call, lambda: step(x0), units=n)


# ---------------------------------------------------------------- buffer loop
# A loop whose body reads and writes a carried buffer at traced indices (the
# pattern of samplers, ODE solvers and decode loops): step i reads element
# (i * 7919) mod n and writes element i mod n.
BUF_STRIDE = 7919


def bufloop_jax(s):
    import jax
    from jax import lax

    n, steps = s["n"], s["steps"]
    xs = jax.device_put(np.linspace(-1, 1, n, dtype=np.float32), s["device"])

    def body(i, xs):
        return xs.at[i % n].set(xs[(i * BUF_STRIDE) % n] * 0.5 + 1.0)

    f = jax.jit(lambda xs: lax.fori_loop(0, steps, body, xs))
    return Run(lambda: f(xs).block_until_ready())


def bufloop_mlx(s):
    import mlx.core as mx

    n, steps = s["n"], s["steps"]
    x0 = mx.array(np.linspace(-1, 1, n, dtype=np.float32))

    # The indices as the host computes them, as an MLX user writes the loop.
    def body(xs, read, write):
        v = mx.slice(xs, read, (0,), (1,)) * 0.5 + 1.0
        return mx.slice_update(xs, v, write, (0,))

    step = mx.compile(body)

    def call():
        xs = x0
        for i in range(steps):
            xs = step(xs, mx.array((i * BUF_STRIDE) % n), mx.array(i % n))
            if i % EVAL_EVERY == EVAL_EVERY - 1:
                mx.eval(xs)
        mx.eval(xs)
        return xs

    return Run(call, lambda: step(x0, mx.array(1), mx.array(0)), units=steps)


# ---------------------------------------------------------------- Newton while
# A data-dependent while_loop with a float predicate: Newton's method for
# the square roots of 64 numbers, vmapped (each lane stops on its own
# tolerance; the batched loop runs until the slowest lane has converged).
def newton_jax(s):
    import jax
    import jax.numpy as jnp
    from jax import lax

    a = jax.device_put(np.linspace(0.5, 5000.0, s["n"], dtype=np.float32), s["device"])

    def root(a):
        def cond(st):
            x, it = st
            return (jnp.abs(x * x - a) > 1e-6 * a) & (it < 200)

        return lax.while_loop(cond, lambda st: (0.5 * (st[0] + a / st[0]), st[1] + 1), (a, 0))[0]

    f = jax.jit(jax.vmap(root))
    return Run(lambda: f(a).block_until_ready())


# ---------------------------------------------------------------- adaptive ODE
# An adaptive Runge-Kutta (Bogacki-Shampine 3(2)) solve of a damped
# oscillator written in plain JAX: a while loop over steps whose size comes
# from the error estimate, as diffrax-style solvers run.
def ode_jax(s):
    import jax
    import jax.numpy as jnp
    from jax import lax

    y0 = jax.device_put(np.array([1.0, 0.0], np.float32), s["device"])
    t_end = np.float32(s["t_end"])

    def rhs(y):
        return jnp.stack([y[1], -y[0] - 0.1 * y[1]])

    def solve(y0):
        def cond(st):
            t, y, h, n = st
            return (t < t_end) & (n < 100_000)

        def body(st):
            t, y, h, n = st
            h = jnp.minimum(h, t_end - t)
            k1 = rhs(y)
            k2 = rhs(y + 0.5 * h * k1)
            k3 = rhs(y + 0.75 * h * k2)
            y3 = y + h * (2.0 / 9.0 * k1 + 1.0 / 3.0 * k2 + 4.0 / 9.0 * k3)
            k4 = rhs(y3)
            y2 = y + h * (7.0 / 24.0 * k1 + 0.25 * k2 + 1.0 / 3.0 * k3 + 0.125 * k4)
            err = jnp.max(jnp.abs(y3 - y2)) / (1e-5 + 1e-5 * jnp.max(jnp.abs(y)))
            ok = err <= 1.0
            factor = jnp.clip(0.9 * (jnp.maximum(err, 1e-10)) ** (-1.0 / 3.0), 0.2, 5.0)
            return (jnp.where(ok, t + h, t), jnp.where(ok, y3, y), h * factor, n + 1)

        return lax.while_loop(cond, body, (np.float32(0), y0, np.float32(0.01), 0))

    f = jax.jit(solve)
    return Run(lambda: f(y0)[1].block_until_ready())


# ---------------------------------------------------------------- NumPyro NUTS
def nuts_jax(s):
    """NumPyro's NUTS on a small logistic regression: a while loop (the
    tree doubling) of data-dependent length per sample. No MLX column: MLX
    has no NUTS sampler."""
    import jax
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from numpyro.infer import MCMC, NUTS

    r = rng(3)
    x = r.standard_normal((s["data"], 3)).astype(np.float32)
    w_true = np.array([1.0, -2.0, 0.5], np.float32)
    y = (r.random(s["data"]) < 1 / (1 + np.exp(-x @ w_true))).astype(np.float32)

    def model(x, y):
        w = numpyro.sample("w", dist.Normal(jnp.zeros(3), 1.0).to_event(1))
        numpyro.sample("y", dist.Bernoulli(logits=x @ w), obs=y)

    x, y = jax.device_put((x, y), s["device"])
    mcmc = MCMC(NUTS(model), num_warmup=s["warmup"], num_samples=s["samples"],
                progress_bar=False, jit_model_args=True)
    key = jax.device_put(jax.random.key(0), s["device"])

    def call():
        with jax.default_device(s["device"]):
            mcmc.run(key, x, y)
        return jax.block_until_ready(jnp.mean(mcmc.get_samples()["w"], axis=0))

    return Run(call)


# ---------------------------------------------------------------- decode step
def decode_params(s):
    r = rng(4)
    d, L, V = s["d"], s["layers"], s["vocab"]
    p = {"emb": normal(r, (V, d), 0.1), "out": normal(r, (d, V), 1 / math.sqrt(d))}
    for i in range(L):
        p[f"wqkv{i}"] = normal(r, (d, 3 * d), 1 / math.sqrt(d))
        p[f"wo{i}"] = normal(r, (d, d), 1 / math.sqrt(d))
        p[f"w1{i}"] = normal(r, (d, 4 * d), 1 / math.sqrt(d))
        p[f"w2{i}"] = normal(r, (4 * d, d), 1 / math.sqrt(4 * d))
    cache = normal(r, (L, 2, s["heads"], s["ctx"], d // s["heads"]), 0.5)
    return p, cache


def decode_flops(s):
    d, L, V, c = s["d"], s["layers"], s["vocab"], s["ctx"]
    return 2 * (L * (12 * d * d + 2 * c * d) + d * V)


def decode_step(np_, ops, p, cache, tok, pos, s):
    """One token through `layers` blocks with a KV cache of `ctx` slots;
    positions past `pos` are masked. ops: update(cache, new, layer, kv, pos),
    take(emb, tok), softmax, argmax."""
    d, H = s["d"], s["heads"]
    hd = d // H
    h = ops["take"](p["emb"], tok)  # (d,)
    valid = np_.arange(s["ctx"]) <= pos
    for i in range(s["layers"]):
        qkv = h @ p[f"wqkv{i}"]
        q, k, v = (qkv[j * d:(j + 1) * d].reshape(H, 1, hd) for j in range(3))
        cache = ops["update"](cache, k, i, 0, pos)
        cache = ops["update"](cache, v, i, 1, pos)
        kc, vc = cache[i, 0], cache[i, 1]  # (H, ctx, hd)
        sc = (q @ kc.transpose(0, 2, 1)).reshape(H, s["ctx"]) * (1 / math.sqrt(hd))
        sc = np_.where(valid, sc, -1e30)
        a = ops["softmax"](sc)
        o = (a.reshape(H, 1, s["ctx"]) @ vc).reshape(d)
        h = h + o @ p[f"wo{i}"]
        h = h + np_.maximum(h @ p[f"w1{i}"], 0) @ p[f"w2{i}"]
    logits = h @ p["out"]
    return ops["argmax"](logits), logits, cache


def decode_jax(s):
    import jax
    import jax.numpy as jnp
    from jax import lax

    p, cache = jax.device_put(decode_params(s), s["device"])
    ops = {"take": lambda e, t: e[t], "softmax": lambda a: jax.nn.softmax(a, axis=-1),
           "argmax": lambda l: jnp.argmax(l).astype(jnp.int32),
           "update": lambda c, new, i, kv, pos: lax.dynamic_update_slice(
               c, new[None, None].astype(c.dtype), (i, kv, 0, pos, 0))}
    f = jax.jit(lambda p, c, t, pos: decode_step(jnp, ops, p, c, t, pos, s))
    tok0 = jax.device_put(np.int32(3), s["device"])
    pos0 = s["ctx"] // 2

    def call():
        out = f(p, cache, tok0, jax.device_put(np.int32(pos0), s["device"]))
        return jax.block_until_ready(out[:2])

    return Run(call)


def decode_mlx(s):
    import mlx.core as mx

    p, cache = decode_params(s)
    p = {k: mx.array(v) for k, v in p.items()}
    cache = mx.array(cache)

    def update(c, new, i, kv, pos):
        start = mx.concatenate([mx.array([i, kv, 0], mx.int32), pos.reshape(1),
                                mx.array([0], mx.int32)])
        return mx.slice_update(c, new[None, None], start, (0, 1, 2, 3, 4))

    ops = {"take": lambda e, t: mx.take(e, t, axis=0), "softmax": lambda a: mx.softmax(a, axis=-1),
           "argmax": lambda l: mx.argmax(l).astype(mx.int32), "update": update}
    f = mx.compile(lambda p, c, t, pos: decode_step(mx, ops, p, c, t, pos, s))
    tok0, pos0 = mx.array(3, mx.int32), mx.array(s["ctx"] // 2, mx.int32)

    def call():
        out = f(p, cache, tok0, pos0)
        mx.eval(out)
        return out[:2]

    return Run(call, lambda: f(p, cache, tok0, pos0))


# ---------------------------------------------------------------- Flax CNN
def cnn_data(s):
    r = rng(5)
    c1, c2, n = s["c1"], s["c2"], s["hw"]
    p = {"Conv_0": {"kernel": normal(r, (3, 3, 1, c1), 1 / 3), "bias": np.zeros((c1,), np.float32)},
         "Conv_1": {"kernel": normal(r, (3, 3, c1, c2), 1 / math.sqrt(9 * c1)),
                    "bias": np.zeros((c2,), np.float32)},
         "Dense_0": {"kernel": normal(r, ((n // 4) ** 2 * c2, 10), 1 / math.sqrt((n // 4) ** 2 * c2)),
                     "bias": np.zeros((10,), np.float32)}}
    x = normal(r, (s["batch"], n, n, 1))
    y = r.integers(0, 10, s["batch"]).astype(np.int32)
    return p, x, y


def cnn_flops(s):
    b, n, c1, c2 = s["batch"], s["hw"], s["c1"], s["c2"]
    fwd = 2 * b * (n * n * 9 * c1 + (n // 2) ** 2 * 9 * c1 * c2 + (n // 4) ** 2 * c2 * 10)
    return 3 * fwd


def cnn_jax(s, lr=0.01):
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    class CNN(nn.Module):
        @nn.compact
        def __call__(self, x):
            for c in (s["c1"], s["c2"]):
                x = nn.relu(nn.Conv(c, (3, 3))(x))
                x = nn.avg_pool(x, (2, 2), (2, 2))
            return nn.Dense(10)(x.reshape(x.shape[0], -1))

    model = CNN()
    p, x, y = jax.device_put(cnn_data(s), s["device"])

    def loss(p, x, y):
        logp = jax.nn.log_softmax(model.apply({"params": p}, x))
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    @jax.jit
    def step(p, x, y):
        l, g = jax.value_and_grad(loss)(p, x, y)
        return jax.tree_util.tree_map(lambda a, b: a - lr * b, p, g), l

    return Run(lambda: jax.block_until_ready(step(p, x, y)))


def cnn_mlx(s, lr=0.01):
    import mlx.core as mx

    p, x, y = cnn_data(s)
    p = {k: {n: mx.array(v) for n, v in d.items()} for k, d in p.items()}
    x, y = mx.array(x), mx.array(y)

    def conv(x, c):
        # Flax's HWIO kernel; MLX wants OHWI. SAME padding of a 3x3 is 1.
        return mx.conv2d(x, c["kernel"].transpose(3, 0, 1, 2), padding=1) + c["bias"]

    def pool(x):
        b, h, w, c = x.shape
        return x.reshape(b, h // 2, 2, w // 2, 2, c).mean(axis=(2, 4))

    def loss(p, x, y):
        h = pool(mx.maximum(conv(x, p["Conv_0"]), 0))
        h = pool(mx.maximum(conv(h, p["Conv_1"]), 0))
        logits = h.reshape(h.shape[0], -1) @ p["Dense_0"]["kernel"] + p["Dense_0"]["bias"]
        logp = logits - mx.logsumexp(logits, axis=1, keepdims=True)
        return -mx.mean(mx.take_along_axis(logp, y[:, None], axis=1))

    vg = mx.value_and_grad(loss)

    @mx.compile
    def step(p, x, y):
        l, g = vg(p, x, y)
        return {k: {n: p[k][n] - lr * g[k][n] for n in p[k]} for k in p}, l

    def call():
        out = step(p, x, y)
        mx.eval(out)
        return out

    return Run(call, lambda: step(p, x, y))


MLP = {"dims": [784, 512, 512, 10], "batch": 128}
MLP_Q = {"dims": [784, 64, 64, 10], "batch": 16}

WORKLOADS = [
    Workload("tiny", "jit(x + 1) f32[8], per call incl. readiness", tiny_jax, tiny_mlx, None,
             lambda s: 0.0, {}, {}),
    Workload("mlp", "MLP 784-512-512-10 SGD step, batch 128", mlp_jax, mlp_mlx, mlp_flops,
             lambda s: 4 * 3 * max(s["dims"]) * EPS32, MLP, MLP_Q),
    Workload("attention", "attention block fwd+bwd (b8 t128 d256 h4)", attn_jax, attn_mlx,
             attn_flops, lambda s: 4 * 6 * 4 * s["d"] * EPS32,
             {"batch": 8, "seq": 128, "d": 256, "heads": 4},
             {"batch": 2, "seq": 16, "d": 32, "heads": 4}),
    Workload("adam", "Adam update over 40 tensors 256x256", adam_jax, adam_mlx, None,
             lambda s: 16 * EPS32, {"tensors": 40, "shape": (256, 256)},
             {"tensors": 4, "shape": (16, 16)}),
    Workload("compile", "MLP step compile (trace+lower+compile)", mlp_compile_jax, None, None,
             lambda s: 0.0, MLP, MLP_Q, compile_time=True),
    Workload("loop", "fori_loop 1000 steps x*0.999+0.001 f32[16]", loop_jax, loop_mlx, None,
             lambda s: 2 * 2 * EPS32 / (1 - DECAY), {"steps": 1000}, {"steps": 50}),
    Workload("bufloop", "fori_loop 100,000 steps xs.at[i].set(xs[j]*0.5+1) f32[4096]",
             bufloop_jax, bufloop_mlx, None, lambda s: 0.0,
             {"n": 4096, "steps": 100_000}, {"n": 64, "steps": 200}),
    Workload("newton", "vmapped Newton sqrt while_loop, float predicate, f32[64]", newton_jax,
             None, None, lambda s: 4 * EPS32, {"n": 64}, {"n": 8}),
    # The step-size controller branches on rounding-level error estimates,
    # so two correct backends may accept different steps; both solutions
    # are within the solver's tolerance (1e-5 per step, ~t_end/h steps) of
    # the true one.
    Workload("ode", "adaptive RK3(2) ODE solve, while_loop over steps, t=0..20", ode_jax,
             None, None, lambda s: 5e-2, {"t_end": 20.0}, {"t_end": 5.0}),
    Workload("decode", "decode step, KV cache (2 layers d256 ctx256 vocab1000)", decode_jax,
             decode_mlx, decode_flops, lambda s: 4 * 3 * 4 * s["d"] * s["layers"] * EPS32,
             {"d": 256, "heads": 4, "layers": 2, "ctx": 256, "vocab": 1000},
             {"d": 32, "heads": 4, "layers": 1, "ctx": 16, "vocab": 50}, unit="tok/s"),
    Workload("cnn", "Flax CNN step (b64 28x28 conv16-conv32-dense10)", cnn_jax, cnn_mlx, cnn_flops,
             lambda s: 4 * 3 * 9 * max(s["c1"], s["c2"]) * EPS32,
             {"batch": 64, "hw": 28, "c1": 16, "c2": 32},
             {"batch": 4, "hw": 8, "c1": 4, "c2": 8}),
]

if importlib.util.find_spec("numpyro") is not None:  # an optional row
    # The two chains start alike but part ways by rounding within a few
    # hundred leapfrog steps, so the posterior means agree only within Monte
    # Carlo error: posterior sd of w ~ 1/sqrt(200 * 0.2) ~ 0.16, ESS >= 100
    # per chain gives a difference of means with sd ~ 0.16 * sqrt(2/100) ~
    # 0.023; 0.08 of max|mean| (~2) is about 7 such sds.
    WORKLOADS.append(
        Workload("nuts", "NumPyro NUTS, logistic regression (200 x 3), 200 warmup + 200 samples",
                 nuts_jax, None, None, lambda s: 0.08,
                 {"data": 200, "warmup": 200, "samples": 200}, None))
