"""Small floats (f8e4m3fn, f8e5m2, f8e4m3, f8e3m4, the FNUZ types, f8e8m0fnu,
f4e2m1fn) against XLA:CPU, byte for byte.

MLX has none of these types: pjrtx stores them as bytes (backend/mlx/
small_float.h), converts exactly to f16/f32 to compute (backend/mlx/widen.h,
as XLA:CPU's HLO does: convert -> f16 op -> convert) and rounds back once to
nearest even with each type's overflow/NaN/zero rules.
"""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

from oracle import run_on
from pjrtx import versions

SMALL = [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.float8_e4m3,
         ml_dtypes.float8_e3m4, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2fnuz,
         ml_dtypes.float8_e4m3b11fnuz, ml_dtypes.float8_e8m0fnu, ml_dtypes.float4_e2m1fn]


def name(dt):
    return np.dtype(dt).name


def every_value(dt):
    """Every encoding of dt (16 for the 4-bit type, else 256)."""
    n = 16 if np.dtype(dt).name.startswith("float4") else 256
    return np.arange(n, dtype=np.uint8).view(dt)


def finite_values(dt):
    v = every_value(dt)
    return v[np.isfinite(v.astype(np.float32))]


def computable_values(dt):
    """Finite values that XLA:CPU does not flush when it computes: it runs
    with denormals read as zero (DAZ), and e8m0's 2^-127 is an f32 denormal
    (its f32 ops see 0), the FNUZ types' smallest values f16 denormals. pjrtx
    does not flush; those values are left out of op tests."""
    v = finite_values(dt)
    f = np.abs(v.astype(np.float32))
    tiny = np.finfo(np.float32).tiny if dt is ml_dtypes.float8_e8m0fnu else np.finfo(np.float16).tiny
    return v[(f == 0) | (f >= tiny)]


def bytes_of(a):
    a = np.ascontiguousarray(np.asarray(a))
    return a.view(np.uint8) if a.dtype.itemsize == 1 else a.view(f"u{a.dtype.itemsize}")


def same_bits(f, *args):
    """f on pjrtx equals f on XLA:CPU bit for bit (NaN payloads included)."""
    got = run_on(jax.devices("pjrtx")[0], f, *args)
    want = run_on(jax.devices("cpu")[0], f, *args)
    assert jax.tree.structure(got) == jax.tree.structure(want)  # zip drops no leaf
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        gb, wb = bytes_of(g), bytes_of(w)
        bad = np.nonzero(gb.ravel() != wb.ravel())[0]
        assert bad.size == 0, f"{bad.size} differ, first at {bad[:5]}: got {gb.ravel()[bad[:5]]} want {wb.ravel()[bad[:5]]}"
    return got


def float_sources(dt, src=np.float32, seed=0):
    """Every value of dt, the midpoints between neighbours and their float
    neighbours (ties and near-ties), overflow, inf, NaN, signed zeros, tiny."""
    v = np.unique(every_value(dt).astype(np.float64))
    v = v[np.isfinite(v)]
    mids = (v[:-1] + v[1:]) / 2
    rng = np.random.default_rng(seed)
    big = float(v.max())
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, big * 1.01, big * 1.5, big * 4,
                -big * 1.5, 1e-30, -1e-30, 1e30, -1e30]
    with np.errstate(over="ignore"):
        x = np.concatenate([v, mids, rng.normal(size=500) * big / 3, specials]).astype(src)
        return np.concatenate([x, np.nextafter(x, np.inf, dtype=src), np.nextafter(x, -np.inf, dtype=src)])


@pytest.mark.parametrize("dt", SMALL, ids=name)
def test_round_trip_every_byte(dt, pjrtx_device):
    v = every_value(dt).reshape(-1, 4 if v_len(dt) == 16 else 16)
    back = np.asarray(jax.device_put(v, pjrtx_device))
    assert back.dtype == v.dtype
    np.testing.assert_array_equal(bytes_of(back), bytes_of(v))
    same_bits(lambda a: a, v)
    same_bits(lambda a: a.T[::-1], v)  # byte moves keep every payload


def v_len(dt):
    return every_value(dt).size


def test_f4_high_nibble_is_ignored(pjrtx_device):
    # ml_dtypes keeps float4 in a byte's low nibble; XLA:CPU reads only it.
    dirty = (np.arange(32, dtype=np.uint8) * 0x1b + 0x80).view(ml_dtypes.float4_e2m1fn)
    same_bits(lambda a: a.astype(jnp.float32), dirty)
    same_bits(lambda a: a, dirty)


@pytest.mark.parametrize("dt", SMALL, ids=name)
def test_convert_from_f32(dt):
    same_bits(lambda a: a.astype(dt), float_sources(dt, np.float32))


@pytest.mark.parametrize("src", [np.float16, ml_dtypes.bfloat16], ids=name)
@pytest.mark.parametrize("dt", SMALL, ids=name)
def test_convert_from_half(dt, src):
    with np.errstate(over="ignore"):
        x = float_sources(dt, np.float32).astype(src)
    same_bits(lambda a: a.astype(dt), x)


@pytest.mark.parametrize("dt", SMALL, ids=name)
def test_convert_from_f64_rounds_once(dt):
    # XLA:CPU rounds f64 straight to the small type: a value a hair above a
    # midpoint goes up, where rounding to f32 first would land on the tie.
    x = float_sources(dt, np.float64)
    x = np.concatenate([x, x * (1 + 2.0 ** -40), x * (1 - 2.0 ** -40)])
    with jax.enable_x64(True):
        same_bits(lambda a: a.astype(dt), x)


