"""Loops as compiled host code (csrc/backend/mlx/loops/) against XLA:CPU.

A latency-bound while loop runs whole as C++ built by the system compiler,
with its own copy of every op's semantics; these tests hold that copy to
XLA:CPU on loops of every kind the engine takes: counted and data-dependent,
nested, a switch in a loop, a scan with stacked outputs, buffers updated at
traced indices, gathers and scatters with indices out of range, sorts, dots,
integer edge cases, float64/int64, RNG, captured arrays and donated state.
Each runs with PJRTX_LOOPS=host (the engine forced) and auto (the
placement's choice), three times (the third replays).

Bodies are contracting or exactly rounded: a chaotic loop diverges between
any two correct backends (XLA:CPU compiled with two option sets gives two
answers). Integer and data-movement bodies, and float bodies whose products
are exact, are compared bit for bit. pjrtx fuses a * b + c into one FMA
where XLA:CPU does (tests/test_fma_contract.py), but XLA's fusion choices
are not always predictable, and its transcendental functions are its own
approximations, not libm's: bodies with inexact multiply-adds or
transcendentals are compared within a bound
derived from the map's contraction (a rounding apart per step, shrinking
by the map's slope).

The placement tests read PJRTX_TRACE's "loop host" / "loop mlx" lines of a
child process: a training step scanned over batches must stay on MLX.

The generated programs of test_host_differential.py also run in loop bodies
under PJRTX_LOOPS=host.
"""
from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import sys
import tempfile
import textwrap

os.environ.setdefault("JAX_PLATFORMS", "pjrtx,cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from jax import lax  # noqa: E402

from _procs import child_env, scoped_env as _env  # noqa: E402
from oracle import primitives_per_call  # noqa: E402


def _run(device, f, args, donate=()):
    placed = [jax.device_put(a, device) for a in args]
    jf = jax.jit(f, donate_argnums=donate)
    outs = []
    for _ in range(3):
        # Donated arguments are consumed: each run gets fresh copies.
        call = [jax.device_put(a, device) for a in args] if donate else placed
        outs.append([np.asarray(o) for o in jax.tree_util.tree_leaves(jf(*call))])
    return outs


def _fresh(f):
    """A new function object, so neither JAX's nor pjrtx's caches are shared
    between the settings compared."""
    def g(*a):
        return f(*a)
    return g


def check(f, *args, rtol=0.0, atol=0.0, donate=(), modes=("host", "auto")):
    want = _run(jax.devices("cpu")[0], _fresh(f), args, donate)[0]
    for mode in modes:
        with _env(PJRTX_LOOPS=mode):
            for run_no, got in enumerate(_run(jax.devices("pjrtx")[0], _fresh(f), args, donate), 1):
                assert len(got) == len(want)
                for k, (g, w) in enumerate(zip(got, want)):
                    assert g.dtype == w.dtype and g.shape == w.shape, (mode, k, g.dtype, w.dtype)
                    if rtol == 0 and atol == 0:
                        same = np.array_equal(g, w, equal_nan=(g.dtype.kind in "fc"))
                        assert same, f"PJRTX_LOOPS={mode} run {run_no} output {k}: {g} != {w}"
                    else:
                        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol,
                                                   err_msg=f"PJRTX_LOOPS={mode} run {run_no} output {k}")


# ---------------------------------------------------------------- counted loops

def test_buffer_loop_reads_and_writes_at_traced_indices():
    n, stride = 64, 7919

    def f(xs):
        def body(i, xs):
            return xs.at[i % n].set(xs[(i * stride) % n] * 0.5 + 1.0)
        return lax.fori_loop(0, 1000, body, xs)
    check(f, np.linspace(-1, 1, n, dtype=np.float32))


def test_scan_with_stacked_outputs_and_carry():
    def f(xs, c0):
        def step(c, x):
            c = c * 0.5 + x
            return c, (c * 2.0, jnp.int32(1) + x.astype(jnp.int32))
        return lax.scan(step, c0, xs)
    check(f, np.arange(40, dtype=np.float32).reshape(10, 4) - 7.25, np.zeros(4, np.float32))


def test_reverse_scan_and_unrolled_scan():
    def f(xs):
        a = lax.scan(lambda c, x: (c + x, c * x), 0.0, xs, reverse=True)
        b = lax.scan(lambda c, x: (c * 0.5 + x, c), 1.0, xs, unroll=3)
        return a, b
    check(f, np.linspace(-2, 2, 11, dtype=np.float32))


def test_zero_and_one_trip_loops():
    def f(x, n):
        a = lax.fori_loop(0, 0, lambda i, c: c + 1.0, x)
        b = lax.fori_loop(0, 1, lambda i, c: c * 3.0, x)
        c = lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 2.0), (0, x))
        return a, b, c
    check(f, np.float32(1.5), np.int32(0))
    check(f, np.float32(1.5), np.int32(5))


# ---------------------------------------------------------------- data-dependent loops

def test_newton_while_with_float_predicate():
    def f(a):
        def cond(s):
            x, it = s
            return (jnp.abs(x * x - a) > 1e-6 * a) & (it < 100)

        def body(s):
            x, it = s
            return 0.5 * (x + a / x), it + 1
        return lax.while_loop(cond, body, (a, 0))
    # The two backends' roundings of the body may differ (XLA's fusion
    # choices), so the test can flip one iteration near convergence, where
    # a step moves x by less than 1e-6 / 2 of it.
    check(f, np.float32(2.0), rtol=1e-6)
    check(f, np.float32(1e6), rtol=1e-6)


def test_vmapped_newton_root_find():
    def f(a):
        def one(a):
            return lax.while_loop(lambda s: (jnp.abs(s[0] * s[0] - a) > 1e-5 * a) & (s[1] < 50),
                                  lambda s: (0.5 * (s[0] + a / s[0]), s[1] + 1), (a, 0))
        return jax.vmap(one)(a)
    # As above: a lane may stop one converged iteration apart.
    check(f, np.linspace(0.5, 50, 16, dtype=np.float32), rtol=1e-5)


