"""stablehlo.reduce (ops/reduce.cc) against XLA:CPU: add/mul/max/min/and/or
bodies with identity and non-identity init values, over one, several, all
and no axes, empty axes, NaN and signed zeros, and wrapping integer sums.

Float sums of many terms are accumulated in different orders (MLX: pairwise
/ vectorized; XLA: its own loop order), so f32 sums get rtol 1e-5; f16/bf16
sums of exactly-representable small integers are compared exactly.
"""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

from oracle import assert_same, sum_bound, unit_roundoff
from test_ops_elementwise import FLOATS, INTS, check, check_bits, name, x64_for

OPS = [("add", lax.add), ("mul", lax.mul), ("max", lax.max), ("min", lax.min)]


def reductions(x, identity, other):
    """Every combiner over one, two, all and no axes; the identity init on
    some axis sets and a non-identity one on others (one jit per dtype)."""
    out = {}
    for op_name, op in OPS:
        out[f"{op_name}_ax1"] = lax.reduce(x, identity[op_name], op, (1,))
        out[f"{op_name}_ax02"] = lax.reduce(x, identity[op_name], op, (0, 2))
        out[f"{op_name}_ax0_init"] = lax.reduce(x, other[op_name], op, (0,))
        out[f"{op_name}_all_init"] = lax.reduce(x, other[op_name], op, (0, 1, 2))
    out["add_none_init"] = lax.reduce(x, other["add"], lax.add, ())
    return out


def small_ints(dt, shape, seed):
    # Values in [-3, 3] (unsigned: [0, 3]): sums and products are exact in
    # every type, so only the combiner and init handling are compared.
    rng = np.random.default_rng(seed)
    lo = 0 if np.dtype(dt).kind in "ub" else -3
    return rng.integers(lo, 4, shape).astype(dt)


@pytest.mark.parametrize("dt", INTS + FLOATS, ids=name)
def test_reduce_identity_and_non_identity_init(dt):
    # XLA assumes the init is the body's identity and applies a non-identity
    # one once per accumulator: once on these small shapes, several times on
    # long vectorized rows (a 37-wide int8 row added init 1 three times). So
    # non-identity inits are compared on small shapes only.
    x = small_ints(dt, (3, 2, 4), 0)
    one, two = np.array(1, dt), np.array(2, dt)
    identity = dict(add=np.array(0, dt), mul=one, max=x.min(), min=x.max())
    other = dict(add=np.array(5, dt), mul=two, max=two, min=one)
    # Products of 24 values in [-3, 3] can pass 2^24: allow f32 rounding.
    tol = 0.0 if np.dtype(dt).kind in "iu" else 1e-6
    with x64_for(dt):
        check(lambda x: reductions(x, identity, other), x, rtol=tol)


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16, np.int32, np.uint32], ids=name)
def test_reduce_integer_wrapping(dt):
    # sum/prod of narrow ints come back widened from MLX; the result must
    # wrap in the narrow type like XLA's accumulation does.
    info = np.iinfo(dt)
    x = np.full((4, 37), info.max, dt)
    x[1] = info.min
    x[2, ::2] = 3
    f = lambda x: dict(sum0=lax.reduce(x, np.array(0, dt), lax.add, (0,)),
                       sum1=lax.reduce(x, np.array(0, dt), lax.add, (1,)),
                       prod1=lax.reduce(x, np.array(1, dt), lax.mul, (1,)),
                       jnp_sum=jnp.sum(x, axis=1, dtype=dt))
    check(f, x)


