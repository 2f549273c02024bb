"""lax.linalg.tridiagonal_solve (custom_call @pjrtx_tridiagonal_solve, GEPP
as LAPACK gtsv) and what JAX builds on its perturb_singular=True mode
(eigh_tridiagonal's inverse iteration) against XLA:CPU, within bounds from
the error analyses (linalg_bounds.py)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from linalg_bounds import DTYPES, assert_rel, both, gamma, gepp_bound, rand
from pjrtx import versions

# jax before 0.10.0 has neither tridiagonal_solve(perturb_singular=) nor
# eigh_tridiagonal's eigenvectors, which are built on it (pjrtx/versions.py):
# those programs cannot be written there.
PERTURB = versions.jax_at_least(versions.TRIDIAGONAL_PERTURB_SINGULAR)
needs_perturb = pytest.mark.skipif(
    not PERTURB, reason="this jax has no tridiagonal_solve(perturb_singular=) (added in 0.10.0)")


def solver(perturb):
    if not perturb:
        return lax.linalg.tridiagonal_solve
    if not PERTURB:
        pytest.skip("this jax has no tridiagonal_solve(perturb_singular=) (added in 0.10.0)")
    return lambda *a: lax.linalg.tridiagonal_solve(*a, perturb_singular=True)


def dense(dl, d, du):
    """The tridiagonal matrices [..., m, m] the three diagonals stand for."""
    m = d.shape[-1]
    a = np.zeros(d.shape + (m,), d.dtype)
    i = np.arange(m)
    a[..., i, i] = d
    a[..., i[1:], i[1:] - 1] = dl[..., 1:]
    a[..., i[:-1], i[:-1] + 1] = du[..., :-1]
    return a


@pytest.mark.parametrize("perturb", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,k", [((2,), 1), ((7,), 2), ((3, 6), 3), ((2, 2, 5), 1)])
def test_random_systems(dtype, shape, k, perturb):
    rng = np.random.default_rng(sum(shape) + k)
    dl, d, du = (rand(rng, shape, dtype) for _ in range(3))
    b = rand(rng, shape + (k,), dtype)
    f = solver(perturb)
    # GEPP on the dense matrix is the same elimination: both sides are
    # within gepp_bound of the exact solution.
    assert_rel(*both(f, dl, d, du, b), gepp_bound(dense(dl, d, du), dtype))


@pytest.mark.parametrize("perturb", [False, True])
def test_zero_leading_pivot_needs_pivoting(perturb):
    dl = np.float32([0, 2, -2, 3])
    d = np.float32([0, 1, 4, 1])
    du = np.float32([1, 3, 0.5, 0])
    b = np.float32([[1], [2], [3], [4]])
    f = solver(perturb)
    assert_rel(*both(f, dl, d, du, b), gepp_bound(dense(dl, d, du), np.float32))


def test_singular_matrix():
    z = np.zeros((2, 3), np.float32)
    dl, d, du = z, z.copy(), z.copy()
    d[1] = [1, 2, 3]  # batch entry 1 is regular, entry 0 all zero
    b = np.ones((2, 3, 1), np.float32)
    plain = lambda *a: lax.linalg.tridiagonal_solve(*a)  # noqa: E731
    got, want = both(plain, dl, d, du, b)
    # A zero pivot: gtsv's info > 0, which JAX turns into NaN for the entry.
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got[0]).all()
    np.testing.assert_allclose(got[1], want[1], rtol=gamma(2, np.float32))
    if not PERTURB:
        return
    got, want = both(solver(True), dl, d, du, b)
    # Perturbed: finite and huge, as on CPU (the size of the perturbation is
    # only specified to its order, so the values are not compared).
    assert np.isfinite(got).all() and np.isfinite(want).all()
    assert (np.abs(got[0]) > 1e6).all() and (np.abs(want[0]) > 1e6).all()
    np.testing.assert_allclose(got[1], want[1], rtol=gamma(2, np.float32))


@needs_perturb
def test_perturbed_solve_finds_the_null_vector():
    # T - lam I for an eigenvalue lam of T is singular to working precision;
    # one perturbed solve (inverse iteration) returns a vector whose
    # direction is the eigenvector's, up to about u ||T|| / gap.
    rng = np.random.default_rng(5)
    n = 8
    alpha = rng.uniform(-1, 1, n)
    beta = rng.uniform(0.2, 1, n - 1)
    t = np.diag(alpha) + np.diag(beta, 1) + np.diag(beta, -1)
    lam, vec = np.linalg.eigh(t)
    j = 3
    gap = min(abs(lam[j] - lam[j - 1]), abs(lam[j + 1] - lam[j]))
    dl = np.concatenate([[0], beta]).astype(np.float32)
    du = np.concatenate([beta, [0]]).astype(np.float32)
    d = (alpha - lam[j]).astype(np.float32)
    b = np.ones((n, 1), np.float32)
    for x in both(solver(True), dl, d, du, b):
        x = x[:, 0].astype(np.float64)
        x /= np.linalg.norm(x)
        # Rounding T - lam I to f32 moves it by about u ||T|| (a few u);
        # the component outside the eigenvector is that over the gap,
        # amplified once more by the solve: 8 n u ||T|| / gap is generous.
        sin = np.sqrt(max(0.0, 1 - abs(x @ vec[:, j]) ** 2))
        assert sin <= 8 * n * gamma(1, np.float32) * np.linalg.norm(t, 2) / gap, sin


@needs_perturb
@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_tridiagonal_eigenvectors(dtype):
    rng = np.random.default_rng(6)
    n = 9
    alpha = rng.uniform(-1, 1, n).astype(dtype)  # real, in the operand's type
    beta = rand(rng, (n - 1,), dtype)
    f = lambda a, b: jax.scipy.linalg.eigh_tridiagonal(a, b, eigvals_only=False)  # noqa: E731
    (w, v), (w_c, v_c) = both(f, alpha, beta)
    t = np.diag(alpha.astype(np.complex128)) + np.diag(beta, 1) + np.diag(np.conj(beta), -1)
    norm_t = np.linalg.norm(t, 2)
    # Bisection finds each eigenvalue to about n u ||T|| on both sides.
    np.testing.assert_allclose(w, w_c, atol=2 * n * gamma(1, dtype) * norm_t)
    # Each eigenvector's residual ||T v - w v|| is O(n u ||T||) (inverse
    # iteration), defined whatever the phase; orthogonality between two
    # eigenvectors is that residual over their eigenvalues' gap (Davis-Kahan).
    gap = np.diff(np.linalg.eigvalsh(t)).min()
    tol = 8 * n * gamma(1, dtype) * norm_t
    for vv, ww in [(v, w), (v_c, w_c)]:
        assert np.linalg.norm(t @ vv - vv * ww, axis=0).max() <= tol
        assert np.abs(np.conj(vv.T) @ vv - np.eye(n)).max() <= 2 * tol / gap
