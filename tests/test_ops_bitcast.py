"""bitcast_convert between widths, and jax.random (threefry on u32 plus a
bitcast to float) bit-exact with XLA:CPU."""
import jax
import jax.numpy as jnp
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


def test_random_bit_exact():
    key = np.asarray(jax.random.PRNGKey(1))  # raw u32[2] key data, an ordinary input
    assert_same(lambda k: jax.random.uniform(k, (7,)), key)
    assert_same(lambda k: jax.random.bits(k, (4, 3), jnp.uint32), key)
    assert_same(lambda k: jax.random.randint(k, (6,), -5, 10), key)
    assert_same(lambda k: jax.random.split(k, 3), key)
    # normal goes through erf_inv: allow for a last-bit difference in the polynomial
    assert_same(lambda k: jax.random.normal(k, (3, 4)), key, rtol=1e-6, atol=1e-6)