@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64], ids=name)
def test_reduce_nan_inf_signed_zero(dt):
    nan, inf = np.nan, np.inf
    x = np.array([[1.0, nan, -2.0, 3.0],
                  [-0.0, -0.0, -0.0, -0.0],
                  [0.0, -0.0, 0.0, -0.0],
                  [-inf, 1.0, inf, 2.0],
                  [-inf, -inf, 5.0, -1.0],
                  [-0.0, 0.0, -0.0, -0.0]], np.float64).astype(dt)

    def f(x):
        out = {}
        for op_name, op, init in [("add", lax.add, 0.0), ("add_negzero", lax.add, -0.0),
                                  ("mul", lax.mul, 1.0), ("max", lax.max, -inf),
                                  ("min", lax.min, inf), ("max_nan_init", lax.max, nan),
                                  ("min_zero_init", lax.min, 0.0), ("max_negzero_init", lax.max, -0.0)]:
            out[op_name] = lax.reduce(x, np.array(init, dt), op, (1,))
            out[op_name + "_t"] = lax.reduce(x, np.array(init, dt), op, (0,))
        return out

    with x64_for(dt):
        check(f, x)


@pytest.mark.parametrize("dt", [np.int32, np.float32, np.uint8, np.float64], ids=name)
def test_reduce_empty_axis(dt):
    # Reducing a zero-size axis gives the init value, whatever it is (the
    # identity is not assumed); max/min must not throw on empty input.
    x = np.zeros((0, 3), dt)
    init = np.array(5, dt)

    def f(x):
        return dict(add0=lax.reduce(x, init, lax.add, (0,)),
                    mul0=lax.reduce(x, init, lax.mul, (0,)),
                    max0=lax.reduce(x, init, lax.max, (0,)),
                    min0=lax.reduce(x, init, lax.min, (0,)),
                    add1=lax.reduce(x, init, lax.add, (1,)),
                    max_all=lax.reduce(x, init, lax.max, (0, 1)),
                    none=lax.reduce(x, init, lax.add, ()))

    with x64_for(dt):
        check(f, x)


def test_reduce_bool():
    rng = np.random.default_rng(4)
    x = rng.integers(0, 2, (5, 6)).astype(bool)
    x[0] = True
    x[1] = False

    def f(x):
        t, fl = np.array(True), np.array(False)
        return dict(any1=jnp.any(x, axis=1), all1=jnp.all(x, axis=1), any0=jnp.any(x, axis=0),
                    all_all=jnp.all(x), and_init_false=lax.reduce(x, fl, lax.bitwise_and, (1,)),
                    or_init_true=lax.reduce(x, t, lax.bitwise_or, (0,)),
                    max=lax.reduce(x, fl, lax.max, (1,)), min=lax.reduce(x, t, lax.min, (1,)),
                    empty_any=jnp.any(x[:0], axis=0), empty_all=jnp.all(x[:, :0], axis=1))

    check(f, x)


def test_reduce_float_sums_and_strided_inputs():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 50, 8)).astype(np.float32)
    # max is exact; a product's relative error is at most gamma_5 per order
    # (no cancellation in a product), so two orders agree within 2*gamma_5.
    f = lambda x: dict(max=jnp.max(x, axis=(0, 2)), prod=jnp.prod(x[:, :5], axis=1))
    # Sums: the summation order may differ from XLA:CPU's; the difference is
    # bounded by the rounding of an n-term sum relative to sum |terms|, not
    # to the (possibly cancelled) result.
    total = lambda x: jnp.sum(x, axis=1)
    mean = lambda x: jnp.mean(x, axis=0)
    for v in (x, x[::2, ::-1, 1::2].transpose(0, 1, 2)):  # and a strided view
        check(f, v, rtol=2 * 5 * unit_roundoff(np.float32) * 1.01)
        assert_same(total, v, bound=sum_bound(total, v, terms=v.shape[1]))
        # a mean is a sum and one division (+1 rounding)
        assert_same(mean, v, bound=sum_bound(mean, v, terms=v.shape[0] + 1))
    check(lambda x: dict(s=jnp.sum(x)), np.float32(3.0))  # scalar operand, no axes
    # f16/bf16 jnp.sum upcasts to f32 itself; a direct f16 reduce of values
    # whose sums are exact compares exactly.
    h = small_ints(np.float16, (4, 16), 6)
    check(lambda x: dict(s=lax.reduce(x, np.float16(0), lax.add, (1,)),
                         j=jnp.sum(x, axis=0)), h)