def test_collatz_integer_while():
    def f(n):
        def body(s):
            x, steps = s
            return jnp.where(x % 2 == 0, x // 2, 3 * x + 1), steps + 1
        return lax.while_loop(lambda s: s[0] != 1, body, (n, 0))
    check(f, np.int32(27))


# ---------------------------------------------------------------- nesting and branches

def test_nested_loops_and_switch_in_a_loop():
    def f(x):
        def inner(j, c):
            return c * 0.5 + j.astype(jnp.float32)

        def body(i, c):
            c = lax.fori_loop(0, i % 4, inner, c)
            return lax.switch(i % 3, [lambda c: c + 1.0, lambda c: c * 0.25, lambda c: -c], c)
        return lax.fori_loop(0, 30, body, x)
    check(f, np.array([1.0, -2.0, 3.5], np.float32))


def test_cond_with_out_of_range_switch_index():
    def f(x, k):
        def body(i, c):
            return lax.switch(k + i, [lambda c: c + 1, lambda c: c * 2, lambda c: c - 3], c)
        return lax.fori_loop(0, 5, body, x)
    for k in (-7, 0, 1, 9):
        check(f, np.int32(3), np.int32(k))


def test_while_inside_cond_inside_while():
    def f(x):
        def body(s):
            i, c = s
            c = lax.cond(c > 10.0, lambda c: lax.while_loop(lambda d: d > 1.0, lambda d: d * 0.5, c),
                         lambda c: c * 3.0, c)
            return i + 1, c
        return lax.while_loop(lambda s: s[0] < 20, body, (0, x))
    check(f, np.float32(0.7))


# ---------------------------------------------------------------- indexing

def test_gather_scatter_and_dynamic_slices_out_of_range():
    def f(xs, idx):
        def body(i, s):
            xs, acc = s
            j = idx[i % idx.shape[0]]
            # Out-of-range: the gather clamps, the scatter drops (JAX's modes).
            acc = acc + xs[j] + lax.dynamic_slice(xs, (j - 2,), (3,)).sum()
            xs = xs.at[j].add(1.0).at[jnp.array([j, j + 1])].multiply(0.5)
            xs = lax.dynamic_update_slice(xs, jnp.array([acc, -acc]) * 0.125, (j + 3,))
            return xs, acc
        return lax.fori_loop(0, 40, body, (xs, jnp.float32(0)))
    check(f, np.linspace(0, 1, 12, dtype=np.float32), np.array([0, 5, 11, -3, 14, 7, 100], np.int32))


def test_sort_argmax_and_matvec_in_a_loop():
    def f(m, v):
        def body(i, s):
            v, ks = s
            v = jnp.tanh(m @ v) * 0.5
            order = jnp.argsort(v)
            return jnp.sort(v)[order], ks.at[i].set(jnp.argmax(v))
        return lax.fori_loop(0, 20, body, (v, jnp.zeros(20, jnp.int32)))
    rng = np.random.default_rng(0)
    # tanh(.) * 0.5 contracts: |d/dv| <= 0.5 * ||m|| < 1 with ||m||_2 < 2.
    m = (rng.standard_normal((6, 6)) / 6).astype(np.float32)
    v = rng.standard_normal(6).astype(np.float32)
    check(f, m, v, rtol=1e-5, atol=1e-6)


def _nearest(q, dtype):
    """The rational q rounded once to dtype, to nearest, ties to even."""
    from fractions import Fraction
    c = np.array(float(q), dtype=dtype)  # within an ulp of q
    best = None
    for v in (np.nextafter(c, dtype(-np.inf)), c, np.nextafter(c, dtype(np.inf))):
        d = abs(Fraction(float(v)) - q)
        if best is None or d < best[0] or (d == best[0] and int(v.view(f"u{v.itemsize}")) % 2 == 0):
            best = (d, v)
    return best[1]


def _fma_chain_dot(a, b):
    """a @ b (2-D) as acc = fma(a[i, t], b[t, j], acc) for t in order:
    every step rounded once, exactly (fractions)."""
    from fractions import Fraction
    out = np.empty((a.shape[0], b.shape[1]), a.dtype)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            acc = a.dtype.type(0)
            for t in range(a.shape[1]):
                acc = _nearest(Fraction(float(acc)) + Fraction(float(a[i, t])) * Fraction(float(b[t, j])), a.dtype.type)
            out[i, j] = acc
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("form", ["matmul", "matvec", "transposed_lhs", "batched"])
def test_a_dot_in_a_loop_adds_each_product_with_one_fma_in_order(form, dtype):
    # The engine's dot is acc = fma(a, b, acc) over the contracted index in
    # order (cxx_prelude.h, h_dot_step): the rounding of XLA:CPU's dots in
    # loops on most small shapes and of MLX's CPU matmul, so a scan over a
    # matmul gives the same bits as the matmul outside it (flax's bridge
    # test_transforms asks exactly that). The order is asserted exactly
    # against a reference rounded once per step; XLA:CPU's dot emitter picks
    # its order by shape and CPU, so against XLA the bound is two sums'
    # rounding, 2 k u sum|a b|.
    rng = np.random.default_rng(5)
    dt = np.dtype(dtype)
    steps, m, k, n = 3, 4, 32, 32
    if form == "matmul":  # flax's case: (4, 32) @ (32, 32)
        a, b = rng.standard_normal((steps, m, k)), rng.standard_normal((steps, k, n))
        dot = jnp.matmul
        as2d = lambda x, y: [(x, y)]  # noqa: E731
    elif form == "matvec":
        a, b = rng.standard_normal((steps, 6, 9)), rng.standard_normal((steps, 9))
        dot = jnp.matmul
        as2d = lambda x, y: [(x, y[:, None])]  # noqa: E731
    elif form == "transposed_lhs":  # contracting dimension 0 of both
        a, b = rng.standard_normal((steps, 7, 3)), rng.standard_normal((steps, 7, 5))
        dot = lambda x, y: lax.dot_general(x, y, (((0,), (0,)), ((), ())))  # noqa: E731
        as2d = lambda x, y: [(x.T, y)]  # noqa: E731
    else:  # a batch dimension
        a, b = rng.standard_normal((steps, 2, 3, 11)), rng.standard_normal((steps, 2, 11, 4))
        dot = lambda x, y: jnp.einsum("bij,bjk->bik", x, y)  # noqa: E731
        as2d = lambda x, y: list(zip(x, y))  # noqa: E731
    a, b = a.astype(dt), b.astype(dt)

    def f(a, b):
        return lax.scan(lambda c, ab: (c, dot(*ab)), 0, (a, b))[1]

    with jax.enable_x64(dtype == "float64"):
        want = _run(jax.devices("cpu")[0], f, (a, b))[0][0]
        with _env(PJRTX_LOOPS="host"):
            runs = _run(jax.devices("pjrtx")[0], _fresh(f), (a, b))
    got = runs[0][0]
    assert all(np.array_equal(r[0], got) for r in runs)
    assert got.dtype == dt and got.shape == want.shape
    ref = np.stack([np.concatenate([_fma_chain_dot(x, y) for x, y in as2d(a[s], b[s])]).reshape(got.shape[1:])
                    for s in range(steps)])
    assert np.array_equal(got, ref), f"{form} {dtype}: {np.sum(got != ref)} of {got.size} differ from the FMA chain"
    # Against XLA:CPU: each side is within k u sum|a b| of the exact sum.
    absdot = np.stack([np.concatenate([np.abs(x).astype(np.float64) @ np.abs(y).astype(np.float64)
                                       for x, y in as2d(a[s], b[s])]).reshape(got.shape[1:])
                       for s in range(steps)])
    kk = {"matmul": k, "matvec": 9, "transposed_lhs": 7, "batched": 11}[form]
    u = np.finfo(dt).eps / 2
    assert np.all(np.abs(got.astype(np.float64) - want) <= 2 * kk * u * absdot), form


# ---------------------------------------------------------------- semantics at the edges

def test_integer_edges_in_a_loop():
    def f(a, b):
        def body(i, s):
            a, b, acc = s
            q = lax.div(a, b)            # b = 0 and INT_MIN / -1 included
            r = lax.rem(a, b)
            k = i.astype(a.dtype)  # counts up to 63: past every width here
            sh = lax.shift_left(a, k) ^ lax.shift_right_arithmetic(a, k * 9) ^ lax.shift_right_logical(a, k * 5)
            return jnp.roll(a, 1), jnp.roll(b, -1), acc + q + r + sh
        return lax.fori_loop(0, 8, body, (a, b, jnp.zeros_like(a)))
    i32 = np.iinfo(np.int32)
    a = np.array([7, -7, i32.min, i32.max, 0, 1, -1, 12345], np.int32)
    b = np.array([0, 2, -1, -3, 0, -1, 5, 0], np.int32)
    check(f, a, b)
    check(f, a.astype(np.uint32), b.astype(np.uint32))
    check(f, a.astype(np.int8), b.astype(np.int8))


def test_float_edges_and_converts_in_a_loop():
    def f(x):
        def body(i, s):
            x, acc_i, acc_u, acc_f = s
            x = jnp.roll(x, 1)
            return (x, acc_i + x.astype(jnp.int32), acc_u ^ x.astype(jnp.uint8),
                    jnp.maximum(acc_f, x) + jnp.minimum(x, 0.0) * 0.0)
        z = jnp.zeros(x.shape, jnp.int32)
        return lax.fori_loop(0, 9, body, (x, z, z.astype(jnp.uint8), jnp.full(x.shape, -1.0)))
    x = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 2.5, -2.5, 0.0, -0.0], np.float32)
    check(f, x)


