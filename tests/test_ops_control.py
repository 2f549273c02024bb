"""while / case / if (host-driven control steps) and reduce_window
(cumulative fast path and pooling) against XLA:CPU."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from oracle import assert_same

X = np.arange(6, dtype=np.float32)
M = np.random.default_rng(0).standard_normal((2, 9, 8, 3)).astype(np.float32)


def test_loops():
    assert_same(lambda x: lax.fori_loop(0, 10, lambda i, c: c * 1.1 + i, x), X, rtol=1e-6)
    assert_same(lambda x: lax.while_loop(lambda c: c[0] < 100, lambda c: (c[0] * 2 + 1, c[1] + c[0]),
                                         (x[0], x)), X)
    assert_same(lambda x: lax.while_loop(lambda c: c < 0, lambda c: c + 1, x[0]), X)  # zero trips
    assert_same(lambda x: lax.scan(lambda c, v: (c + v, c * v), 0.0, x), X)
    assert_same(jax.grad(lambda x: lax.fori_loop(0, 3, lambda i, c: jnp.sin(c) * c, x).sum()), X,
                rtol=1e-5)


def test_long_loop_memory_stays_bounded():
    # 2000 iterations over a 1 MiB state: evaluated per iteration, not kept
    # as one lazy graph.
    big = np.ones((512, 512), np.float32)
    assert_same(lambda x: lax.fori_loop(0, 2000, lambda i, c: c * 0.5 + 0.5, x), big)


@pytest.mark.parametrize("index", [-3, 0, 1, 2, 7])
def test_switch_clamps_index(index):
    branches = [lambda x: x + 1, lambda x: x * 2, lambda x: -x]
    assert_same(lambda x, i: lax.switch(i, branches, x), X, np.int32(index))


def test_cond():
    for p in (True, False):
        assert_same(lambda x, p: lax.cond(p, lambda x: x.sum(), lambda x: x.max(), x), X, np.bool_(p))


@pytest.mark.parametrize("f", [jnp.cumsum, jnp.cumprod, lambda v: lax.cummax(v, 0),
                               lambda v: lax.cummin(v, 0, reverse=True),
                               lambda v: jnp.cumsum(v.astype(jnp.int8)),
                               lambda v: jnp.cumsum(v > 2)])
def test_cumulative(f):
    assert_same(f, X, rtol=1e-6)


def test_cumsum_long_is_linear():
    big = np.random.default_rng(0).standard_normal(100000).astype(np.float32)
    # the general window path refuses windows this long: this runs only as a scan
    assert_same(jnp.cumsum, big, rtol=1e-3, atol=1e-3)
    assert_same(lambda m: jnp.cumsum(m, axis=2), M, rtol=1e-5)


def test_pooling():
    assert_same(lambda m: lax.reduce_window(m, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME"), M)
    assert_same(lambda m: lax.reduce_window(m, 0.0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1), "VALID"), M,
                rtol=1e-6)
    assert_same(lambda m: lax.reduce_window(m, 0.0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1),
                                            ((0, 0), (1, 2), (0, 1), (0, 0)), base_dilation=(1, 2, 1, 1),
                                            window_dilation=(1, 1, 2, 1)), M, rtol=1e-6)
    # non-identity init: XLA:CPU skips padding elements and counts init once
    assert_same(lambda m: lax.reduce_window(m, 1.0, lax.add, (1, 3, 1, 1), (1, 1, 1, 1),
                                            ((0, 0), (2, 0), (0, 0), (0, 0))), M, rtol=1e-6)
    assert_same(jax.grad(lambda m: lax.reduce_window(m, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1),
                                                     "VALID").sum()), M)
    assert_same(lambda m: lax.reduce_window(m.astype(jnp.int32), 0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1),
                                            "SAME"), M)
