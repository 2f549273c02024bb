"""compare, select and clamp (ops/compare.cc) against XLA:CPU."""
import ml_dtypes
import numpy as np
import pytest
from jax import lax

from oracle import assert_same
from test_ops_elementwise import (FLOATS, INTS, check, float_edges, int_edges, name,
                                  pairs, x64_for)

DIRECTIONS = dict(eq=lax.eq, ne=lax.ne, lt=lax.lt, le=lax.le, gt=lax.gt, ge=lax.ge)


def all_directions(x, y):
    return {k: f(x, y) for k, f in DIRECTIONS.items()}


def edges(dt):
    if dt is bool:
        return np.array([False, True])
    if np.dtype(dt).kind in "iu":
        return int_edges(dt)
    return float_edges(dt)


@pytest.mark.parametrize("dt", [bool] + INTS + FLOATS, ids=name)
def test_compare_all_directions(dt):
    # Every pair of edge values: NaN is unordered, -0 == +0, unsigned max
    # is the largest (not -1), false < true.
    x, y = pairs(edges(dt))
    with x64_for(dt):
        check(all_directions, x, y)


def test_compare_complex_eq_ne():
    v = np.array([0, 1, 1j, -1 - 1j, np.nan, complex(0, np.nan), complex(-0.0, 0.0)],
                 np.complex64)
    x, y = pairs(v)
    check(lambda x, y: dict(eq=lax.eq(x, y), ne=lax.ne(x, y)), x, y)


# TOTALORDER compares: JAX's eq_to/le_to/lt_to primitives (used by sort's
# comparator) lower to stablehlo.compare with compare_type TOTALORDER.
TOTAL = dict(eq=lax.eq_to_p.bind, le=lax.le_to_p.bind, lt=lax.lt_to_p.bind)


@pytest.mark.parametrize("dt", FLOATS, ids=name)
def test_compare_totalorder(dt):
    # -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN.
    v = float_edges(dt)
    v = np.concatenate([v, -v])  # -NaN (sign bit set) and the negated values
    x, y = pairs(v)
    with x64_for(dt):
        check(lambda x, y: {k: f(x, y) for k, f in TOTAL.items()}, x, y)


@pytest.mark.parametrize("dt", [np.int32, np.uint8], ids=name)
def test_compare_totalorder_integers(dt):
    x, y = pairs(int_edges(dt))
    check(lambda x, y: {k: f(x, y) for k, f in TOTAL.items()}, x, y)


def test_compare_shapes():
    rng = np.random.default_rng(1)
    a = rng.integers(-3, 3, (4, 6)).astype(np.float32)
    b = rng.integers(-3, 3, (6, 4)).astype(np.float32)
    assert_same(lambda x, y: lax.lt(x, y), a.T, b)  # transposed input
    assert_same(lambda x, y: lax.ge(x, y), a[::2, ::3], b[1::3, ::2])  # strided views
    assert_same(lambda x, y: lax.eq(x, y), np.float32(np.nan), np.float32(np.nan))
    z = np.zeros((0, 3), np.int32)
    assert_same(lambda x, y: lax.ne(x, y), z, z)
    assert_same(lambda x: lax.gt(x, np.float32(0)), rng.standard_normal((2, 3, 4)).astype(np.float32))


@pytest.mark.parametrize("dt", [bool, np.int8, np.uint32, ml_dtypes.bfloat16, np.float32,
                                np.float64, np.complex64], ids=name)
def test_select(dt):
    rng = np.random.default_rng(2)
    pred = rng.integers(0, 2, (3, 5)).astype(bool)
    a = rng.integers(0, 2 if dt is bool else 100, (3, 5)).astype(dt)
    b = rng.integers(0, 2 if dt is bool else 100, (3, 5)).astype(dt)
    with x64_for(dt):
        assert_same(lax.select, pred, a, b)
        assert_same(lax.select, np.bool_(True), a, b)  # scalar predicate
        assert_same(lax.select, pred.T, a.T, b.T[:, :])  # transposed inputs
        e = np.zeros((0, 3), dt)
        assert_same(lax.select, np.zeros((0, 3), bool), e, e)


@pytest.mark.parametrize("dt", [np.int8, np.uint16, np.int64, np.float16, ml_dtypes.bfloat16,
                                np.float32, np.float64], ids=name)
def test_clamp(dt):
    # Every (lo, x, hi) over a few edge values, lo > hi included; NaN in any
    # position propagates, and -0/+0 order as in maximum/minimum.
    v = edges(dt)
    v = v[:: max(1, len(v) // 9)]
    lo, x, hi = (a.ravel() for a in np.meshgrid(v, v, v, indexing="ij"))
    with x64_for(dt):
        check(lambda lo, x, hi: dict(clamp=lax.clamp(lo, x, hi)), lo, x, hi)
        # Scalar bounds broadcast.
        check(lambda x: dict(clamp=lax.clamp(dt(1), x, dt(3))), x)


def test_clamp_signed_zero_and_nan():
    v = np.array([0.0, -0.0, np.nan, 1.0, -1.0], np.float32)
    lo, x, hi = (a.ravel() for a in np.meshgrid(v, v, v, indexing="ij"))
    check(lambda lo, x, hi: dict(clamp=lax.clamp(lo, x, hi)), lo, x, hi)


def test_clamp_bool():
    v = np.array([False, True])
    lo, x, hi = (a.ravel() for a in np.meshgrid(v, v, v, indexing="ij"))
    check(lambda lo, x, hi: dict(clamp=lax.clamp(lo, x, hi)), lo, x, hi)
