import jax.numpy as jnp
import numpy as np
from oracle import assert_same


def test_tanh_matmul_sum():
    a = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    b = np.ones((3, 2), np.float32)
    assert_same(lambda a, b: jnp.tanh(a @ b).sum(0), a, b, rtol=1e-6)


def test_integer_division_by_zero_and_overflow():
    x = np.array([7, -7, 7, -7, np.iinfo(np.int32).min, 5, 0], np.int32)
    y = np.array([2, 2, -2, -2, -1, 0, 0], np.int32)
    assert_same(lambda x, y: (x // y, x % y, jnp.sign(x) * (jnp.abs(x) // jnp.where(y == 0, 1, jnp.abs(y)))), x, y)
