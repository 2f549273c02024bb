"""bitcast_convert between widths, and jax.random (threefry on u32 plus a
bitcast to float) bit-exact with XLA:CPU."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

from oracle import assert_same

F = np.array([1.5, -0.0, np.nan, np.inf, 3e-39, -2.0], np.float32)


@pytest.mark.parametrize("to", [jnp.int32, jnp.uint32, jnp.uint8, jnp.int16, jnp.float16, jnp.bfloat16])
def test_bitcast_from_f32(to):
    assert_same(lambda x: lax.bitcast_convert_type(x, to), F)
    assert_same(lambda x: lax.bitcast_convert_type(x, to), np.float32(2.5))


@pytest.mark.parametrize("src,to", [((3, 2, 4), jnp.float32), ((3, 4, 2), jnp.bfloat16),
                                    ((5, 2), jnp.int16), ((4,), jnp.int32)])
def test_bitcast_narrow_to_wide(src, to):
    u = np.arange(np.prod(src), dtype=np.uint8).reshape(src)
    assert_same(lambda x: lax.bitcast_convert_type(x, to), u)


def test_bitcast_zero_size():
    assert_same(lambda x: lax.bitcast_convert_type(x, jnp.uint8), np.zeros((0, 3), np.float32))


# ---- int4 / uint4: XLA:CPU packs element j of the last dim into bits
# [4j, 4j + 4): u4[1, 2] <-> u8 0x21.

INT4S = [ml_dtypes.int4, ml_dtypes.uint4]
WIDE = [np.int8, np.uint8, np.int16, np.uint16, np.float16, ml_dtypes.bfloat16, np.int32,
        np.uint32, np.float32, np.int64, np.uint64, np.float64]


def nibbles(shape, dt, seed=0):
    return np.random.default_rng(seed).integers(0, 16, shape).astype(np.uint8).view(dt)


def ids(d):
    return np.dtype(d).name


@pytest.mark.parametrize("src", INT4S, ids=ids)
def test_bitcast_int4_same_width(src):
    other = INT4S[1 - INT4S.index(src)]
    every = np.arange(16, dtype=np.uint8).view(src)  # s4 -1 <-> u4 15, s4 -8 <-> u4 8

    def f(x):  # the s32 read shows the stored byte, which a transfer masks
        y = lax.bitcast_convert_type(x, other)
        return y, lax.convert_element_type(y, np.int32)

    assert_same(f, every)
    assert_same(f, every.reshape(4, 4).T)
    assert_same(f, every[9])


@pytest.mark.parametrize("wide", WIDE, ids=ids)
@pytest.mark.parametrize("q", INT4S, ids=ids)
def test_bitcast_int4_to_wide(q, wide):
    k = 2 * np.dtype(wide).itemsize  # nibbles per element
    with jax.enable_x64(np.dtype(wide).itemsize == 8):
        for shape in [(k,), (3, k), (2, 3, k)]:
            assert_same(lambda x: lax.bitcast_convert_type(x, wide), nibbles(shape, q))
        assert_same(lambda x: lax.bitcast_convert_type(x.T, wide), nibbles((k, 3), q))


@pytest.mark.parametrize("wide", WIDE, ids=ids)
@pytest.mark.parametrize("q", INT4S, ids=ids)
def test_bitcast_wide_to_int4(q, wide):
    with jax.enable_x64(np.dtype(wide).itemsize == 8):
        for shape in [(), (3,), (2, 3)]:
            n = int(np.prod(shape)) * np.dtype(wide).itemsize
            x = np.random.default_rng(n).integers(0, 256, n).astype(np.uint8).view(wide).reshape(shape)
            assert_same(lambda x: lax.bitcast_convert_type(x, q), x)


def test_bitcast_int4_round_trip_and_zero_size():
    x = nibbles((5, 4), ml_dtypes.int4)
    # u16 arithmetic in between: the carry must cross nibbles like XLA's
    assert_same(lambda x: lax.bitcast_convert_type(
        lax.bitcast_convert_type(x, jnp.uint16) + 0x0fff, ml_dtypes.int4), x)
    assert_same(lambda x: lax.bitcast_convert_type(x, jnp.uint8), np.zeros((0, 2), ml_dtypes.uint4))
    assert_same(lambda x: lax.bitcast_convert_type(x, ml_dtypes.int4), np.zeros((0, 3), np.uint32))


def test_bitcast_int4_under_vmap():
    f = jax.vmap(lambda x: lax.bitcast_convert_type(x, jnp.uint8))
    assert_same(f, nibbles((3, 4, 2), ml_dtypes.int4))
    g = jax.vmap(lambda x: lax.bitcast_convert_type(x, ml_dtypes.uint4))
    assert_same(g, np.arange(6, dtype=np.uint16).reshape(3, 2) * 0x1357)


def test_random_bit_exact():
    key = np.asarray(jax.random.PRNGKey(1))  # raw u32[2] key data, an ordinary input
    assert_same(lambda k: jax.random.uniform(k, (7,)), key)
    assert_same(lambda k: jax.random.bits(k, (4, 3), jnp.uint32), key)
    assert_same(lambda k: jax.random.randint(k, (6,), -5, 10), key)
    assert_same(lambda k: jax.random.split(k, 3), key)
    # normal goes through erf_inv: allow for a last-bit difference in the polynomial
    assert_same(lambda k: jax.random.normal(k, (3, 4)), key, rtol=1e-6, atol=1e-6)
