"""stablehlo.sort against XLA:CPU: JAX's comparators (canonicalized
ascending, TOTALORDER descending for top_k, multi-key), stability with
duplicates, NaN and -0 placement, and the general comparator path."""
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from oracle import assert_same

F = np.array([3.0, -0.0, np.nan, 1.0, 0.0, -np.inf, 1.0, -np.nan, 2.0, np.inf, 0.0, -0.0], np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, jnp.bfloat16, np.int8, np.int32,
                                   np.uint8, np.uint32, np.bool_])
def test_sort_and_argsort(dtype):
    x = F.astype(dtype) if np.issubdtype(np.dtype(dtype), np.floating) or dtype is jnp.bfloat16 \
        else np.array([3, 1, 0, 2, 1, 255, 0, 7, 1, 3, 2, 1]).astype(dtype)
    assert_same(jnp.sort, x)
    assert_same(jnp.argsort, x)               # stable: ties keep input order
    assert_same(lambda x: jnp.sort(x, descending=True), x)
    assert_same(lambda x: jnp.argsort(x, descending=True, stable=True), x)


def test_sort_axes_and_shapes():
    m = np.random.default_rng(0).standard_normal((4, 7, 3)).astype(np.float32)
    assert_same(lambda m: jnp.sort(m, axis=0), m)
    assert_same(lambda m: jnp.argsort(m, axis=1), m)
    assert_same(jnp.sort, np.zeros((0,), np.float32))
    assert_same(jnp.sort, np.float32([5.0]))


def test_multi_key_and_values():
    k1 = np.array([3, 1, 2, 1, 3, 0, 2, 2, 1], np.int32)
    k2 = F[:9]
    assert_same(lambda a, b: lax.sort((a, b), num_keys=2), k1, k2)
    assert_same(lambda a, b: lax.sort((a, b), num_keys=1), k1, k2)
    assert_same(lambda a, b, c: lax.sort((a, b, c), num_keys=2), k1, k2, np.arange(9, dtype=np.int32))
    assert_same(lambda a, b: jnp.lexsort((a, b)), k2, k1)


def test_top_k_total_order():
    v = np.array([1.0, -0.0, 0.0, 5.0, np.nan, 5.0, -3.0], np.float32)
    assert_same(lambda v: lax.top_k(v, 4), v)
    big = np.random.default_rng(1).standard_normal((3, 5000)).astype(np.float32)
    assert_same(lambda v: lax.top_k(v, 5), big)   # n > 4096: only the fast path can do it
    assert_same(jnp.sort, big)


def test_general_comparator_path():
    # complex keys have no probe set: the comparator runs on all pairs
    c = (np.array([1, 0, 1, 2, 0, 1], np.float32) + 1j * np.array([2, 5, -1, 0, 5, 2], np.float32))
    assert_same(jnp.sort, c.astype(np.complex64))
    assert_same(jnp.argsort, c.astype(np.complex64))