@pytest.mark.parametrize("shape, axis", [((500, 500), None), ((250000, 2), 0), ((2, 250000), 1),
                                         ((125, 2000, 2), (0, 1))])
def test_large_float_sums_are_summed_as_a_tree(shape, axis):
    # 250,000 f32 terms of 500: every partial sum of a tree of groups is a
    # multiple of 500 * 256 below 2^27 and so exact, and the result is
    # exactly 1.25e8 (XLA:CPU's too). Accumulating one term at a time (MLX's
    # CPU reduction, per SIMD lane) rounds once the running sum passes 2^24
    # and gave 124,536,880.
    x = np.full(shape, 500.0, np.float32)
    got = np.asarray(jax.jit(lambda v: jnp.sum(v, axis=axis))(jax.device_put(x, jax.devices("pjrtx")[0])))
    want = x.astype(np.float64).sum(axis=axis)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want.astype(np.float32))
    assert np.all(want == 1.25e8)


@pytest.mark.parametrize("n, v", [(4096, 32769.0), (5120, 32769.0), (20000, 8193.0)])
@pytest.mark.parametrize("rows", [None, 2])
def test_mid_sized_float_sums_are_summed_as_a_tree(n, v, rows):
    # From 4,096 terms on (a logsumexp over 20,000 terms, as in NumPyro's
    # Polya-Gamma density): group sums of 256 terms are multiples of 256
    # below 2^24 when v = 2^15 + 1 (n a multiple of 256), and the 78 groups
    # of 256 * 8193 plus a tail of 32 terms are multiples of 32 below 2^28
    # when v = 2^13 + 1: every partial sum of the tree is exact, so the
    # result is n * v exactly. One running sum per SIMD lane passes 2^24
    # and rounds (20,000 x 8193 gave 163,842,048 instead of 163,860,000).
    shape = (n,) if rows is None else (rows, n)
    x = np.full(shape, v, np.float32)
    f = lambda a: jnp.sum(a, axis=-1)  # noqa: E731
    got = np.asarray(jax.jit(f)(jax.device_put(x, jax.devices("pjrtx")[0])))
    want = x.astype(np.float64).sum(axis=-1)
    assert np.all(want == n * v) and np.all(want.astype(np.float32) == want)
    np.testing.assert_array_equal(got, want.astype(np.float32))


def test_reduce_complex64():
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((3, 5)) + 1j * rng.standard_normal((3, 5))).astype(np.complex64)
    f = lambda x: dict(sum=lax.reduce(x, np.complex64(1 + 2j), lax.add, (1,)),
                       prod=lax.reduce(x, np.complex64(1), lax.mul, (0,)))
    check(f, x, rtol=1e-5, atol=1e-6)


# ---- general bodies and multi-operand reduces (pairwise tree) -------------

ARG_VALUES = np.array([[1.0, 3.0, 3.0, -np.inf, 2.0],
                       [np.nan, 1.0, np.nan, 5.0, 5.0],
                       [-0.0, 0.0, 0.0, -0.0, -1.0],
                       [np.inf, np.inf, 1.0, np.nan, 0.0]], np.float32)


@pytest.mark.parametrize("dt", [np.float32, np.float16, ml_dtypes.bfloat16, np.int32, np.uint8],
                         ids=name)
def test_argmax_argmin_nan_and_ties(dt):
    # JAX's argmax/argmin are a 2-operand reduce (value, index): the first
    # NaN wins, ties pick the lowest index; odd lengths exercise the tree's
    # carried element.
    x = ARG_VALUES if np.dtype(dt).kind == "f" else np.nan_to_num(ARG_VALUES, posinf=7, neginf=0)
    x = np.abs(x).astype(dt) if np.dtype(dt).kind == "u" else x.astype(dt)
    check(lambda v: dict(amax0=jnp.argmax(v, 0), amax1=jnp.argmax(v, 1), amin0=jnp.argmin(v, 0),
                         amin1=jnp.argmin(v, 1), amax_all=jnp.argmax(v)), x)