@pytest.mark.parametrize("dt", SMALL, ids=name)
def test_convert_from_ints(dt):
    x = np.array([0, 1, -1, 2, 3, 5, 7, 100, -100, 255, 448, 449, 500, 57344, 61440, 2 ** 20 + 1,
                  2 ** 24 + 1, -(2 ** 31)], np.int64)
    with jax.enable_x64(True):
        for it in (np.int8, np.uint8, np.int32, np.int64):
            info = np.iinfo(it)
            same_bits(lambda a: a.astype(dt), x[(x >= info.min) & (x <= info.max)].astype(it))


TARGETS = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int32, np.uint8, np.int64, bool]


@pytest.mark.parametrize("dt", SMALL, ids=name)
def test_convert_to_wider(dt):
    with jax.enable_x64(True):
        same_bits(lambda a: {name(t): a.astype(t) for t in TARGETS}, every_value(dt))


@pytest.mark.parametrize("dt", SMALL, ids=name)
def test_convert_between_small_floats(dt):
    same_bits(lambda a: {name(t): a.astype(t) for t in SMALL if t is not dt}, every_value(dt))


@pytest.mark.parametrize("dt", SMALL, ids=name)
def test_arithmetic(dt):
    # Every finite pair: rounding of f16 results back to the small type,
    # overflow, underflow and ties. NaN inputs are left out: XLA swaps the
    # operands of commutative ops, which decides which NaN sign survives.
    v = computable_values(dt)
    if dt is ml_dtypes.float8_e8m0fnu:
        # XLA:CPU also flushes f32 results below 2^-126 to 0 (FTZ; e8m0 of 0
        # is NaN): keep products and sums in f32's normal range.
        f = v.astype(np.float32)
        v = v[(f >= 2.0 ** -60) & (f <= 2.0 ** 60)]
    a, b = np.meshgrid(v, v)
    a, b = a.ravel(), b.ravel()
    def f(x, y):
        return {"add": x + y, "sub": x - y, "mul": x * y, "max": jnp.maximum(x, y),
                "neg": -x, "abs": jnp.abs(x), "sq": x * x + 1}
    same_bits(f, a, b)


@pytest.mark.parametrize("dt", SMALL, ids=name)
def test_compare_and_select(dt):
    v = every_value(dt)
    a, b = np.meshgrid(v, v)
    a, b = a.ravel(), b.ravel()
    same_bits(lambda x, y: {"lt": x < y, "eq": x == y, "ne": x != y, "ge": x >= y,
                            "isnan": jnp.isnan(x), "sel": jnp.where(x < y, x, y)}, a, b)


@pytest.mark.parametrize("dt", SMALL, ids=name)
def test_constants_in_programs(dt):
    v = computable_values(dt)
    c = v[:: max(1, v.size // 7)]
    same_bits(lambda x: x.astype(jnp.float32) + jnp.asarray(c, dt).astype(jnp.float32)[:, None],
              v[:16])
    same_bits(lambda: jnp.full((3, 2), c[-1], dt))


@pytest.mark.parametrize("dt", [d for d in SMALL if np.dtype(d).itemsize == 1 and not np.dtype(d).name.startswith("float4")], ids=name)
def test_bitcast_convert(dt):
    v = every_value(dt)
    same_bits(lambda a: {"s8": lax.bitcast_convert_type(a, jnp.int8),
                         "u8": lax.bitcast_convert_type(a, jnp.uint8),
                         "back": lax.bitcast_convert_type(lax.bitcast_convert_type(a, jnp.uint8), dt),
                         "u16": lax.bitcast_convert_type(a.reshape(-1, 2), jnp.uint16)}, v)


MIXED = [(ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2), (ml_dtypes.float8_e5m2, ml_dtypes.float8_e4m3fn),
         (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fn), (ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2fnuz)]


@pytest.mark.parametrize("lhs,rhs", MIXED, ids=lambda d: name(d))
def test_mixed_fp8_dot_general(lhs, rhs):
    rng = np.random.default_rng(1)
    a = rng.normal(size=(3, 8, 16)).astype(lhs)
    b = rng.normal(size=(3, 16, 5)).astype(rhs)
    f = lambda x, y: lax.dot_general(x, y, (((2,), (1,)), ((0,), (0,))), preferred_element_type=jnp.float32)
    got = run_on(jax.devices("pjrtx")[0], f, a, b)
    want = run_on(jax.devices("cpu")[0], f, a, b)
    assert got.dtype == want.dtype == np.float32
    # Exact products (an f8 x f8 product fits in f32), summed in f32 in any
    # order: the error is bounded by k * eps32 * sum |a_i b_i|.
    terms = np.einsum("bik,bkj->bij", np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    np.testing.assert_array_less(np.abs(got.astype(np.float64) - want), 16 * np.finfo(np.float32).eps * terms + 1e-30)


@pytest.mark.parametrize("dt", SMALL, ids=name)
def test_reduce_max_and_sort_of_finite_values(dt):
    if dt == ml_dtypes.float4_e2m1fn and versions.xla_cpu_defect("float4 reduce"):
        pytest.skip(versions.xla_cpu_defect("float4 reduce"))
    v = computable_values(dt)
    rng = np.random.default_rng(2)
    x = rng.permutation(v)
    same_bits(lambda a: {"max": jnp.max(a), "min": jnp.min(a), "sort": jnp.sort(a),
                         "argmax": jnp.argmax(a)}, x)
