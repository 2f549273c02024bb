"""dot_general and dot (ops/dot.cc) against XLA:CPU.

Float tolerances: both sides accumulate in the result type but in different
orders (MLX's BLAS vs XLA's Eigen/loops), so f32 sums of K products differ by
a few ulps of the largest partial sum (rtol 1e-5 with O(1) inputs); f16/bf16
results differ by one rounding of the f32 accumulator (1e-3 / 8e-3).
Integer dots are exact and wrap like XLA.
"""
import jax
import ml_dtypes
import numpy as np
import pytest
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import mlir
from jaxlib.mlir.dialects import stablehlo

from oracle import assert_same, primitives_per_call, sum_bound
from pjrtx import versions
from test_ops_elementwise import check, name, x64_for

RTOL = {np.float16: 2e-3, ml_dtypes.bfloat16: 1e-2, np.float32: 1e-5, np.float64: 1e-12,
        np.complex64: 1e-5}


def sample(dt, shape, seed):
    rng = np.random.default_rng(seed)
    if np.dtype(dt).kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(max(info.min, -100), min(info.max, 100), shape, endpoint=True).astype(dt)
    if np.dtype(dt).kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    if dt is bool:
        return rng.integers(0, 2, shape).astype(bool)
    return rng.standard_normal(shape).astype(dt)


def dims(lc, rc, lb=(), rb=()):
    return ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))


# (lhs shape, rhs shape, dimension numbers): plain matmul, vector cases,
# batch dims in odd positions, several contracting dims, no contraction
# (outer product), and zero-size contraction/free dims.
CASES = {
    "matmul": ((5, 7), (7, 3), dims([1], [0])),
    "matvec": ((5, 7), (7,), dims([1], [0])),
    "vecvec": ((7,), (7,), dims([0], [0])),
    "lhs_contract_first": ((7, 5), (3, 7), dims([0], [1])),
    "batch_odd_positions": ((3, 2, 4, 5), (5, 4, 6, 2), dims([2], [1], [1, 3], [3, 0])),
    "multi_contract": ((2, 3, 4, 5), (5, 3, 6), dims([3, 1], [0, 1])),
    "multi_contract_batch": ((4, 3, 2, 5), (2, 5, 3, 4), dims([1, 3], [2, 1], [2, 0], [0, 3])),
    "outer": ((3, 2), (4,), dims([], [])),
    "batch_only": ((2, 3), (2, 3), dims([], [], [0, 1], [0, 1])),
    "k_zero": ((3, 0), (0, 4), dims([1], [0])),
    "m_zero": ((0, 5), (5, 4), dims([1], [0])),
}


def all_cases(dt, seed=0):
    args = []
    for i, (ls, rs, _) in enumerate(CASES.values()):
        args += [sample(dt, ls, seed + 2 * i), sample(dt, rs, seed + 2 * i + 1)]
    return args


def dot_all(*args, preferred=None, only=None):
    out = {}
    for i, (k, (_, _, dn)) in enumerate(CASES.items()):
        if only and k not in only:
            continue
        out[k] = lax.dot_general(args[2 * i], args[2 * i + 1], dn,
                                 preferred_element_type=preferred)
    return out


@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64,
                                np.complex64, np.int8, np.int32, np.uint8, np.int64], ids=name)
def test_dot_general_shapes(dt):
    tol = RTOL.get(dt, 0.0)
    with x64_for(dt):
        check(dot_all, *all_cases(dt), rtol=tol, atol=tol)


PREFERRED_CASES = ("matmul", "vecvec", "batch_odd_positions", "multi_contract_batch", "k_zero")


@pytest.mark.parametrize("src,dst", [(ml_dtypes.bfloat16, np.float32), (np.float16, np.float32),
                                     (np.int8, np.int32), (np.uint8, np.uint32),
                                     (np.int16, np.int64), (np.float32, np.float64)],
                         ids=lambda d: name(d))
def test_dot_general_preferred_element_type(src, dst):
    # The wider result type accumulates in that type: bf16 x bf16 -> f32 is
    # f32-accurate, int8 x int8 -> int32 does not wrap at 127.
    tol = RTOL.get(dst, 0.0)
    args = all_cases(src, seed=10)
    if np.dtype(src).kind == "i":
        args = [np.clip(a.astype(np.int64) * 4, np.iinfo(src).min, np.iinfo(src).max).astype(src)
                for a in args]
    with x64_for(src, dst):
        check(lambda *a: dot_all(*a, preferred=dst, only=PREFERRED_CASES), *args, rtol=tol,
              atol=tol)


