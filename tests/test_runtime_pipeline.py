"""Execute returns before its work is done: the executor hands each run to
MLX with async_eval and builds the next call's graph while MLX computes;
the completion thread marks outputs ready in call order."""
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax


def slow(x):
    # ~1 GFLOP of dependent matmuls: far longer than dispatching 100 calls.
    # u -> tanh(u @ x/4 + x) contracts (x/4's spectral norm is about 1/2,
    # tanh' <= 1), so rounding differences between backends shrink instead
    # of growing, and its fixed point is not zero: comparing the result with
    # XLA:CPU's checks real values.
    return lax.fori_loop(0, 30, lambda i, u: jnp.tanh(u @ (x * 0.25) + x), x)


def step(v):
    return jnp.tanh(v * 1.01 + 0.01)


def test_chain_of_100_dependent_calls(pjrtx_device, cpu_device):
    n = 256
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    dx = jax.device_put(x, pjrtx_device)
    f_slow, f_step = jax.jit(slow), jax.jit(step)
    # Compile both first, so the calls below only dispatch.
    jax.block_until_ready(f_step(f_slow(dx)))

    head = f_slow(dx)
    outs = [head]
    for _ in range(100):
        outs.append(f_step(outs[-1]))
    # Poll readiness: each output becomes ready no earlier than the one
    # before it (the call order). Each sweep checks the last call first: an
    # output seen ready means every earlier one must be ready by the time
    # the same sweep reaches it (checking in call order instead, a later
    # output could turn ready between two checks and look early). However
    # fast the machine, an output seen ready before an earlier one fails;
    # a chain that never finishes fails at the deadline instead of hanging.
    first_seen = [None] * len(outs)
    deadline = time.monotonic() + 300
    sweep = 0
    while first_seen[-1] is None:
        for i in reversed(range(len(outs))):
            if first_seen[i] is None and outs[i].is_ready():
                first_seen[i] = sweep
        if first_seen[-1] is None and time.monotonic() > deadline:
            pytest.fail(f"after 300 s, {sum(s is not None for s in first_seen)} of "
                        f"{len(outs)} outputs are ready: {first_seen}")
        sweep += 1
        time.sleep(0.0005)
    assert None not in first_seen, first_seen
    late = [(i, a, b) for i, (a, b) in enumerate(zip(first_seen, first_seen[1:])) if a > b]
    assert not late, f"output i+1 ready in an earlier sweep than output i (i, sweeps): {late}"

    # The head against XLA:CPU, then the chain's values: each step is
    # element-wise, so NumPy repeats it from the head's values. MLX's and
    # NumPy's tanh differ by a few ulps per step (4 allowed); a step scales
    # earlier errors by at most 1.01 (tanh' <= 1), so after k steps the error
    # is below 1.01**k * k * 4 ulp(1). Every output is checked, so a run that
    # read the wrong (earlier or later) input fails at its own step.
    ref_head = np.asarray(jax.jit(slow)(jax.device_put(x, cpu_device)))
    np.testing.assert_allclose(np.asarray(head), ref_head, rtol=0, atol=1e-5)
    v = np.asarray(head)
    for k in range(1, 101):
        v = np.tanh(v * np.float32(1.01) + np.float32(0.01))
        bound = 1.01**k * k * 4 * np.finfo(np.float32).eps
        np.testing.assert_allclose(np.asarray(outs[k]), v, rtol=0, atol=bound,
                                   err_msg=f"output of call {k}")


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
