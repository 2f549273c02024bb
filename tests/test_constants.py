"""Constants: constant subgraphs (w.T, w.astype(bf16) of a closed-over
weight) are computed once per executable, not per call; a weight is held
once (the plan's bytes are the MLX buffer the program reads); equal weights
and equal folded results are shared between executables while any of them
lives (pjrtx._pjrtx.constant_pool_stats)."""
import gc

import jax
import jax.numpy as jnp
import numpy as np

from oracle import assert_same, sum_bound
from pjrtx import _pjrtx

N = 512
# Non-negative, so sum_bound's f(|x|) is the sum of |terms| (it takes |.| of
# the arguments only, and W is closed over).
W = np.random.default_rng(1).uniform(0, 1, (N, N)).astype(np.float32)  # 1 MiB


def closed(x):
    w = jnp.asarray(W)
    return x @ w.T, jnp.dot(x.astype(jnp.bfloat16), w.astype(jnp.bfloat16),
                            preferred_element_type=jnp.float32)


def with_arg(x, w):
    return x @ w.T, jnp.dot(x.astype(jnp.bfloat16), w.astype(jnp.bfloat16),
                            preferred_element_type=jnp.float32)


def prims_per_call(f, *args):
    f(*args)[0].block_until_ready()  # compile and first run outside the count
    _pjrtx.count_primitives(True)
    try:
        before = _pjrtx.primitives_evaluated()
        jax.block_until_ready(f(*args))
        return _pjrtx.primitives_evaluated() - before
    finally:
        _pjrtx.count_primitives(False)


def x_host():
    return np.random.default_rng(2).standard_normal((16, N)).astype(np.float32)


def test_constant_work_matches_xla_cpu():
    x = x_host()
    # Products of bf16 values are exact in f32; both results are f32 sums
    # of N products, so any two summation orders differ by at most
    # sum_bound.
    assert_same(closed, x, bound=sum_bound(closed, x, terms=N))


def test_transpose_and_convert_of_a_constant_run_once(pjrtx_device):
    x = jax.device_put(x_host(), pjrtx_device)
    w = jax.device_put(W, pjrtx_device)
    folded = prims_per_call(jax.jit(closed), x)
    lazy = prims_per_call(jax.jit(with_arg), x, w)
    # The argument version runs w.T and w.astype(bf16) on every call; the
    # closed-over one computed both at compile time (f32[512,512]: 4x the
    # old 2^16-element folding limit).
    assert folded > 0 and lazy - folded >= 2, (folded, lazy)


def in_use():
    return _pjrtx.memory_stats()["in_use"]


def test_weight_held_once_and_shared_between_executables(pjrtx_device):
    # A weight no other test uses, so the pool has no live copy yet.
    w_host = np.random.default_rng(3).standard_normal((N, N)).astype(np.float32)
    x = jax.device_put(x_host(), pjrtx_device)
    jax.clear_caches()  # executables of earlier tests hold their constants
    gc.collect()
    s0, m0 = _pjrtx.constant_pool_stats(), in_use()

    f = jax.jit(lambda x: x @ jnp.asarray(w_host).astype(jnp.bfloat16).astype(jnp.float32))
    out = f(x).block_until_ready()
    s1, m1 = _pjrtx.constant_pool_stats(), in_use()
    # One pooled copy of the weight (its plan bytes, in an MLX buffer the
    # program's constant is a view of) plus the folded f32(bf16(w)) (the
    # bf16 intermediate is released): 2 x 1 MiB, not 3 or 4.
    assert s1["dense_entries"] - s0["dense_entries"] == 1
    assert s1["dense_bytes"] - s0["dense_bytes"] == w_host.nbytes
    assert s1["folded_entries"] - s0["folded_entries"] == 1
    held = m1 - m0 - out.nbytes
    assert 2 * w_host.nbytes <= held < 2 * w_host.nbytes + 64 * 1024, held

    # A second executable over the same weight (different code, so it is
    # compiled anew) shares both the weight and the folded result.
    g = jax.jit(lambda x: x @ jnp.asarray(w_host).astype(jnp.bfloat16).astype(jnp.float32) + 1.0)
    out2 = g(x).block_until_ready()
    s2, m2 = _pjrtx.constant_pool_stats(), in_use()
    assert s2["dense_hits"] - s1["dense_hits"] == 1
    assert s2["dense_hit_bytes"] - s1["dense_hit_bytes"] == w_host.nbytes
    assert s2["folded_hits"] - s1["folded_hits"] == 1
    assert s2["dense_entries"] == s1["dense_entries"]
    assert s2["folded_entries"] == s1["folded_entries"]
    assert m2 - m1 - out2.nbytes < 64 * 1024, m2 - m1
    np.testing.assert_array_equal(np.asarray(out2), np.asarray(out) + 1.0)

    # The pool does not keep memory alive: once both executables are gone,
    # so are the weight and the folded result.
    del f, g, out, out2
    jax.clear_caches()
    gc.collect()
    s3, m3 = _pjrtx.constant_pool_stats(), in_use()
    assert s3["dense_entries"] == s0["dense_entries"]
    assert s3["folded_entries"] == s0["folded_entries"]
    assert m3 - m0 < 64 * 1024, m3 - m0


def test_peak_memory_is_one_copy_of_the_weights(pjrtx_device):
    w_host = np.random.default_rng(4).standard_normal((1024, 1024)).astype(np.float32)  # 4 MiB
    x = jax.device_put(np.ones((8, 1024), np.float32), pjrtx_device)
    f = jax.jit(lambda x: jnp.tanh(x @ w_host) @ w_host.T)
    jax.clear_caches()
    gc.collect()
    base = in_use()
    _pjrtx.reset_peak_memory()
    for _ in range(3):
        out = f(x).block_until_ready()
    peak = _pjrtx.memory_stats()["peak"]
    # Two weights (w_host and NumPy's w_host.T are different constants),
    # each held once, plus the run's small values (8x1024 f32 = 32 KiB
    # each); a second copy of either weight would add 4 MiB.
    weights = 2 * w_host.nbytes
    assert peak - base < weights + 1024 * 1024, (peak - base, weights)
    assert in_use() - base >= weights


def test_broadcast_scalar_work_stays_lazy(pjrtx_device):
    # 3 * broadcast(2.0) to f32[2048,2048] is constant work whose 16 MiB
    # result comes from 4 bytes: folding it would store 16 MiB with the
    # executable (the guard: at most 2x the constant inputs, or 1 MiB).
    x = jax.device_put(np.ones((2048, 2048), np.float32), pjrtx_device)
    jax.clear_caches()
    gc.collect()
    base = in_use()
    f = jax.jit(lambda x: x + jnp.full((2048, 2048), 2.0, jnp.float32) * x.dtype.type(3))
    compiled = f.lower(x).compile()
    assert in_use() - base < 1024 * 1024, in_use() - base
    out = compiled(x)
    np.testing.assert_array_equal(np.asarray(out), np.full((2048, 2048), 7.0, np.float32))