def test_argmax_long_rows():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 5, (7, 1001)).astype(np.float32)  # many ties per row
    check(lambda v: dict(amax=jnp.argmax(v, 1), amin=jnp.argmin(v, 0)), x)


def test_reduce_general_body():
    # A body that is no single recognised op: sum of squares-like
    # lax.reduce with a Python function, and a variadic (value, count) pair.
    x = np.random.default_rng(4).standard_normal((3, 7, 5)).astype(np.float32)
    n = np.arange(105, dtype=np.int32).reshape(3, 7, 5)

    def f(x, n):
        absmax = lax.reduce(x, np.float32(0), lambda a, b: jnp.maximum(jnp.abs(a), jnp.abs(b)), (1,))
        pair = lax.reduce((x, n), (np.float32(0), np.int32(0)),
                          lambda a, b: (a[0] + b[0], a[1] + b[1]), (0, 2))
        return dict(absmax=absmax, psum=pair[0], nsum=pair[1],
                    empty=lax.reduce(x[:, :0], np.float32(2), lambda a, b: a * b + 0 * a, (1,)))

    check(f, x, n, tols=dict(psum=(1e-5, 1e-6)))


def test_reduce_pytree():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    check(lambda v: dict(zip("ab", lax.reduce((v, -v), (np.float32(0), np.float32(0)),
                                               lambda a, b: (a[0] + b[0], jnp.minimum(a[1], b[1])),
                                               (0,)))), x)


def test_argmax_with_no_output_elements():
    # Kept dims of size 0, reduced dim not empty: nothing to compute, but the
    # tree reduction must not ask MLX to infer a dim of an empty array.
    x = np.zeros((0, 3), np.float32)
    check(lambda v: dict(amax=jnp.argmax(v, 1), amin=jnp.argmin(v, 1)), x)


def _argmax_body(a, b):
    # JAX's own argmax comparator, written out so the value output is kept:
    # pjrtx maps this body onto MLX reductions (ops/reduce.cc).
    pick = (a[0] > b[0]) | (a[0] != a[0])
    pick_index = pick | ((a[0] == b[0]) & (a[1] < b[1]))
    return jnp.where(pick, a[0], b[0]), jnp.where(pick_index, a[1], b[1])


def test_arg_reduce_value_output_is_the_chosen_element():
    # The value output is the chosen element itself: -0 vs +0 ties keep the
    # lower index's zero, NaN rows return NaN, and a non-identity init takes
    # part (row 3: every element below the init).
    x = np.array([[-0.0, 0.0, -1.0, 0.0],
                  [0.0, -0.0, -0.0, -2.0],
                  [1.0, np.nan, 3.0, np.nan],
                  [-5.0, -6.0, -7.0, -8.0]], np.float32)
    idx = np.broadcast_to(np.arange(4, dtype=np.int32), x.shape).copy()

    def f(v, i):
        val, pos = lax.reduce((v, i), (np.float32(-np.inf), np.int32(0)), _argmax_body, (1,))
        val2, pos2 = lax.reduce((v, i), (np.float32(-4.5), np.int32(9)), _argmax_body, (1,))
        return dict(val=val, pos=pos, val2=val2, pos2=pos2)

    check_bits(lambda v: {k: a for k, a in f(v, idx).items() if k.startswith("val")}, x)
    check(lambda v: {k: a for k, a in f(v, idx).items() if k.startswith("pos")}, x)


def test_argmax_graph_does_not_grow_with_the_row_length():
    # Behaviour, not speed: the recognised argmax is a fixed set of MLX
    # reductions, so a row 128 times longer evaluates the same number of
    # primitives (the pairwise tree it replaces grew with log2 of the row).
    import jax
    from pjrtx import _pjrtx

    def count(n):
        f = jax.jit(lambda v: jnp.argmax(v, axis=1))
        x = jax.device_put(np.random.default_rng(n).standard_normal((3, n)).astype(np.float32),
                           jax.devices("pjrtx")[0])
        f(x).block_until_ready()
        _pjrtx.count_primitives(True)
        before = _pjrtx.primitives_evaluated()
        f(x).block_until_ready()
        n_prims = _pjrtx.primitives_evaluated() - before
        _pjrtx.count_primitives(False)
        return n_prims

    assert count(8) == count(1024)


