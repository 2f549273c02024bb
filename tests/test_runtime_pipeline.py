"""Execute returns before its work is done: the executor hands each run to
MLX with async_eval and builds the next call's graph while MLX computes;
the completion thread marks outputs ready in call order."""
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax



def slow(x):
    # ~0.5 GFLOP of dependent matmuls: far longer than dispatching 100 calls.
    return lax.fori_loop(0, 30, lambda i, v: jnp.tanh(v @ v) * 0.5, x)


def step(v):
    return jnp.tanh(v * 1.01 + 0.01)


def test_chain_of_100_dependent_calls(pjrtx_device):
    n = 256
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    dx = jax.device_put(x, pjrtx_device)
    f_slow, f_step = jax.jit(slow), jax.jit(step)
    # Compile both first, so the timed region only dispatches.
    jax.block_until_ready(f_step(f_slow(dx)))

    head = f_slow(dx)
    outs = [head]
    for _ in range(100):
        outs.append(f_step(outs[-1]))
    # All 101 calls are enqueued while the first one still runs.
    assert not outs[-1].is_ready()
    # Poll readiness: each output becomes ready no earlier than the one
    # before it (the call order). Each sweep checks the last call first: an
    # output seen ready means every earlier one must be ready by the time
    # the same sweep reaches it (checking in call order instead, a later
    # output could turn ready between two checks and look early).
    first_seen = [None] * len(outs)
    tick = 0
    while first_seen[-1] is None:
        for i in reversed(range(len(outs))):
            if first_seen[i] is None and outs[i].is_ready():
                first_seen[i] = tick
        tick += 1
        time.sleep(0.0005)
    assert all(a <= b for a, b in zip(first_seen, first_seen[1:])), first_seen

    # The chain's values: each step is element-wise, so NumPy repeats it from
    # the head's values. MLX's and NumPy's tanh differ by a few ulps per step
    # (4 allowed); a step scales earlier errors by at most 1.01 (tanh' <= 1),
    # so after 100 steps the error is below 1.01**100 * 100 * 4 ulp(1).
    v = np.asarray(head)
    for _ in range(100):
        v = np.tanh(v * np.float32(1.01) + np.float32(0.01))
    bound = 1.01**100 * 100 * 4 * np.finfo(np.float32).eps
    np.testing.assert_allclose(np.asarray(outs[-1]), v, rtol=0, atol=bound)


def test_short_runs_after_a_long_one_become_ready_after_it(pjrtx_device):
    # Short runs (after their first) are waited for on the executor itself
    # when nothing else is pending; one that follows a long independent run
    # must still not be marked ready before it.
    n = 256
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    dx = jax.device_put(x, pjrtx_device)
    small = jax.device_put(np.arange(8, dtype=np.float32), pjrtx_device)
    f_slow, f_tiny = jax.jit(slow), jax.jit(lambda v: v + 1)
    jax.block_until_ready(f_slow(dx))
    for _ in range(5):  # several short runs: the tiny program is now known short
        f_tiny(small).block_until_ready()
    for _ in range(3):
        long_out = f_slow(dx)
        tiny_outs = [f_tiny(small) for _ in range(3)]
        for t in tiny_outs:
            t.block_until_ready()
            assert long_out.is_ready()
        np.testing.assert_array_equal(np.asarray(tiny_outs[-1]), np.arange(8, dtype=np.float32) + 1)
    # And the tiny program alone, many times, with its values right each time.
    for i in range(50):
        np.testing.assert_array_equal(np.asarray(f_tiny(small)), np.arange(8, dtype=np.float32) + 1)