def test_x64_loops():
    with jax.enable_x64(True):
        def f(x, k):
            def body(i, s):
                x, k = s
                return x * 0.75 + jnp.sqrt(jnp.abs(x)) * 1e-3, k * 6364136223846793005 + 1442695040888963407
            return lax.fori_loop(0, 200, body, (x, k))
        # x -> 0.75 x + 1e-3 sqrt|x| contracts to 1.6e-5 (slope 0.875 there);
        # XLA:CPU fuses the multiply-add into an FMA, one rounding apart per
        # step: at most 1 ulp / (1 - 0.875) = 8 ulp in all. Integers: exact.
        eps = np.finfo(np.float64).eps
        check(f, np.linspace(-3, 3, 7), np.arange(7, dtype=np.uint64), rtol=16 * eps)
        check(f, np.linspace(-3, 3, 7), np.arange(7, dtype=np.int64), rtol=16 * eps)


def test_transcendental_contracting_body():
    def f(x):
        # x -> 0.5 cos(x) + 0.1 exp(-x^2) contracts (|d/dx| <= 0.5 + 0.09),
        # so each step's few-ulp difference between libm and XLA's own
        # kernels shrinks: the total stays within a few ulp / (1 - 0.59).
        return lax.fori_loop(0, 100, lambda i, x: 0.5 * jnp.cos(x) + 0.1 * jnp.exp(-x * x), x)
    check(f, np.linspace(-4, 4, 9, dtype=np.float32), rtol=8 * 4 * 1.2e-7 / 0.41, atol=1e-7)