@pytest.mark.parametrize("dt", [np.float16, np.float32, np.int32, np.uint8, np.bool_], ids=name)
def test_reduce_over_size_one_dims(dt):
    # Reducing only size-1 dims is a reshape on XLA:CPU: its simplifier
    # assumes the init is the identity and never applies it (a -0 element
    # stays -0, an init of 1 is not added). One jit per reduce, since XLA
    # treats such a reduce differently inside a larger program.
    if dt == np.bool_:
        x = np.array([True, False, True, False, False, True]).reshape(2, 1, 3, 1)
        inits = [("or", lax.bitwise_or, False), ("and", lax.bitwise_and, True),
                 ("or_true", lax.bitwise_or, True), ("and_false", lax.bitwise_and, False)]
    elif np.dtype(dt).kind == "f":
        x = np.array([-0.0, 0.0, np.nan, -np.inf, 1.5, -2.0], np.float64).astype(dt).reshape(2, 1, 3, 1)
        inits = [("add", lax.add, 0.0), ("add_negzero", lax.add, -0.0), ("add_one", lax.add, 1.0),
                 ("mul", lax.mul, 1.0), ("max", lax.max, -np.inf), ("max_zero", lax.max, 0.0),
                 ("min", lax.min, np.inf), ("min_negzero", lax.min, -0.0)]
    else:
        x = small_ints(dt, (2, 1, 3, 1), 3)
        lo, hi = np.iinfo(dt).min, np.iinfo(dt).max
        inits = [("add", lax.add, 0), ("add_two", lax.add, 2), ("mul", lax.mul, 1),
                 ("max", lax.max, lo), ("min", lax.min, hi), ("max_one", lax.max, 1)]
    for k, op, init in inits:
        for dims in [(1,), (3,), (1, 3)]:
            check(lambda v: {f"{k}_{dims}": lax.reduce(v, np.array(init, dt), op, dims)}, x)


def test_float_sum_keeps_positive_zero():
    # Sums of several negative zeros are +0 on XLA (the +0 init absorbs the
    # sign), which pjrtx keeps although it folds the +0 init away.
    x = np.full((3, 5), -0.0, np.float32)
    check(lambda v: {"rows": v.sum(1), "cols": v.sum(0), "all": v.sum(),
                     "pairs": v[:, :2].sum(1)}, x)


