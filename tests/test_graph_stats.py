"""pjrtx._pjrtx.count_primitives / primitives_evaluated: the MLX primitives a
run evaluates (jax_smoke/bench.py compares them with native MLX's graph)."""
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from pjrtx import _pjrtx


def evaluated(f, x):
    f(x).block_until_ready()  # compile and first run outside the count
    before = _pjrtx.primitives_evaluated()
    f(x).block_until_ready()
    return _pjrtx.primitives_evaluated() - before


def test_counts_only_while_on_and_scales_with_the_loop(monkeypatch, pjrtx_device):
    # Eager runs: with PJRTX_COMPILE tiers a loop's iterations run in traced
    # blocks whose count depends on where the tiers switch
    # (test_runtime_fusion.py covers those).
    monkeypatch.setenv("PJRTX_COMPILE", "never")
    # MLX primitives per iteration: the loop must run on MLX, not as
    # compiled host code (PJRTX_LOOPS).
    monkeypatch.setenv("PJRTX_LOOPS", "mlx")
    # (96 elements: 64 or fewer would be computed on the host, PJRTX_HOST)
    x = jax.device_put(np.linspace(-1, 1, 96, dtype=np.float32), pjrtx_device)
    loop = lambda n: jax.jit(lambda c: lax.fori_loop(0, n, lambda i, v: v * 0.5 + 1.0, c))  # noqa: E731
    _pjrtx.count_primitives(False)
    assert evaluated(loop(10), x) == 0
    _pjrtx.count_primitives(True)
    try:
        c10, c20, c30 = (evaluated(loop(n), x) for n in (10, 20, 30))
        # The same body runs 10 more times each step: equal increments of at
        # least one primitive per iteration (the multiply-add).
        assert c20 > c10 > 0 and c30 - c20 == c20 - c10 >= 10, (c10, c20, c30)
        # An elementwise chain evaluates at least its two ops; the identity
        # evaluates only the copy that gives its output storage of its own
        # (as XLA copies it): a bit view, an add of 0 and a view back, at
        # most 4 primitives counted with the constant.
        assert evaluated(jax.jit(lambda v: jnp.abs(v * 3.0) - 1.0), x) >= 2
        assert 0 < evaluated(jax.jit(lambda v: v), x) <= 4
    finally:
        _pjrtx.count_primitives(False)
