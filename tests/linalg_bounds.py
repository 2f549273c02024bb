"""Shared pieces of the linalg tests: random matrices with known
conditioning and error bounds from Higham, Accuracy and Stability of
Numerical Algorithms (2nd ed.), computed in float64 from the test's own
matrices. Each backend is within a bound of the exact result, so pjrtx and
XLA:CPU are within twice it of each other."""
import jax
import numpy as np
import scipy.linalg as sl

from oracle import run_on, unit_roundoff

PJRTX = lambda: jax.devices("pjrtx")[0]  # noqa: E731
CPU = lambda: jax.devices("cpu")[0]  # noqa: E731
DTYPES = [np.float32, np.complex64]


def gamma(k, dtype):
    """gamma_k = k u / (1 - k u); complex arithmetic costs about 4x the
    rounding errors of real (Higham 3.6: a complex multiply-add errs by at
    most sqrt(2) gamma_2 per part), so k is scaled by 4 for complex."""
    k = k * (4 if np.dtype(dtype).kind == "c" else 1)
    u = unit_roundoff(dtype)
    return k * u / (1 - k * u)


def rand(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def hpd(rng, shape, dtype):
    """Hermitian positive definite, condition number O(10)."""
    b = rand(rng, shape, dtype)
    n = shape[-1]
    return (b @ np.conj(np.swapaxes(b, -1, -2)) + n * np.eye(n)).astype(dtype)


def both(f, *args):
    return run_on(PJRTX(), f, *args), run_on(CPU(), f, *args)


def cond2(a):
    return np.linalg.cond(a.astype(np.complex128)) if a.size else 1.0


def norm2(a):
    return np.linalg.norm(a.astype(np.complex128), 2) if a.size else 0.0


def gepp_bound(a, dtype):
    """Normwise relative error of x from GEPP: (A + dA) x = b with
    |dA| <= gamma_{3n} |L||U| (Higham 9.4), so ||dx|| / ||x|| <=
    cond(A) gamma_{3n} || |L||U| || / ||A||."""
    worst = 0.0
    n = a.shape[-1]
    for mat in a.reshape(-1, n, n).astype(np.complex128):
        _, l, u = sl.lu(mat)
        worst = max(worst, cond2(mat) * np.linalg.norm(np.abs(l) @ np.abs(u), 2) / norm2(mat))
    return gamma(3 * n, dtype) * worst


def assert_rel(got, want, rel):
    assert jax.tree.structure(got) == jax.tree.structure(want)  # zip drops no leaf
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert g.dtype == w.dtype and g.shape == w.shape
        err = np.linalg.norm((g - w).astype(np.complex128).ravel())
        assert err <= 2 * rel * np.linalg.norm(w.astype(np.complex128).ravel()), (err, rel)