@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16, np.float32], ids=name)
def test_max_reduce_zero_sign_fixed_only_where_observable(monkeypatch, dt):
    from oracle import primitives_per_call
    monkeypatch.setenv("PJRTX_COMPILE", "never")
    # MLX's lowering is what is counted: these few floats would otherwise be
    # computed on the host (PJRTX_HOST), with the same values
    monkeypatch.setenv("PJRTX_HOST", "int")
    x = np.array([[-0.0, 0.0, -1.0, -0.0],
                  [-0.0, -0.0, -2.0, -5.0],
                  [0.0, -0.0, 1.0, 0.0],
                  [3.0, -0.0, 0.0, 2.0],
                  [-np.inf, -np.inf, -np.inf, 0.0]]).astype(dt)

    # x - max is returned: the signs of its zeros follow the max's (XLA's
    # max of +0 and -0 is +0, its min -0), so the reduces keep the fix.
    def shifted(x):
        return {"max": x - jnp.max(x, axis=1, keepdims=True),
                "min": x - jnp.min(x, axis=1, keepdims=True)}

    # JAX's softmax reads its max only through exp(x - max), where the sign
    # of a zero cannot show; log_softmax also through (x - max) - log(sum(
    # exp(x - max))), which is never 0 where the max's sign could matter
    # (zeros of both signs make the sum >= 2). The frontend marks both, and
    # MLX's max runs alone.
    def softmax(x):
        return {"softmax": jax.nn.softmax(x, axis=1), "log_softmax": jax.nn.log_softmax(x, axis=1)}

    # The same expression with another array's max: y's row need not hold
    # two exp(0) terms, the log can be 0, and a zero's sign shows (XLA's
    # max of -0 and +0 is +0 in either order).
    def other_rows(x, y):
        v = y - jnp.max(x, axis=1, keepdims=True)
        return {"other_rows": v - jnp.log(jnp.sum(jnp.exp(v), axis=1, keepdims=True))}

    # And x's own max put back on the wrong rows (m[j] subtracted from
    # row i): row 0's normaliser is log(1) = 0 while row 1's max is a zero
    # of mixed signs, so the sign shows in row 0.
    def crossed(x):
        v = x - jnp.broadcast_to(jnp.max(x, axis=1), x.shape)
        return {"crossed": v - jnp.log(jnp.sum(jnp.exp(v), axis=1, keepdims=True))}

    x2 = np.array([[-0.0, 0.0], [0.0, -0.0]]).astype(dt)
    y2 = np.array([[-0.0, -100.0], [-0.0, -100.0]]).astype(dt)
    x3 = np.array([[-100.0, -0.0], [-0.0, 0.0]]).astype(dt)

    check(shifted, x)
    check(other_rows, x2, y2)
    check(crossed, x3)
    # exp is within ~2 ulps on each side (pjrtx: 1 + expm1, XLA: its own
    # polynomial), then a 4-term sum and a divide or log, each one rounding:
    # 8 ulps of the result type bounds the difference (f16/bf16 compute in
    # f32 and round once).
    eps = float(ml_dtypes.finfo(dt).eps)
    check(softmax, x, rtol=8 * eps)
    views = lambda h: sum(n for k, n in h.items() if k.startswith("View"))
    assert views(primitives_per_call(shifted, x)) == 2  # one bit view per fix
    assert views(primitives_per_call(softmax, x)) == 0
    assert views(primitives_per_call(other_rows, x2, y2)) == 1
    assert views(primitives_per_call(crossed, x3)) == 1


@pytest.mark.parametrize("dt", [np.float32, ml_dtypes.bfloat16, np.int32], ids=name)
def test_keepdims_reduce_needs_no_reshape(monkeypatch, dt):
    # JAX's keepdims is a reduce and a broadcast_in_dim that re-inserts the
    # reduced dims; when that is every use, the reduce keeps its dims in MLX
    # and the broadcast reads them with no reshape node.
    from oracle import primitives_per_call
    monkeypatch.setenv("PJRTX_COMPILE", "never")
    x = np.random.default_rng(3).integers(-4, 5, (6, 5, 7)).astype(dt)

    def f(x):
        return {"centred": x - jnp.sum(x, axis=(0, 2), keepdims=True),
                "scaled": x * jnp.max(x, axis=-1, keepdims=True),
                "plain": jnp.sum(x, axis=-1)}  # no broadcast: MLX reduces without keepdims

    check(f, x)  # small integers: every sum is exact in each dtype
    h = primitives_per_call(f, x)
    assert not any(k in ("Reshape", "ExpandDims") for k in h), h


def test_argmax_is_one_mlx_arg_reduction(monkeypatch):
    # JAX's argmax/argmin (iota indices, init (-inf/+inf, 0)) are MLX's
    # argmax/argmin alone: MLX answers with the first NaN, else the lowest
    # index of the extreme, as JAX's body does (values: the test above).
    from oracle import primitives_per_call
    monkeypatch.setenv("PJRTX_COMPILE", "never")
    for f in (lambda v: jnp.argmax(v, 1), lambda v: jnp.argmin(v, 0)):
        h = primitives_per_call(f, ARG_VALUES)
        assert h.get("ArgReduce") == 1 and not {"Max", "Min", "Or", "GatherAxis"} & set(h), h