def test_cholesky_and_triangular_solves_in_a_loop():
    # A sampler's shape (numpyro's SA kernel factors its proposal covariance
    # each step): a batch of covariances refactored every step, lower and
    # upper, and solves from the left, transposed and from the right.
    def f(cov0, x):
        def body(i, c):
            cov, x = c
            lo = jnp.linalg.cholesky(cov)
            up = lax.linalg.cholesky(cov, symmetrize_input=False)
            up = jnp.swapaxes(up, -1, -2)
            y = lax.linalg.triangular_solve(lo, x[..., :, None], left_side=True, lower=True)[..., 0]
            z = lax.linalg.triangular_solve(up, x[..., :, None], left_side=True, lower=False,
                                            transpose_a=True)[..., 0]
            w = lax.linalg.triangular_solve(lo, x[..., None, :], left_side=False, lower=True)[..., 0, :]
            return 0.5 * cov + 0.5 * cov0, 0.2 * (y + z + w) + 1.0
        return lax.fori_loop(0, 30, body, (cov0 * 3.0, x))
    rng = np.random.default_rng(7)
    a = rng.standard_normal((2, 4, 4)).astype(np.float32)
    cov0 = a @ np.swapaxes(a, -1, -2) + 2 * np.eye(4, dtype=np.float32)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    # cov0's eigenvalues are >= 2, so ||L^-1|| <= 2^-0.5 and the map on x
    # contracts with slope <= 0.6 / 2^0.5 < 0.43. Each step's solves are
    # backward stable (a few ulp times cond(L) <= |cov0|^0.5 apart between
    # any two substitution orders); the total stays within that over
    # (1 - 0.43): 64 ulp covers it. atol, for a component near zero: 8 ulp
    # of the largest component (|x| stays within ~1-3 at the fixed point).
    check(f, cov0, x, rtol=64 * np.finfo(np.float32).eps, atol=1e-6)
    # A matrix that is not positive definite factors to NaN on both sides.
    bad = np.array([[1.0, 2.0], [2.0, 1.0]], np.float32)
    check(lambda m: lax.fori_loop(0, 2, lambda i, m: jnp.linalg.cholesky(m) + 0 * m, m), bad)


def test_threefry_random_in_a_loop():
    def f(key):
        def body(i, s):
            key, acc = s
            key, sub = jax.random.split(key)
            return key, acc + jax.random.randint(sub, (4,), 0, 1000)
        return lax.fori_loop(0, 50, body, (key, jnp.zeros(4, jnp.int32)))
    check(f, jax.random.key_data(jax.random.PRNGKey(42)))


RBG_SHAPES = [(), (1,), (5,), (8,), (3, 5), (5, 4), (7, 5), (3, 7, 5), (2, 3, 1), (0,), (3, 0)]


@pytest.mark.parametrize("alg", ["THREE_FRY", "PHILOX", "DEFAULT"])
def test_rng_bit_generator_in_a_loop(alg):
    # JAX's rbg keys and lax.rng_bit_generator: the key (u32[4], bitcast to
    # a u64[2] state and back) advances each step; every draw is folded into
    # the carry so that each step's bits count. Threefry's 32-bit layout
    # splits the first even dimension, else the largest; 8/16-bit words are
    # the low bits of 32-bit draws. Bit for bit against XLA:CPU, and the
    # loop runs whole on the host (no MLX primitive per call).
    algorithm = getattr(lax.RandomAlgorithm, "RNG_" + alg)

    def f(key):
        def body(i, s):
            key, accs = s
            out = []
            for shape, dt, acc in zip(RBG_SHAPES * 2, [jnp.uint32] * len(RBG_SHAPES) + [jnp.uint8] * len(RBG_SHAPES),
                                      accs):
                key, bits = lax.rng_bit_generator(key, shape, dtype=dt, algorithm=algorithm)
                out.append(acc ^ bits)
            return key, tuple(out)
        zeros = tuple(jnp.zeros(s, jnp.uint32) for s in RBG_SHAPES) + tuple(jnp.zeros(s, jnp.uint8) for s in RBG_SHAPES)
        return lax.fori_loop(0, 5, body, (key, zeros))

    keys = [np.array([0x12345678, 0x9ABCDEF0, 0x0F1E2D3C, 0x00000007], np.uint32),
            # A counter 16 below 2^64: the draws wrap it (Philox carries
            # into the high half, which for a u64[2] state is the key).
            np.array([0xDEADBEEF, 0x00C0FFEE, 0xFFFFFFF0, 0xFFFFFFFF], np.uint32)]
    for key in keys:
        check(f, key)
        with _env(PJRTX_LOOPS="host", PJRTX_HOST="off"):
            assert primitives_per_call(_fresh(f), key) == {}


@pytest.mark.parametrize("alg", ["THREE_FRY", "PHILOX"])
def test_rng_bit_generator_64_bit_words_in_a_loop(alg):
    algorithm = getattr(lax.RandomAlgorithm, "RNG_" + alg)
    with jax.enable_x64(True):
        def f(key):
            def body(i, s):
                key, acc, facc = s
                key, bits = lax.rng_bit_generator(key, (3, 5), dtype=jnp.uint64, algorithm=algorithm)
                key, u16 = lax.rng_bit_generator(key, (5, 3), dtype=jnp.uint16, algorithm=algorithm)
                return key, acc ^ bits ^ u16.astype(jnp.uint64).T, facc + (bits >> 11).astype(jnp.float64)
            return lax.fori_loop(0, 7, body, (key, jnp.zeros((3, 5), jnp.uint64), jnp.zeros((3, 5))))
        key = np.array([0xDEADBEEF, 0x00C0FFEE, 0xFFFFFFF0, 0xFFFFFFFF], np.uint32)
        check(f, key)  # the sums of 53-bit integers are exact
        with _env(PJRTX_LOOPS="host", PJRTX_HOST="off"):
            assert primitives_per_call(_fresh(f), key) == {}


_EDGES = np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, 3e38], np.float32)


