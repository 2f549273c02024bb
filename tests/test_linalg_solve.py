"""What JAX builds on the factorizations (solve, inv, det, slogdet,
matrix_power, lu_solve, cho_solve, solve_triangular, expm) on pjrtx against
XLA:CPU, within normwise bounds from the error analyses (linalg_bounds.py)."""
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
from jax._src.lax import linalg as lax_linalg

from linalg_bounds import DTYPES, PJRTX, assert_rel, both, cond2, gamma, gepp_bound, hpd, rand


@pytest.mark.parametrize("dtype", DTYPES)
def test_solve_inv_det(dtype):
    rng = np.random.default_rng(10)
    a = rand(rng, (3, 6, 6), dtype)
    b = rand(rng, (3, 6, 2), dtype)
    rel = gepp_bound(a, dtype)
    assert_rel(*both(jnp.linalg.solve, a, b), rel)
    assert_rel(*both(jnp.linalg.inv, a), rel)
    assert_rel(*both(lambda x: jnp.linalg.matrix_power(x, -2), a), 2 * rel + gamma(6, dtype))
    assert_rel(*both(lambda x, y: jsl.lu_solve(jsl.lu_factor(x), y), a, b), rel)
    # det(A + dA) = det(A)(1 + tr(A^-1 dA)): relative error <= n cond(A) times
    # the relative backward error.
    assert_rel(*both(jnp.linalg.det, a), 6 * rel)
    (sign, logdet), (sign_c, logdet_c) = both(jnp.linalg.slogdet, a)
    assert np.all(np.abs(logdet - logdet_c) <= 2 * 6 * rel)
    assert np.all(np.abs(sign - sign_c) <= 2 * 6 * rel)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cho_solve_and_solve_triangular(dtype):
    rng = np.random.default_rng(11)
    a = hpd(rng, (2, 5, 5), dtype)
    b = rand(rng, (2, 5, 3), dtype)
    # Cholesky solves: (A + dA) x = b, ||dA|| <= c n^2 u ||A|| (Higham 10.4).
    rel = max(cond2(m) for m in a) * 25 * gamma(6, dtype)
    f = lambda x, y: jsl.cho_solve(jsl.cho_factor(x, lower=True), y)  # noqa: E731
    assert_rel(*both(f, a, b), rel)
    t = np.tril(a)
    g = lambda x, y: jsl.solve_triangular(x, y, lower=True, trans="C")  # noqa: E731
    assert_rel(*both(g, t, b), max(cond2(np.tril(m)) for m in a) * gamma(6, dtype))


def test_singular_inv_is_not_an_error():
    # A singular matrix is data, not an exception: inf/NaN like XLA:CPU.
    a = np.array([[1, 2], [2, 4]], np.float32)
    got, want = both(jnp.linalg.inv, a)
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))
    got, want = both(jnp.linalg.det, a)
    assert got == want == 0


def test_expm():
    # expm (Pade + squaring) is a chain of matmuls and one GEPP solve with
    # Q = q(A), well conditioned for ||A|| <= 1 (cond(Q) <= e^{2||A||});
    # the solve dominates the error.
    a = rand(np.random.default_rng(12), (4, 4), np.float32) / 8
    assert_rel(*both(jsl.expm, a), np.exp(2 * np.abs(a).sum(0).max()) * gamma(3 * 4 + 4 * 13, np.float32))


def test_c128_qr_by_residual():
    # complex128 (f64 pairs on MLX) factorizes in complex<double>:
    # Householder QR is backward stable, |QR - A| <= c n eps |A|.
    with jax.enable_x64(True):
        rng = np.random.default_rng(13)
        a = rng.standard_normal((5, 4)) + 1j * rng.standard_normal((5, 4))
        q, r = jax.jit(jnp.linalg.qr)(jax.device_put(a, PJRTX()))
        assert q.dtype == np.complex128
        eps = np.finfo(np.float64).eps
        assert np.abs(np.asarray(q) @ np.asarray(r) - a).max() <= 32 * 5 * eps * np.linalg.norm(a, 2)