@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64], ids=name)
def test_sum_of_a_negation_keeps_xlas_bits(dt):
    # sum(-x) is computed as -sum(x), as XLA:CPU computes it (the negate then
    # fuses into the sum's consumers): rows of +0s, of -0s, of mixed zeros
    # (XLA gives -0 for each), with infinities and ordinary values must keep
    # XLA's values and zero signs, with and without keepdims, over one axis
    # and over all. (inf + -inf is NaN on both; its sign bit is not compared:
    # XLA's f16/bf16 sums give a NaN of the other sign.)
    rows = [[0.0, 0.0, 0.0, 0.0], [-0.0, -0.0, -0.0, -0.0], [0.0, -0.0, 0.0, -0.0],
            [1.5, -1.5, 0.0, -0.0], [np.inf, 1.0, 2.0, 3.0], [-np.inf, -0.0, 0.0, 5.0],
            [1.0, 2.0, 3.0, 4.0], [-2.5, 0.25, 8.0, -0.0]]
    x = np.array(rows, np.float64).astype(dt)

    def f(x):
        out = {"row": jnp.sum(-x, axis=1), "row_keep": jnp.sum(-x, axis=1, keepdims=True),
               "col": jnp.sum(-x, axis=0), "all": jnp.sum(-x),
               "then_scaled": jnp.sum(-x, axis=1, keepdims=True) * 3.0}
        return out

    with x64_for(dt):
        check(f, x)


ARG_RULE_DTYPES = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64]


@pytest.mark.parametrize("dt", ARG_RULE_DTYPES, ids=name)
def test_mlx_arg_rule_probe_matches_mlx(dt):
    # The one-mx::argmax lowering above relies on MLX's argmax/argmin giving
    # JAX's answer, which MLX's GPU kernels (and MLX before 0.32.2 anywhere)
    # need not do; pjrtx probes it per device and dtype. The probe's verdict
    # on the CPU must be what MLX itself does with NaNs, ties and signed
    # zeros, checked here through mlx.core against NumPy.
    import mlx.core as mx
    from pjrtx import _pjrtx

    rows = [[3, np.nan, 1, 5], [1, 2, np.nan], [-0.0, 0.0, -1, 5, 5, -1], [0.0, -0.0],
            [np.inf, np.nan, -np.inf], [-1, -2, np.nan]]
    mdt = {"float16": mx.float16, "bfloat16": mx.bfloat16, "float32": mx.float32,
           "float64": mx.float64}[name(dt)]
    agrees = True
    for r in rows:
        v = mx.array(np.array(r, np.float32)).astype(mdt)
        got = (mx.argmax(v, stream=mx.cpu).item(), mx.argmin(v, stream=mx.cpu).item())
        agrees &= got == (int(np.argmax(r)), int(np.argmin(r)))
    assert _pjrtx.mlx_rule("arg", "cpu", name(dt)) == agrees


@pytest.mark.parametrize("dt", ARG_RULE_DTYPES, ids=name)
def test_argmax_where_mlx_arg_rule_fails(mlx_rules_forced_off, dt, monkeypatch):
    # Where the probe says MLX's argmax would answer otherwise, JAX's
    # argmax/argmin are computed from max/min, isnan and the lowest
    # candidate index instead: the same answers as XLA:CPU for NaNs (first,
    # inside, last), ties and signed zeros, along both axes, on long rows.
    from oracle import primitives_per_call

    x = ARG_VALUES.astype(dt)
    rng = np.random.default_rng(4)
    long = rng.integers(0, 5, (5, 1001)).astype(dt)
    long[1, 500] = long[3, 17] = long[3, 900] = np.nan
    f = lambda v: dict(amax0=jnp.argmax(v, 0), amax1=jnp.argmax(v, 1), amin0=jnp.argmin(v, 0),
                       amin1=jnp.argmin(v, 1), amax_all=jnp.argmax(v))
    with x64_for(dt):
        check(f, x)
        check(f, long)
        monkeypatch.setenv("PJRTX_COMPILE", "never")
        h = primitives_per_call(lambda v: jnp.argmax(v, 1), x)
    assert "Max" in h, h  # the general path, not the single-ArgReduce lowering