def _complex_edges(dtype):
    z = np.empty(len(_EDGES) ** 2, dtype)
    z.real = np.repeat(_EDGES, len(_EDGES))
    z.imag = np.tile(_EDGES, len(_EDGES))
    return z


def _complex_ops(a, b, n, m):
    # Every complex op the engine takes, on every pair of edge values (0,
    # -0, inf, NaN, near-overflow parts): + - * part by part, negation,
    # == and !=, real/imag/complex, converts into complex from ints, bools
    # and floats, select and indexing of a complex buffer. The loop runs
    # them on the state so they sit in the body.
    def body(i, s):
        prod, tot, diff, neg, eq, parts, conv, picked = s
        prod = a * b
        tot = a + b
        diff = a - b
        neg = -a
        eq = (a == b) | ((a != prod) & (jnp.real(a) > 0))
        parts = lax.complex(jnp.imag(prod), jnp.real(tot))
        conv = (n.astype(a.dtype) + (n > 2).astype(a.dtype) - m.astype(a.dtype)
                + jnp.real(a)[:8].astype(a.dtype))
        picked = jnp.where(eq, lax.dynamic_slice(jnp.concatenate([a, b]), (i * 5,), (a.shape[0],)), diff)
        return prod, tot, diff, neg, eq, parts, conv, picked
    init = (a, a, a, a, jnp.zeros(a.shape, bool), a, jnp.zeros(8, a.dtype), a)
    return lax.fori_loop(0, 4, body, init)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_ops_at_the_edges_in_a_loop(dtype):
    # Bit for bit (NaNs equal): each part of each result is one IEEE
    # operation, or (a product's parts) one product fused into another's
    # sum, as XLA:CPU computes them on FMA hardware: (inf + 3e38i)(-2 + 1.5i)
    # is (-inf, inf) there, (-inf, NaN) unfused.
    ctx = jax.enable_x64(True) if dtype == np.complex128 else contextlib.nullcontext()
    with ctx:
        probe = np.array([np.inf + 0j], dtype)
        probe.imag = np.finfo(np.dtype(dtype).type(0).real.dtype).max / 1.1
        xla = np.asarray(jax.jit(lambda a, b: a * b)(jax.device_put(probe, jax.devices("cpu")[0]),
                                                    np.array([-2 + 1.5j], dtype)))
        if np.isnan(xla.imag[0]):
            pytest.skip("this CPU has no FMA: XLA:CPU rounds a complex product's parts unfused here")
        a = _complex_edges(dtype)
        b = np.roll(a, 13)
        n = np.arange(-4, 4, dtype=np.int32)
        m = np.linspace(-2.5, 1e30, 8).astype(np.float32)
        check(_complex_ops, a, b, n, m)
        with _env(PJRTX_LOOPS="host", PJRTX_HOST="off"):
            assert primitives_per_call(_fresh(_complex_ops), a, b, n, m) == {}


def test_a_contracting_complex_recurrence_in_a_loop():
    # z -> w z + c with |w| = 0.56: a rounding apart per step (an FMA on
    # one side) shrinks by 0.56 a step, so the results stay within
    # 1 / (1 - 0.56) ~ 2.3 roundings of |z| (8 eps allowed, per part).
    def f(z, c):
        w = jnp.complex64(0.5 + 0.25j)
        return lax.fori_loop(0, 300, lambda i, z: w * z + c, z)
    z = (np.linspace(-3, 3, 16) + 1j * np.linspace(2, -1, 16)).astype(np.complex64)
    c = (np.linspace(0.1, 1.0, 16) - 0.3j).astype(np.complex64)
    want = _run(jax.devices("cpu")[0], _fresh(f), (z, c))[0][0]
    check(f, z, c, atol=8 * np.finfo(np.float32).eps * np.abs(want).max())
    with _env(PJRTX_LOOPS="host", PJRTX_HOST="off"):
        assert primitives_per_call(_fresh(f), z, c) == {}


def test_complex_ops_the_engine_lacks_keep_the_loop_on_mlx_and_say_so():
    prog = """
        f = jax.jit(lambda z: lax.fori_loop(0, 3, lambda i, z: z / (z + 2.0), z))
        print(np.asarray(f(jnp.ones(4, jnp.complex64))))
    """
    lines = _placements(_trace_of(prog, {"PJRTX_LOOPS": "host"}))
    assert lines and all("loop mlx" in ln and "on complex" in ln for ln in lines), lines


def _scramble(ys):
    # Enough ops (over 48) that a callee holding them is emitted once as a
    # C++ function rather than inlined at each call site.
    for c in range(1, 20):
        ys = (ys * 3 + c) ^ (ys >> 2)
    return ys


def test_a_function_called_from_several_places_in_a_loop():
    # A nested jit is a func.call; a big one called at three places (once
    # from another callee) is emitted once as a C++ function over views of
    # its operands: big (heap) and small buffers, a result returned twice, an
    # operand that is also loop state the caller goes on reading.
    @jax.jit
    def g(xs, k):
        ys = _scramble(xs.at[k % xs.shape[0]].add(k.astype(xs.dtype)))
        return ys, ys, (k * 3 + 1) % 1000

    @jax.jit
    def h(xs, k):
        return g(xs[::-1], k)[0]

    def f(xs, k):
        def body(i, s):
            xs, k = s
            a, b, k2 = g(xs, k + i)
            c, _, k3 = g(a, k2)
            return h(b + c, k3) - xs, k3
        return lax.fori_loop(0, 20, body, (xs, k))
    check(f, np.arange(600, dtype=np.int32), np.int32(7))


