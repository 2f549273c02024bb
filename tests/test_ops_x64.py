"""x64 on pjrtx: f64/s64/u64 keep every bit through transfers and programs,
and the f64 policy (PJRTX_F64) decides at compile time. complex128 has its
own file (test_complex128.py)."""
import os
import subprocess
import tempfile
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from oracle import assert_same, sum_bound


def bit_patterns(dtype, n=4096, seed=0):
    """Random 64-bit patterns (so for f64: NaN payloads, subnormals, -0, inf)."""
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 2 ** 64, size=n, dtype=np.uint64)
    edges = np.array([0, 2 ** 63, 2 ** 64 - 1, 2 ** 63 - 1, 1, 0x7FF0000000000000, 0xFFF0000000000000,
                      0x7FF0000000000001, 0x7FF8000000000000, 0xFFF8000000000000, 0x000FFFFFFFFFFFFF],
                     np.uint64)
    return np.concatenate([edges, raw])[:n].view(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.uint64], ids=lambda d: np.dtype(d).name)
def test_transfers_keep_every_bit(dtype, pjrtx_device):
    x = bit_patterns(dtype)
    with jax.enable_x64(True):
        for host in (x, x.reshape(64, -1)[:, ::3], x.reshape(64, -1).T):  # strided views too
            on = jax.device_put(host, pjrtx_device)
            np.testing.assert_array_equal(np.asarray(on).view(np.uint64), np.ascontiguousarray(host).view(np.uint64))
            # Through a program (a copy, then a byte-moving op) as well.
            back = np.asarray(jax.jit(lambda a: a[::-1])(on))
            np.testing.assert_array_equal(back.view(np.uint64), np.ascontiguousarray(host[::-1]).view(np.uint64))


def test_f64_arithmetic_matches_cpu():
    rng = np.random.default_rng(3)
    a = rng.normal(size=(7, 33)) * 1e10
    b = rng.normal(size=(7, 33))
    with jax.enable_x64(True):
        assert_same(lambda x, y: {"add": x + y, "mul": x * y, "div": x / y, "sqrt": jnp.sqrt(jnp.abs(x)),
                                  "to_f32": x.astype(jnp.float32), "to_s64": (x * 1e9).astype(jnp.int64),
                                  "max": jnp.maximum(x, y)}, a, b)
        # Sums: error of a sum scales with sum |terms| * n * eps64.
        got = np.asarray(jax.jit(lambda x: jnp.sum(x, axis=1), device=jax.devices("pjrtx")[0])(a))
        want = np.sum(a, axis=1)
        assert np.all(np.abs(got - want) <= 33 * np.finfo(np.float64).eps * np.sum(np.abs(a), axis=1))


def test_s64_u64_arithmetic_matches_cpu():
    with jax.enable_x64(True):
        s = bit_patterns(np.int64, 256, seed=1)
        u = bit_patterns(np.uint64, 256, seed=2)
        assert_same(lambda x, y: {"add": x + y, "mul": x * y, "xor": x ^ y, "shr": x >> 7,
                                  "lt": x < y, "to_f64": x.astype(jnp.float64)}, s, s[::-1])
        assert_same(lambda x, y: {"add": x + y, "mul": x * y, "shr": x >> 7, "lt": x < y,
                                  "to_f64": x.astype(jnp.float64)}, u, u[::-1])


def run_with_env(code, **env):
    full = dict(os.environ, JAX_PLATFORMS="pjrtx,cpu", JAX_ENABLE_X64="1", **env)
    # cwd outside the checkout: `python -c` puts the cwd first on sys.path,
    # and a source checkout's pjrtx (no compiled extension) would shadow the
    # installed one.
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full,
                          cwd=tempfile.gettempdir(), capture_output=True, text=True, timeout=300)


F64_PROGRAM = """
    import jax, jax.numpy as jnp, numpy as np
    from pjrtx import jax_plugin
    jax_plugin.ensure_registered()
    dev = jax.devices("pjrtx")[0]
    print("f32", np.asarray(jax.jit(lambda x: x * 2, device=dev)(np.ones(2, np.float32))))
    try:
        jax.jit(lambda x: jnp.sin(x) * 2, device=dev).lower(np.ones(2)).compile()
        print("f64 compiled")
    except Exception as e:
        print("f64 error:", e)
"""


def test_f64_policy_error_refuses_at_compile_time():
    r = run_with_env(F64_PROGRAM, PJRTX_F64="error")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "f32 [2. 2.]" in r.stdout
    # The first f64 instruction is named (here the constant 2.0).
    assert "f64 error:" in r.stdout and "] float64 (f64) values are refused" in r.stdout
    assert "[stablehlo." in r.stdout
    assert "INTERNAL" not in r.stdout


def test_f64_policy_default_runs_f64():
    r = run_with_env(F64_PROGRAM)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "f64 compiled" in r.stdout


def test_f64_policy_rejects_unknown_values():
    r = run_with_env(F64_PROGRAM, PJRTX_F64="sometimes")
    assert "PJRTX_F64 must be 'cpu' or 'error'" in r.stdout + r.stderr


F64_CONVS = {
    "dilated": dict(x=(2, 3, 9, 8), w=(4, 3, 3, 2), window_strides=(1, 2), padding=[(1, 0), (0, 2)],
                    lhs_dilation=(1, 2), rhs_dilation=(2, 1)),
    "groups_negative_pad": dict(x=(2, 4, 7, 7), w=(6, 2, 3, 3), window_strides=(2, 1),
                                padding=[(-1, 1), (1, 1)], feature_group_count=2),
    "batch_groups": dict(x=(4, 3, 5, 5), w=(4, 3, 2, 2), window_strides=(1, 1), padding="SAME",
                         batch_group_count=2),
    "3d": dict(x=(1, 2, 5, 4, 3), w=(3, 2, 2, 2, 2), window_strides=(1, 1, 1), padding="VALID"),
    "no_spatial": dict(x=(3, 5), w=(2, 5), window_strides=(), padding=[]),
}


@pytest.mark.parametrize("case", list(F64_CONVS))
def test_f64_convolution_matches_cpu_in_f64(case):
    # MLX's conv_general computes f64 in f32 (errors ~1e-8); pjrtx sums f64
    # matmuls over kernel taps, so the result is f64-accurate: each output is
    # a sum of (kernel taps x input features) products.
    c = dict(F64_CONVS[case])
    xs, ws = c.pop("x"), c.pop("w")
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    f = lambda a, b: lax.conv_general_dilated(a, b, **c)
    with jax.enable_x64(True):
        terms = int(np.prod(ws[1:])) * max(c.get("batch_group_count", 1), 1)
        assert_same(f, x, w, bound=sum_bound(f, x, w, terms=terms, dtype=np.float64))
        # and the transpose (window_reversal, lhs dilation) that grad emits;
        # an f32 computation errs by ~1e-6 here, any f64 summation order by
        # under n*u*sum|t| ~ 1e-13, so 1e-9 tells the two apart.
        g = jax.grad(lambda a, b: (f(a, b) ** 2).sum(), argnums=(0, 1))
        got = jax.jit(g, device=jax.devices("pjrtx")[0])(x, w)
        want = jax.jit(g, device=jax.devices("cpu")[0])(x, w)
        for a, b in zip(got, want):
            assert np.asarray(a).dtype == np.float64
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-9, atol=1e-9)