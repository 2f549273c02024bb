"""float32 multiply-adds round once, as XLA:CPU's do (csrc/backend/mlx/fma_contract.h).

XLA:CPU contracts a float32 multiply into the add or subtract that is its
only use (LLVM's FMA fusion): `a * b + c` is fma(a, b, c) there, on every
CPU with FMA, and pjrtx's plan contracts the same pairs. A cancelling sum
(a Lanczos series, a Horner polynomial) differs by several ulps between the
two roundings, enough for a test with rtol=1e-5 to see.

Generated programs of multiplies, adds, subtracts and negations over random
float32 values, products used once and several times, compared bit for bit with
XLA:CPU: at top level on MLX and on the host forms of small values
(PJRTX_HOST), and in loop bodies on MLX and as compiled host code
(PJRTX_LOOPS). The programs are drawn so that most results differ between
one rounding and two; the test checks that they did.

XLA's fusion choices decide which pairs it fuses; fma_contract.cc models
the common forms and matches 97-99% of random programs bit for bit (the
measured rates and the bounds are at the tests).

pytest runs a fixed set (seeds 0..N-1); `--many N` draws N more:

    python tests/test_fma_contract.py --many 2000
"""
from __future__ import annotations

import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "pjrtx,cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from jax import lax  # noqa: E402

from _procs import scoped_env  # noqa: E402

OPS = ["mul", "mul", "add", "sub", "neg"]


def draw_program(seed: int, shared: bool = True, n_args: int = 3, n_ops: int = 10):
    """(steps, outputs, scale): step i defines value n_args + 1 + i from
    earlier values; value n_args is `scale`, a 0-d argument that broadcasts
    (an argument, not a constant: XLA:CPU's simplifier reassociates
    constants, (x + c1) + c2 = x + (c1 + c2) and (a c)(b c) = (a b)(c c),
    roundings that are not this file's subject). Products feed adds and
    subtracts on either side. `shared`: computed values may be read several
    times (products used twice or more) and negated; else each is read once,
    by one later step or as an output (arguments may be read any number of
    times)."""
    rng = np.random.default_rng(seed)
    steps = []
    n = n_args + 1
    free = []  # computed values no step has read yet

    def pick():
        if not shared:
            # An unread computed value half the time, else an argument.
            if free and rng.random() < 0.6:
                return free.pop(int(rng.integers(0, len(free))))
            return int(rng.integers(0, n_args + 1))
        return n - 1 if rng.random() < 0.5 else int(rng.integers(0, n))

    # Negations only where values are shared: LLVM moves a negation across
    # a multiply and through sums (-(a) * b = -(a * b), x - (-y) = x + y)
    # before it picks the product to fuse, and the pass follows only the
    # common forms of that.
    ops = OPS if shared else [op for op in OPS if op != "neg"]
    for _ in range(n_ops):
        op = ops[int(rng.integers(0, len(ops)))]
        if op == "neg":
            steps.append(("neg", pick()))
        else:
            a, b = pick(), pick()
            steps.append((op, a, b) if rng.random() < 0.5 else (op, b, a))
        free.append(n)
        n += 1
    if shared:
        outputs = sorted({n - 1, int(rng.integers(n_args + 1, n)), int(rng.integers(n_args + 1, n))})
    else:
        outputs = free[-3:]
    scale = np.float32(rng.standard_normal())
    return steps, outputs, scale


def evaluate(program, args, xp=jnp):
    steps, outputs, _ = program
    vals = list(args)
    for s in steps:
        if s[0] == "neg":
            vals.append(-vals[s[1]])
        elif s[0] == "mul":
            vals.append(vals[s[1]] * vals[s[2]])
        elif s[0] == "add":
            vals.append(vals[s[1]] + vals[s[2]])
        else:
            vals.append(vals[s[1]] - vals[s[2]])
    return [vals[i] for i in outputs]


def as_function(program, context: str, name: str):
    if context == "top":
        def f(*args):
            return evaluate(program, args)
    else:
        # Each step's outputs, mapped into (0, 2) by 1 + o / (2 + |o|)
        # (add, divide and abs round once on every backend), are the next
        # step's arguments: products of a few of them are rarely subnormal, which
        # XLA:CPU flushes to zero and pjrtx keeps (a known difference). The
        # trip count is an argument: XLA:CPU unrolls a loop of a small
        # constant count, and its fusions then span iterations.
        def f(n, *args):
            def body(i, xs):
                outs = evaluate(program, xs + (args[-1],))
                outs = [jnp.broadcast_to(1.0 + o / (2.0 + jnp.abs(o)), xs[0].shape) for o in outs]
                return tuple((outs * 3)[:len(xs)])
            return lax.fori_loop(0, n, body, tuple(args[:-1]))
    f.__name__ = f.__qualname__ = name
    return f


