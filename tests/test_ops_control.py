"""while / case / if (host-driven control steps) against XLA:CPU."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from oracle import assert_same

X = np.arange(6, dtype=np.float32)


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