def _emitted_source(f, args, tmp_path) -> str:
    """The C++ the engine emits for f's loops: a compiler wrapper (CXX) keeps
    a copy of each source it builds, in a cache folder of this test's own."""
    dump = tmp_path / "src"
    dump.mkdir()
    wrapper = tmp_path / "cxx.sh"
    real = os.environ.get("CXX") or "c++"
    wrapper.write_text('#!/bin/sh\nfor a in "$@"; do case "$a" in *.cc) cp "$a" '
                       f'{shlex.quote(str(dump))}/ ;; esac; done\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    with _env(CXX=str(wrapper), PJRTX_CACHE_DIR=str(tmp_path / "cache"), PJRTX_LOOPS="host"):
        placed = [jax.device_put(a, jax.devices("pjrtx")[0]) for a in args]
        jax.block_until_ready(jax.jit(_fresh(f))(*placed))
    return "\n".join(p.read_text() for p in sorted(dump.glob("*.cc")))


def test_a_big_callee_is_emitted_once_and_a_small_one_inlined_at_each_site(tmp_path):
    # jnp.remainder is a nested jit of a dozen ops: inlined at each site, its
    # constant divisor reaches the C++ compiler (a mask, not a division).
    @jax.jit
    def big(xs):
        return _scramble(xs)

    def f(xs, k):
        def body(i, s):
            xs, k = s
            n = xs.shape[0]
            return (big(xs) - big(xs[::-1])).at[i % n].set(xs[(i * 7919) % n]), (k * 7919 + i) % 4096
        return lax.fori_loop(0, 5, body, (xs, k))
    args = (np.arange(64, dtype=np.int32), np.int32(11))
    src = _emitted_source(f, args, tmp_path)
    outlined = re.findall(r"static void fn\d+_(\w+)\(", src)
    assert [n for n in outlined if "big" in n] and not [n for n in outlined if "remainder" in n], outlined
    check(f, *args)


def test_big_callees_called_once_are_split_out_and_identical_ones_shared(tmp_path):
    # A big callee called once over small buffers becomes a function of its
    # own (a sampler's body is otherwise one C++ function whose build time
    # grows faster than its size); two callees with the same body (JAX
    # names copies f, f_0, ...) share one; a big callee over a buffer past
    # 4 KiB called once stays inlined, free to update it in place.
    def scramble_a(xs):
        return _scramble(xs)

    def scramble_b(xs):
        return _scramble(xs)
    first, second = jax.jit(scramble_a), jax.jit(scramble_b)
    third = jax.jit(lambda big: _scramble(big))

    def f(xs, big):
        def body(i, s):
            xs, big = s
            return first(xs + i) - second(xs), third(big.at[i].add(1))
        return lax.fori_loop(0, 10, body, (xs, big))
    args = (np.arange(16, dtype=np.int32), np.arange(2048, dtype=np.int32))
    src = _emitted_source(f, args, tmp_path)
    defined = re.findall(r"static void (fn\d+_\w+)\(", src)
    assert len(defined) == 1 and "scramble_" in defined[0], defined
    assert len(re.findall(rf"\b{defined[0]}\(", src)) == 3, src[-3000:]  # the definition and two calls
    check(f, *args)


# ---------------------------------------------------------------- captured values and donation

def test_captured_array_and_donated_state():
    w = np.linspace(0.1, 0.9, 8, dtype=np.float32)

    def f(x):
        return lax.fori_loop(0, 25, lambda i, c: c * jnp.asarray(w) + 1.0, x)
    # c -> w c + 1 contracts by w <= 0.9; an FMA on XLA's side is one
    # rounding apart per step: at most 1 ulp / (1 - 0.9) = 10 ulp.
    check(f, np.ones(8, np.float32), donate=(0,), rtol=20 * np.finfo(np.float32).eps)


def test_small_captured_constants_are_written_into_the_code_and_inputs_are_not_copied(tmp_path):
    # Constants that cond and body share are hoisted out of the loop by the
    # frontend (one value for both); small ones go into the emitted C++ as
    # literals (the C++ compiler folds them), so the function reads only the
    # loop's operands that are not constant splats. A loop over arguments and
    # constants alone (a vmapped counter's broadcast zeros included) runs at once
    # on the executor (MLX evaluates nothing); one with an operand computed
    # in the same program is one MLX node, and only that operand is made
    # contiguous (constants and arguments are read as they are).
    third = np.float32(0.3330078125)  # exact in float32: F(0x3eaa8000u)

    def loop(x):
        def cond(c):
            s, x, n = c
            return (s < 20.0) & (n < 2**31 - 1) & jnp.all(x != np.inf)

        def body(c):
            s, x, n = c
            y = x * third + jnp.float32(-0.0) - (20.0 - s)
            return s + jnp.minimum(third, 20.0 - s), jnp.where(jnp.isnan(y), np.inf, y), n + 1
        return lax.while_loop(cond, body, (jnp.float32(0), x, jnp.int32(-7)))

    def computed(x):
        return loop(jnp.sin(x))

    def vmapped(x):
        # vmap's counter starts as broadcast_in_dim(0): an operand in the code.
        def root(a):
            def cond(st):
                x, it = st
                return (jnp.abs(x * x - a) > 1e-6 * a) & (it < 200)
            # The root only: an iterate near the stopping threshold may take
            # one more step on one backend.
            return lax.while_loop(cond, lambda st: (0.5 * (st[0] + a / st[0]), st[1] + 1), (a, 0))[0]
        return jax.vmap(root)(x)
    roots = (np.linspace(0.5, 5000.0, 64, dtype=np.float32),)
    args = (np.array([-2.0, -0.0, 0.0, 0.5, np.nan, 3.0, -7.5, 1e4], np.float32),)
    src = _emitted_source(loop, args, tmp_path)
    for lit in ("F(0x3eaa8000u)", "F(0x80000000u)", "F(0x7f800000u)", "F(0x41a00000u)", "0x7fffffffull"):
        assert lit in src, (lit, src[-3000:])
    # The constant initial values (0.0 and -7) start in the code too: only x
    # is passed.
    assert sorted({int(k) for k in re.findall(r"\bin\[(\d+)\]", src)}) == [0]
    check(loop, *args)
    # The NaN lane becomes inf in the first step, which ends the loop: each
    # output is sin(x) / 3 - 20 computed once, from a sin that may differ by
    # an ulp between the backends and an XLA FMA one rounding apart: a few
    # eps of the result.
    check(computed, *args, rtol=8 * np.finfo(np.float32).eps)
    # Newton's map for sqrt rounds differently with and without an FMA; it
    # converges quadratically, so both stop within an ulp or two of the root.
    check(vmapped, *roots, rtol=4 * np.finfo(np.float32).eps)
    with _env(PJRTX_LOOPS="host", PJRTX_HOST="off"):
        assert primitives_per_call(_fresh(loop), *args) == {}
        assert primitives_per_call(_fresh(vmapped), *roots) == {}
        hist = primitives_per_call(_fresh(computed), *args)
        assert hist.get("pjrtx_host_loop") == 1 and hist.get("Contiguous", 0) <= 1, hist


# ---------------------------------------------------------------- placement

def _trace_of(program: str, env: dict) -> str:
    code = textwrap.dedent("""
        import jax, jax.numpy as jnp, numpy as np
        from jax import lax
    """) + textwrap.dedent(program)
    # The child imports the same pjrtx as this process (installed in CI, the
    # built checkout in development) and runs outside the checkout, whose
    # source tree would otherwise shadow an installed package.
    full = child_env(PJRTX_TRACE="1", JAX_PLATFORMS="pjrtx,cpu", **env)
    r = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True,
                       timeout=600, cwd=tempfile.gettempdir())
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stderr