def run(device, f, args, times=2):
    """[outputs of each call]: f's results as a list of arrays (one result
    is a list of one)."""
    placed = [jax.device_put(a, device) for a in args]
    jf = jax.jit(f)
    runs = []
    for _ in range(times):
        out = jf(*placed)
        runs.append([np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])])
    return runs


def same_bits(got, want):
    both_nan = np.isnan(got) & np.isnan(want)
    return bool(np.all(both_nan | ((got == want) & (np.signbit(got) == np.signbit(want)))))


SETTINGS = {
    "top": [{"PJRTX_HOST": "all"}, {"PJRTX_HOST": "off"}],
    "loop": [{"PJRTX_LOOPS": "host"}, {"PJRTX_LOOPS": "mlx"}],
}
SHAPES = [(), (5,), (64,)]


def check(seed: int, context: str, shape, shared: bool = True):
    program = draw_program(seed, shared)
    rng = np.random.default_rng(10_000 + seed)
    args = [rng.standard_normal(shape).astype(np.float32) for _ in range(3)] + [program[2]]
    if context == "loop":
        args = [np.int32(4)] + args
    want = run(jax.devices("cpu")[0], as_function(program, context, f"xla_{seed}"), args)[0]
    bad = []
    for env in SETTINGS[context]:
        with scoped_env(**env):
            f = as_function(program, context, f"pjrtx_{seed}_{'_'.join(env.values())}")
            for run_no, got in enumerate(run(jax.devices("pjrtx")[0], f, args), 1):
                for k, (g, w) in enumerate(zip(got, want)):
                    if not same_bits(g, w):
                        at = np.flatnonzero(~(np.isnan(g) & np.isnan(w)) & (g != w))[:3]
                        bad.append(f"{env} run {run_no} output {k} at {at.tolist()}: "
                                   f"{g.ravel()[at].tolist()} != XLA:CPU {w.ravel()[at].tolist()}")
    assert not bad, f"program {seed} {program} in {context}, shape {shape}:\n" + "\n".join(bad)
    # How many top-level results one rounding per op (NumPy's float32)
    # would have got wrong: the programs must tell the two apart.
    if context != "top":
        return 0
    unfused = evaluate(program, args, xp=np)
    return sum(int(np.sum(~((np.asarray(u, np.float32) == w) | np.isnan(w)))) for u, w in zip(unfused, want))


def run_programs(context, shape, shared):
    """(programs that differ, results that one rounding per op gets wrong)."""
    n = 40 if context == "top" else 15
    bad, differ = [], 0
    for seed in range(n):
        try:
            differ += check(seed, context, shape, shared)
        except AssertionError as e:
            bad.append(str(e).splitlines()[0])
    return n, bad, differ


# XLA:CPU's choice of what to fuse is its own (its fusion passes, LLVM's
# canonical forms, its vectoriser): fma_contract.cc models the common
# forms, and what it misses shows as a program differing in the last bits.
# Measured on 300 fresh draws each (seeds 1000-1149, top and loop, x86-64,
# jaxlib 0.10.2): 297 of the products-used-once programs and 290 of the
# shared ones match bit for bit; the misses are a product fused on the
# right where the left one was also fusable, and values XLA computes in
# two fusions, fused in one of them and not in the other. The bounds
# catch a model that stopped working, with room for another CPU's
# vectoriser.
@pytest.mark.parametrize("context", ["top", "loop"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)) or "scalar")
def test_products_used_once_match_xla_cpu(context, shape):
    # Every computed value is read once: XLA:CPU fuses each product into the
    # add or subtract that reads it (the left one where both are products).
    n, bad, differ = run_programs(context, shape, shared=False)
    assert len(bad) <= 0.1 * n, f"{len(bad)} of {n} programs differ:\n" + "\n".join(bad)
    if context == "top":
        # Most draws contain a fused pair whose two roundings differ.
        assert differ > 0, "no result told one rounding from two: the test cannot fail"


@pytest.mark.parametrize("context", ["top", "loop"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)) or "scalar")
def test_products_used_several_times_match_xla_cpu(context, shape):
    # A product read by several ops is fused only into reads that XLA:CPU
    # gives a fusion each (it computes the product inside every fusion that
    # reads it), and not into one that shares a fusion with another read.
    n, bad, _ = run_programs(context, shape, shared=True)
    assert len(bad) <= 0.2 * n, f"{len(bad)} of {n} programs differ:\n" + "\n".join(bad)