def test_integer_dot_wraps():
    # int8 results wrap modulo 2^8 exactly like XLA's int8 accumulation.
    a = np.full((2, 50), 100, np.int8)
    b = np.full((50, 3), 7, np.int8)
    assert_same(lambda a, b: lax.dot(a, b), a, b)
    big = np.full((1, 4), np.iinfo(np.int32).max, np.int32)
    assert_same(lambda a, b: lax.dot(a, b), big, big.T)


def test_bool_dot():
    a = sample(bool, (4, 6), 20)
    b = sample(bool, (6, 3), 21)
    assert_same(lambda a, b: lax.dot_general(a, b, dims([1], [0])), a, b)


def test_dot_strided_and_transposed_inputs():
    rng = np.random.default_rng(30)
    a = rng.standard_normal((8, 12)).astype(np.float32)
    b = rng.standard_normal((12, 10)).astype(np.float32)
    f = lambda a, b: lax.dot(a, b)
    # A K-term dot's rounding depends on the summation order: bound it by
    # sum |a_ik b_kj| (sum_bound), not by the result.
    a2, b2 = a[::2, ::3], b[::3, 1::2]
    assert_same(f, a2, b2, bound=sum_bound(f, a2, b2, terms=a2.shape[1]))
    assert_same(f, b.T, a.T, bound=sum_bound(f, b.T, a.T, terms=b.shape[0]))


def test_dot_special_values():
    # inf * 0 = NaN and NaN propagate through the sum.
    a = np.array([[1.0, np.inf], [np.nan, 2.0], [0.0, -0.0]], np.float32)
    b = np.array([[0.0, 1.0], [1.0, 2.0]], np.float32)
    assert_same(lambda a, b: lax.dot(a, b), a, b)


# The legacy stablehlo.dot (lhs's last dim with rhs's first): JAX emits
# dot_general only, so bind a primitive that emits the old op itself.
legacy_dot_p = Primitive("stablehlo_legacy_dot")
legacy_dot_p.def_abstract_eval(
    lambda a, b: jax.core.ShapedArray(a.shape[:-1] + b.shape[1:], a.dtype))
mlir.register_lowering(legacy_dot_p, lambda ctx, a, b: [
    stablehlo.dot(versions.aval_to_ir_type(ctx.module_context, ctx.avals_out[0]), a, b)])


def test_legacy_dot_op():
    m = sample(np.float32, (3, 4), 40)
    v = sample(np.float32, (4,), 41)
    n = sample(np.float32, (4, 5), 42)

    def f(m, v, n):
        return dict(mv=legacy_dot_p.bind(m, v), vv=legacy_dot_p.bind(v, v),
                    vm=legacy_dot_p.bind(v, n), mm=legacy_dot_p.bind(m, n))

    check(f, m, v, n, rtol=1e-5, atol=1e-6)
    check(lambda a, b: dict(i=legacy_dot_p.bind(a, b)), sample(np.int32, (3, 4), 43),
          sample(np.int32, (4, 2), 44))


def test_transpose_of_a_dot_is_the_swapped_dot(monkeypatch):
    # JAX's weight gradient is transpose(dot_general(g, x, [0] x [0])); the
    # frontend runs it as dot_general(x, g): one transposed view, not three.
    # With batch dims, several free dims, and a dot that has another use
    # (then the transpose stays).
    monkeypatch.setenv("PJRTX_COMPILE", "never")  # count the eager graph
    r = np.random.default_rng(3)
    g, x = r.standard_normal((6, 5), np.float32), r.standard_normal((6, 7), np.float32)
    dn = (((0,), (0,)), ((), ()))
    f = lambda g, x: lax.transpose(lax.dot_general(g, x, dn), (1, 0))
    assert_same(f, g, x, bound=sum_bound(f, g, x, terms=6))
    a, b = r.standard_normal((2, 3, 4, 5), np.float32), r.standard_normal((2, 5, 6), np.float32)
    bdn = (((3,), (1,)), ((0,), (0,)))
    fb = lambda a, b: lax.transpose(lax.dot_general(a, b, bdn), (0, 3, 1, 2))
    assert_same(fb, a, b, bound=sum_bound(fb, a, b, terms=5))
    def both(g, x):
        d = lax.dot_general(g, x, dn)
        return jax.numpy.concatenate([d.ravel(), lax.transpose(d, (1, 0)).ravel()])
    assert_same(both, g, x, bound=sum_bound(both, g, x, terms=6))
    other_perm = lambda a, b: lax.transpose(lax.dot_general(a, b, bdn), (1, 0, 2, 3))
    assert_same(other_perm, a, b, bound=sum_bound(other_perm, a, b, terms=5))

    hist = primitives_per_call(f, g, x)
    assert hist == {"Matmul": 1, "Transpose": 1}, hist