SMALL_LOOP = """
    f = jax.jit(lambda x: lax.fori_loop(0, 100, lambda i, c: c * 0.5 + 1.0, x))
    print(np.asarray(f(jnp.ones(16))))
"""

TRAINING_SCAN = """
    # A training step (an MLP layer on a 128-row batch) scanned over batches.
    def step(w, batch):
        def loss(w):
            return jnp.mean(jnp.tanh(batch @ w) ** 2)
        return w - 0.01 * jax.grad(loss)(w), loss(w)
    w = jnp.ones((256, 256)) * 0.01
    xs = jnp.ones((4, 128, 256))
    out = jax.jit(lambda w, xs: lax.scan(step, w, xs))(w, xs)
    print(np.asarray(out[1]))
"""


def _placements(stderr: str):
    return [line for line in stderr.splitlines() if "] loop " in line]


def test_a_small_loop_runs_on_the_host_and_says_why():
    lines = _placements(_trace_of(SMALL_LOOP, {"PJRTX_LOOPS": "auto"}))
    assert lines and all("loop host" in ln and "latency-bound" in ln for ln in lines), lines


def test_a_training_step_scanned_over_batches_stays_on_mlx():
    lines = _placements(_trace_of(TRAINING_SCAN, {"PJRTX_LOOPS": "auto"}))
    assert lines and all("loop mlx" in ln and "not latency-bound" in ln for ln in lines), lines


def test_pjrtx_loops_forces_either_way():
    assert all("loop mlx" in ln and "PJRTX_LOOPS=mlx" in ln
               for ln in _placements(_trace_of(SMALL_LOOP, {"PJRTX_LOOPS": "mlx"})))
    lines = _placements(_trace_of(TRAINING_SCAN, {"PJRTX_LOOPS": "host"}))
    assert lines and all("loop host" in ln for ln in lines), lines


def test_a_failed_build_is_an_error_when_forced_and_a_fall_back_to_mlx_in_auto(tmp_path):
    # No compiler (CXX=false): PJRTX_LOOPS=host asked for the host, so the
    # compile fails and says why; auto runs the loop on MLX and says why.
    env = {"CXX": "false", "PJRTX_CACHE_DIR": str(tmp_path)}
    lines = _placements(_trace_of(SMALL_LOOP, dict(env, PJRTX_LOOPS="auto")))
    assert lines and all("loop mlx" in ln and "host compiler failed" in ln for ln in lines), lines
    code = textwrap.dedent(SMALL_LOOP)
    r = subprocess.run([sys.executable, "-c", "import jax, jax.numpy as jnp, numpy as np\nfrom jax import lax\n" + code],
                       env=child_env(JAX_PLATFORMS="pjrtx,cpu", PJRTX_LOOPS="host", **env),
                       capture_output=True, text=True, timeout=600, cwd=tempfile.gettempdir())
    assert r.returncode != 0 and "FAILED_PRECONDITION" in r.stderr and "PJRTX_LOOPS=host" in r.stderr, r.stderr[-2000:]


def test_a_loop_with_an_ordered_callback_stays_on_mlx_and_names_the_reason():
    # An ordered io_callback threads a token through the loop; the engine
    # has no token type.
    prog = """
        from jax.experimental import io_callback
        def body(i, c):
            io_callback(lambda v: None, None, c, ordered=True)
            return c + 1.0
        print(np.asarray(jax.jit(lambda x: lax.fori_loop(0, 3, body, x))(jnp.ones(2))))
    """
    lines = _placements(_trace_of(prog, {"PJRTX_LOOPS": "host"}))
    assert lines and all("loop mlx" in ln and "token" in ln for ln in lines), lines


# ---------------------------------------------------------------- host callbacks

CALLBACK_LOOP = """
    import numpy as np
    calls = []
    def half_sin(x):
        calls.append(1)
        return (np.sin(x) * 0.5).astype(x.dtype)
    def body(i, c):
        return jax.pure_callback(half_sin, jax.ShapeDtypeStruct(c.shape, c.dtype), c) + 0.25
    out = np.asarray(jax.jit(lambda x: lax.fori_loop(0, 7, body, x))(jnp.ones(3)))
    assert len(calls) == 7, calls
"""