def test_a_product_used_twice_is_rounded_on_its_own():
    # XLA:CPU fuses a multiply only into its one use: with a second use it
    # stays a rounded product (p + c then rounds twice).
    def f(a, b, c):
        p = a * b
        return p + c, p
    rng = np.random.default_rng(1)
    a, b, c = (rng.standard_normal(1000).astype(np.float32) for _ in range(3))
    want = run(jax.devices("cpu")[0], f, [a, b, c], times=1)[0]
    assert np.array_equal(want[0], (a * b) + c), "XLA:CPU contracted a product with two uses"
    got = run(jax.devices("pjrtx")[0], f, [a, b, c])
    for g in got:
        assert np.array_equal(g[0], want[0]) and np.array_equal(g[1], want[1])


def test_horner_polynomial_and_lgamma_match_xla_cpu():
    # A Horner polynomial is a chain of contracted pairs; JAX's lgamma is a
    # Lanczos sum whose last step, 0.9189 + t * log(...), cancels near 1
    # and 2 (float32 lgamma(0.7): 11 ulps from the true value on XLA:CPU,
    # 27 rounded twice).
    coef = np.float32([1.5e-4, 1.3e-3, 9.6e-3, 5.55e-2, 0.24, 0.693, 1.0])

    def horner(x):
        acc = jnp.zeros_like(x) + coef[0]
        for c in coef[1:]:
            acc = acc * x + c
        return acc
    x = np.linspace(-3, 3, 1001, dtype=np.float32)
    for f in (horner, jax.scipy.special.gammaln):
        xs = x if f is horner else np.float32([0.5, 0.7, 1.3, 2.0, 3.7])
        want = run(jax.devices("cpu")[0], f, [xs], times=1)[0][0]
        for got in run(jax.devices("pjrtx")[0], f, [xs]):
            assert np.array_equal(got[0], want), (f.__name__, got[0], want)


@pytest.mark.parametrize("compile_tier", ["never", "always"])
def test_a_sum_halfway_between_two_floats_rounds_as_one_fma(compile_tier):
    # a b = 2^-24 - 2^-70 and c = 1 + 2^-23: the exact sum lies just below
    # the midpoint between 1 + 2^-23 and 1 + 2^-22, so one rounding gives
    # 1 + 2^-23; rounded to float64 first it lands on the midpoint, and a
    # second rounding (ties to even) gives 1 + 2^-22. Eagerly MLX runs
    # pjrtx's FMA node; under mx::compile (always) a float64 composition
    # that must detect this case.
    a = np.float32(2.0**-12 * (1 + 2.0**-23))
    b = np.float32(2.0**-12 * (1 - 2.0**-23))
    c = np.float32(1 + 2.0**-23)
    args = [np.full(4096, v, np.float32) for v in (a, b, c)]  # past the host forms' 64
    # abs: a segment of more than one op, which the compile tier traces.
    want = run(jax.devices("cpu")[0], lambda x, y, z: jnp.abs(x * y + z), args, times=1)[0][0]
    assert want[0] == c, "XLA:CPU did not fuse this multiply-add (a CPU without FMA?)"
    with scoped_env(PJRTX_COMPILE=compile_tier):
        f = lambda x, y, z: jnp.abs(x * y + z)  # noqa: E731
        for got in run(jax.devices("pjrtx")[0], f, args, times=4):
            assert np.array_equal(got[0], want), (compile_tier, got[0][:2], want[:2])


def _fma32(a, b, c):
    """float32 fma through float64: a*b is exact there, and the sum rounds
    to float64 then float32 (a double rounding, off only on ties of
    probability ~2^-29 per element, which these checks would show)."""
    return (np.float64(a) * np.float64(b) + np.float64(c)).astype(np.float32)


@pytest.mark.parametrize("shape", [(), (64,), (5000,)], ids=lambda s: "x".join(map(str, s)) or "scalar")
def test_constant_scalings_fold_as_xla_does(shape):
    # XLA's simplifier rewrites (x * c1) * c2 into x * (c1 * c2), the
    # constants multiplied at compile time (constant_products.h), whatever
    # the operand order, also in chains, and past the 4,096 elements where
    # pjrtx stops contracting multiply-adds (this is not a contraction).
    c1, c2, c3 = np.float32(0.1), np.float32(0.3), np.float32(-3.7)
    x = (np.random.default_rng(2).standard_normal(shape) * 3).astype(np.float32)
    forms = {
        "(c1 x) c2": lambda v: (c1 * v) * c2,
        "c2 (v c1)": lambda v: c2 * (v * c1),
        "((v c1) c2) c3": lambda v: ((v * c1) * c2) * c3,
        "(v c1) c2 + v": lambda v: (v * c1) * c2 + v,
        "-(c1 v) * c2": lambda v: (-(c1 * v)) * c2,
    }
    if x.size > 4096:
        del forms["(v c1) c2 + v"]  # a multiply-add: over 4,096 elements pjrtx rounds it twice
    differs = 0
    for name, f in forms.items():
        want = run(jax.devices("cpu")[0], f, [x], times=1)[0][0]
        for got in run(jax.devices("pjrtx")[0], f, [x]):
            assert same_bits(got[0], want), (name, got[0].ravel()[:3], want.ravel()[:3])
        differs += int(np.sum(np.asarray(f(x), np.float32) != want))  # NumPy: the program's order
    assert differs > 0 or shape == (), "no value told the two orders apart: the test cannot fail"


