"""jax.nn.scaled_matmul (block-scaled: f8 operands, e8m0 or bf16 scales per
block of the contracting dim) on pjrtx, which lowers it to lax.scaled_dot as
JAX does on ROCm, against lax.scaled_dot on XLA:CPU. Both dequantise as
JAX's expansion says, so they differ only by summation order: the summation
bound over K terms. With e8m0 scales (powers of two) the dequantised
operands are exact, so the result is also the exact product within it."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

from oracle import run_on, unit_roundoff

PJ = jax.devices("pjrtx")[0]
CPU = jax.devices("cpu")[0]


def _operands(b, m, n, k, block, scale_dtype, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((b, m, k)).astype(ml_dtypes.float8_e4m3fn)
    w = rng.standard_normal((b, n, k)).astype(ml_dtypes.float8_e4m3fn)
    if scale_dtype == ml_dtypes.float8_e8m0fnu:
        sa = np.exp2(rng.integers(-4, 4, (b, m, k // block))).astype(scale_dtype)
        sw = np.exp2(rng.integers(-4, 4, (b, n, k // block))).astype(scale_dtype)
    else:
        sa = rng.standard_normal((b, m, k // block)).astype(scale_dtype)
        sw = rng.standard_normal((b, n, k // block)).astype(scale_dtype)
    return a, w, sa, sw


def _dequantised(x, s):
    block = x.shape[-1] // s.shape[-1]
    return x.astype(np.float64) * np.repeat(s.astype(np.float64), block, axis=-1)


@pytest.mark.parametrize("scale_dtype", [ml_dtypes.float8_e8m0fnu, ml_dtypes.bfloat16],
                         ids=["e8m0", "bf16"])
@pytest.mark.parametrize("dims", [(1, 8, 16, 64), (2, 32, 24, 128)])
def test_scaled_matmul_matches_scaled_dot_on_xla_cpu(dims, scale_dtype):
    b, m, n, k = dims
    a, w, sa, sw = _operands(b, m, n, k, 32, scale_dtype, seed=k)
    got = run_on(PJ, jax.nn.scaled_matmul, a, w, sa, sw)
    want = run_on(CPU, lambda a, w, sa, sw: lax.scaled_dot(
        a, w, lhs_scale=sa, rhs_scale=sw, dimension_numbers=(((2,), (2,)), ((0,), (0,))),
        preferred_element_type=jnp.float32), a, w, sa, sw)
    assert got.dtype == want.dtype == np.float32 and got.shape == want.shape == (b, m, n)
    # both sum K exact f32 products, in any order
    mags = np.einsum("bmk,bnk->bmn", np.abs(_dequantised(a, sa)), np.abs(_dequantised(w, sw)))
    u = unit_roundoff(np.float32)
    bound = 2 * (k * u / (1 - k * u)) * mags
    assert np.all(np.abs(got.astype(np.float64) - want) <= bound)
    if scale_dtype == ml_dtypes.float8_e8m0fnu:
        # an f8 value times a power of two is exact, so this is the f64 product
        exact = np.einsum("bmk,bnk->bmn", _dequantised(a, sa), _dequantised(w, sw))
        assert np.all(np.abs(got - exact) <= bound)


def test_rule_is_registered_for_pjrtx():
    # fails if JAX renames the private primitive pjrtx lowers
    from jax._src.cudnn import scaled_matmul_stablehlo
    from jax._src.interpreters import mlir

    assert scaled_matmul_stablehlo._scaled_matmul_p in mlir._platform_specific_lowerings["pjrtx"]