def test_a_loop_with_a_host_callback_runs_on_the_host_and_calls_it_each_step():
    lines = _placements(_trace_of(CALLBACK_LOOP, {"PJRTX_LOOPS": "auto"}))
    assert lines and all("loop host" in ln and "callbacks=1" in ln for ln in lines), lines


def _counted(fn):
    """fn, and a list that gets one entry per call."""
    calls = []

    def counted(*a):
        calls.append(1)
        return fn(*a)
    return counted, calls


def test_host_callbacks_in_a_loop_body_against_xla():
    # The same numpy function computes each step on both sides: the answers
    # agree bit for bit, pred and int32 operands and results included.
    def step(x, i):
        return (np.float32(0.5) * x + np.float32(1)).astype(np.float32), x > 1, (i * 3).astype(np.int32)
    counted, calls = _counted(step)

    def f(x):
        def body(i, c):
            x, flags, k = c
            y, big, j = jax.pure_callback(
                counted, (jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(x.shape, jnp.bool_),
                          jax.ShapeDtypeStruct((), jnp.int32)), x, i)
            return y, flags ^ big, k + j
        return lax.fori_loop(0, 9, body, (x, jnp.zeros(x.shape, bool), jnp.int32(0)))
    x = np.array([0.0, 1.5, 4.0, -3.0], np.float32)
    check(f, x)
    # XLA:CPU calls it once a step, and so does the host loop.
    with _env(PJRTX_LOOPS="host"):
        calls.clear()
        jax.block_until_ready(jax.jit(_fresh(f))(x))
        assert len(calls) == 9


def test_a_callback_in_a_never_taken_branch_is_not_called():
    # eqx.error_if's shape: a check in a cond branch that only a bad value
    # takes. The loop runs on the host and calls nothing.
    def bad(x):
        raise ValueError("the check fired")
    counted, calls = _counted(bad)

    def f(x):
        def body(i, c):
            c = lax.cond(jnp.any(c < 0), lambda c: jax.pure_callback(
                counted, jax.ShapeDtypeStruct(c.shape, c.dtype), c), lambda c: c, c)
            return c * 0.5 + 1.0
        return lax.fori_loop(0, 50, body, x)
    check(f, np.arange(4, dtype=np.float32))
    assert calls == []
    # A value that takes the branch: the callable's exception reaches the
    # caller as it does on XLA:CPU.
    for device in (jax.devices("cpu")[0], jax.devices("pjrtx")[0]):
        with _env(PJRTX_LOOPS="host"), pytest.raises(Exception, match="the check fired"):
            np.asarray(jax.jit(_fresh(f))(jax.device_put(np.float32([1, -1]), device)))


def test_debug_callbacks_before_in_and_after_a_loop_run_in_program_order():
    log = []

    def f(x):
        jax.debug.callback(lambda v: log.append(("before", float(v))), x[0])

        def body(i, c):
            jax.debug.callback(lambda i, v: log.append(("step", int(i), float(v))), i, c[0])
            return c + 1
        x = lax.fori_loop(0, 4, body, x)
        jax.debug.callback(lambda v: log.append(("after", float(v))), x[0])
        return x
    x = np.ones(2, np.float32)
    logs = {}
    for name, device, mode in (("cpu", "cpu", "auto"), ("host", "pjrtx", "host"), ("mlx", "pjrtx", "mlx")):
        log.clear()
        with _env(PJRTX_LOOPS=mode):
            jax.block_until_ready(jax.jit(_fresh(f))(jax.device_put(x, jax.devices(device)[0])))
            jax.effects_barrier()
        logs[name] = list(log)
    assert logs["cpu"] == [("before", 1.0)] + [("step", i, 1.0 + i) for i in range(4)] + [("after", 5.0)]
    assert logs["host"] == logs["cpu"] and logs["mlx"] == logs["cpu"], logs


MULTI_DEVICE = """
    # Host loops of several devices at once: each device's executor runs its
    # own (on its own MLX CPU stream); the answers are XLA:CPU's.
    import numpy as np
    def f(x):
        return lax.fori_loop(0, 2000, lambda i, c: c * 0.9 + jnp.sin(c) * 0.05 + i * 1e-6, x)
    xs = np.linspace(-1, 1, 4 * 8, dtype=np.float32).reshape(4, 8)
    want = np.stack([np.asarray(jax.jit(f, device=jax.devices("cpu")[0])(x)) for x in xs])
    got_pmap = np.asarray(jax.pmap(f, devices=jax.devices("pjrtx"))(xs))
    outs = [jax.jit(f)(jax.device_put(x, d)) for x, d in zip(xs, jax.devices("pjrtx"))]
    got_jit = np.stack([np.asarray(o) for o in outs])
    assert len(jax.devices("pjrtx")) == 4
    # Each side has its own sin (a few ulp apart) and XLA:CPU may contract
    # the mul-adds: a step differs by at most ~4 ulp of |c| <= 1. The map
    # contracts (|d/dc| <= 0.9 + 0.05), so the differences stay within
    # 4 ulp / (1 - 0.95) = 80 ulp ~ 1e-5.
    np.testing.assert_allclose(got_pmap, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_jit, want, rtol=1e-5, atol=1e-5)
"""


def test_loops_on_several_devices_run_on_the_host_at_once():
    lines = _placements(_trace_of(MULTI_DEVICE, {"PJRTX_LOOPS": "host", "PJRTX_DEVICES": "4"}))
    assert lines and all("loop host" in ln for ln in lines), lines


def test_a_bad_pjrtx_loops_value_is_a_clear_error():
    code = ("import jax, jax.numpy as jnp\n"
            "jax.jit(lambda x: x + 1)(jnp.ones(2))\n")
    env = child_env(JAX_PLATFORMS="pjrtx", PJRTX_LOOPS="fast")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300, cwd=tempfile.gettempdir())
    assert r.returncode != 0 and "PJRTX_LOOPS must be 'auto', 'host' or 'mlx', got 'fast'" in r.stderr