@pytest.mark.parametrize("shape", [(), (64,)], ids=lambda s: "x".join(map(str, s)) or "scalar")
def test_a_product_by_a_negative_constant_is_fused_as_xla_does(shape):
    # LLVM turns (x * -A) + (y * B) into (y * B) - (x * A) before it
    # fuses, so XLA:CPU fuses the right product there and the left one in
    # the other sign patterns (fma_contract.cc, contract()).
    A, B = np.float32(0.48), np.float32(0.52)
    rng = np.random.default_rng(3)
    x, y = ((rng.standard_normal((60,) + shape) * 5).astype(np.float32) for _ in range(2))  # <= 4,096 elements
    forms = {
        "x*-A + y*B": lambda u, v: u * -A + v * B,
        "x*A + y*-B": lambda u, v: u * A + v * -B,
        "x*-A + y*-B": lambda u, v: u * -A + v * -B,
        "x*-A - y*B": lambda u, v: u * -A - v * B,
        "x*A - y*-B": lambda u, v: u * A - v * -B,
    }
    for name, f in forms.items():
        g = jax.vmap(f)
        want = run(jax.devices("cpu")[0], g, [x, y], times=1)[0][0]
        for got in run(jax.devices("pjrtx")[0], g, [x, y]):
            assert same_bits(got[0], want), (name, got[0].ravel()[:3], want.ravel()[:3])
    # The first form's right product is the fused one on XLA:CPU; fusing
    # the left one would differ (the test can fail).
    want = run(jax.devices("cpu")[0], jax.vmap(forms["x*-A + y*B"]), [x, y], times=1)[0][0]
    assert np.array_equal(want, _fma32(y, B, x * -A))
    assert not np.array_equal(want, _fma32(x, -A, y * B))


def test_constant_scalings_in_loops_under_vmap_and_grad():
    # Upstream's custom_api_test test_sinc_constant_function_batching: the
    # gradient of a vmapped lax.map of sinc scales by constants inside the
    # loop body, where the pass adds constants of the body's shapes (an
    # early version read a shape after the plan's value table had grown,
    # and the loop asked for memory it could not have).
    batch = np.arange(15.0, dtype=np.float32).reshape(5, 3)

    def g(param):
        return jax.vmap(lambda x: lax.map(jnp.sinc, x))(param * batch).sum()

    p = np.float32(0.1)
    want = run(jax.devices("cpu")[0], jax.grad(g), [p], times=1)[0][0]
    for got in run(jax.devices("pjrtx")[0], jax.grad(g), [p]):
        np.testing.assert_allclose(got[0], want, rtol=1e-5)


def test_lbfgs_on_matyas_converges_as_on_xla():
    # Upstream's scipy_optimize_test TestLBFGS::test_minimize3: JAX's L-BFGS
    # on 0.26 (x^2 + y^2) - 0.48 x y from (6, 6), whose gradient scales
    # twice by constants and adds two products. Before XLA's constant
    # folding and its choice of product were modelled, the line search
    # stopped (status 4) at x ~ 2e-5 where XLA:CPU converges (status 0).
    def matyas(p):  # as upstream writes it
        x, y = p
        return 0.26 * (x ** 2 + y ** 2) - 0.48 * x * y

    def solve(x0):
        r = jax.scipy.optimize.minimize(matyas, x0, method="l-bfgs-experimental-do-not-rely-on-this",
                                        options=dict(maxiter=None, gtol=1e-7))
        return r.x, r.status

    import jax.scipy.optimize  # noqa: F401
    x0 = np.full(2, 6.0, np.float32)
    (want_x, want_status), = run(jax.devices("cpu")[0], solve, [x0], times=1)
    assert want_status == 0
    for got_x, got_status in run(jax.devices("pjrtx")[0], solve, [x0]):
        assert got_status == want_status and same_bits(got_x, want_x), (got_x, got_status, want_x)


def main(argv):
    many = int(argv[argv.index("--many") + 1]) if "--many" in argv else 200
    start = 1000
    for shared in (False, True):
        bad = []
        for seed in range(start, start + many):
            for context in ("top", "loop"):
                try:
                    check(seed, context, SHAPES[seed % len(SHAPES)], shared)
                except AssertionError as e:
                    bad.append(str(e).splitlines()[0])
        kind = "shared products" if shared else "products used once"
        print(f"{kind}: {2 * many - len(bad)} of {2 * many} programs match XLA:CPU bit for bit")
        for line in bad:
            print("  ", line)


if __name__ == "__main__":
    main(sys.argv)
