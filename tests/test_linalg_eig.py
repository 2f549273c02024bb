"""Eigen and singular value decompositions (pjrtx/jax_rules/linalg_eig.py,
csrc/backend/mlx/ops/linalg_eig.cc, linalg_reduce.cc) against XLA:CPU
(LAPACK) and NumPy.

Decompositions are unique only up to the sign/phase of each vector (and
the order of eig's eigenvalues), so the checks are invariants with bounds
from backward stability: a decomposition of A computed in precision eps is
exact for some A + E with ||E|| <= c * n * eps * ||A||; eigenvalues of a
Hermitian (or normal) matrix and singular values then move by at most ||E||
(Weyl). c = 10 covers LAPACK's constants at these sizes.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from oracle import run_on

C = 10.0
R = np.random.default_rng(7)


def eps(dtype):
    return float(np.finfo(np.dtype(dtype)).eps)


def rand(shape, dtype):
    x = R.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * R.standard_normal(shape)
    return x.astype(dtype)


def herm(x):
    return np.swapaxes(x, -1, -2).conj()


def norm2(a):
    """||A||_2 per batch entry, with trailing unit dims to broadcast."""
    s = np.linalg.norm(a.astype(np.complex128), 2, axis=(-2, -1))
    return s[..., None, None]


def assert_within(x, y, bound, what):
    err = np.abs(np.asarray(x, np.complex128) - np.asarray(y, np.complex128))
    bound = np.broadcast_to(bound, err.shape)
    assert np.all(err <= bound), f"{what}: max error {err.max():.3g}, bound {bound.min():.3g}"


def tau_bound(bound, beta):
    """The error bound of each reflector's tau = (beta - alpha) / beta: the
    backward errors of the reduction so far, about `bound` (n eps ||A||) in
    alpha and beta, reach tau divided by |beta|, the subdiagonal element
    that reflector produced (XLA's e, or H's subdiagonal). A small |beta|
    (a column that was already nearly reduced) makes tau ill-conditioned;
    taus are dimensionless, so a bound in units of ||A|| alone is wrong both
    ways."""
    mag = np.abs(np.asarray(beta, np.complex128))
    return np.asarray(bound) / np.maximum(mag, np.finfo(np.float64).tiny)


def x64_ctx(dtype):
    return jax.enable_x64(np.dtype(dtype) in (np.float64, np.complex128))


# ---- eigh ---------------------------------------------------------------------

# PJRTX_LAPACK: "scipy" (the default) calls the LAPACK routines XLA:CPU
# calls; "own" runs MLX's linalg and pjrtx's own routines. Both must hold
# the invariants; read per compile, and each test jits fresh lambdas.
@pytest.fixture(params=["scipy", "own"])
def lapack(request, monkeypatch):
    monkeypatch.setenv("PJRTX_LAPACK", request.param)
    return request.param


@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.float64])
@pytest.mark.parametrize("shape", [(1, 1), (6, 6), (2, 3, 5, 5)])
@pytest.mark.parametrize("lower", [True, False])
def test_eigh_invariants(pjrtx_device, cpu_device, dtype, shape, lower, lapack):
    with x64_ctx(dtype):
        a = rand(shape, dtype)  # not Hermitian: only one triangle is read
        f = lambda x: lax.linalg.eigh(x, lower=lower, symmetrize_input=False)
        v, w = run_on(pjrtx_device, f, a)
        v_cpu, w_cpu = run_on(cpu_device, f, a)
    n = shape[-1]
    tri = np.tril(a) if lower else np.triu(a)
    h = tri + herm(np.tril(a, -1) if lower else np.triu(a, 1))
    h = h - 1j * np.imag(np.diagonal(h, axis1=-2, axis2=-1))[..., None] * np.eye(n) \
        if h.dtype.kind == "c" else h
    assert v.dtype == v_cpu.dtype and w.dtype == w_cpu.dtype
    assert v.shape == v_cpu.shape and w.shape == w_cpu.shape
    bound = C * n * eps(dtype) * norm2(h)
    assert np.all(np.diff(w, axis=-1) >= 0), "eigenvalues not ascending"
    assert_within(w, w_cpu, bound[..., 0], "eigenvalues vs XLA:CPU")
    assert_within(v @ (w[..., None] * herm(v)), h, bound, "V diag(w) V^H vs A")
    assert_within(herm(v) @ v, np.eye(n), C * n * eps(dtype), "V^H V vs I")


def test_eigh_nan_matrix_gives_nan_and_others_are_unaffected(pjrtx_device):
    a = rand((3, 4, 4), np.float32)
    a = a + herm(a)
    a[1, 2, 1] = np.nan
    w, v = run_on(pjrtx_device, jnp.linalg.eigh, a)
    assert np.isnan(w[1]).all() and np.isnan(v[1]).all()
    for b in (0, 2):
        assert np.isfinite(w[b]).all()
        assert_within(v[b] @ np.diag(w[b]) @ v[b].T, a[b], C * 4 * eps(np.float32) * norm2(a[b]),
                      "reconstruction")


def test_eigh_nan_in_the_unread_triangle_is_ignored(pjrtx_device, cpu_device):
    a = rand((4, 4), np.float32)
    a = a + a.T
    a[0, 3] = np.nan  # upper triangle; lower=True reads the lower one
    f = lambda x: lax.linalg.eigh(x, lower=True, symmetrize_input=False)[1]
    w, w_cpu = run_on(pjrtx_device, f, a), run_on(cpu_device, f, a)
    assert np.isfinite(w_cpu).all() and np.isfinite(w).all()
    assert_within(w, w_cpu, C * 4 * eps(np.float32) * norm2(np.tril(a) + np.tril(a, -1).T)[..., 0],
                  "eigenvalues")


@pytest.mark.parametrize("shape", [(0, 4, 4), (3, 0, 0), (0, 0)])
def test_eigh_zero_size(pjrtx_device, cpu_device, shape):
    a = np.zeros(shape, np.float32)
    got, want = run_on(pjrtx_device, jnp.linalg.eigh, a), run_on(cpu_device, jnp.linalg.eigh, a)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype


def test_eigh_subset_by_index(pjrtx_device):
    a = rand((6, 6), np.float32)
    a = a + a.T
    v, w = run_on(pjrtx_device, lambda x: lax.linalg.eigh(x, subset_by_index=(1, 4)), a)
    w_all = np.linalg.eigvalsh(a.astype(np.float64))
    assert w.shape == (3,) and v.shape == (6, 3)
    assert_within(w, w_all[1:4], C * 6 * eps(np.float32) * norm2(a)[..., 0], "eigenvalue subset")
    assert_within(a @ v, v * w, C * 6 * eps(np.float32) * norm2(a), "A v = v w")


def test_eigh_grad_and_vmap(pjrtx_device, cpu_device):
    a = rand((3, 5, 5), np.float32)
    a = a + herm(a)
    f = lambda x: jax.grad(lambda y: (jnp.linalg.eigvalsh(y) * jnp.arange(5.0)).sum())(x)
    g, g_cpu = run_on(pjrtx_device, jax.vmap(f), a), run_on(cpu_device, jax.vmap(f), a)
    # d(sum_i c_i w_i)/dA = V diag(c) V^T: entries within |c|_max of eigenvector error,
    # which is eps * ||A|| / gap; the random spectra here have gaps >= ~0.1 ||A||.
    w = np.linalg.eigvalsh(a.astype(np.float64))
    gap = np.diff(w, axis=-1).min(axis=-1)[:, None, None]
    assert_within(g, g_cpu, 4 * C * 5 * eps(np.float32) * norm2(a) / gap, "eigvalsh gradient")


# ---- svd ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.float64])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4), (1, 1)])
@pytest.mark.parametrize("full_matrices", [True, False])
def test_svd_invariants(pjrtx_device, cpu_device, dtype, shape, full_matrices, lapack):
    with x64_ctx(dtype):
        a = rand(shape, dtype)
        f = lambda x: jnp.linalg.svd(x, full_matrices=full_matrices)
        u, s, vt = run_on(pjrtx_device, f, a)
        u_cpu, s_cpu, vt_cpu = run_on(cpu_device, f, a)
        s_only = run_on(pjrtx_device, lambda x: jnp.linalg.svd(x, compute_uv=False), a)
    m, n = shape[-2:]
    k = min(m, n)
    for g, w in ((u, u_cpu), (s, s_cpu), (vt, vt_cpu)):
        assert g.shape == w.shape and g.dtype == w.dtype
    bound = C * max(m, n) * eps(dtype) * norm2(a)
    assert np.all(np.diff(s, axis=-1) <= 0), "singular values not descending"
    assert_within(s, s_cpu, bound[..., 0], "singular values vs XLA:CPU")
    assert_within(s_only, s_cpu, bound[..., 0], "compute_uv=False")
    assert_within((u[..., :, :k] * s[..., None, :]) @ vt[..., :k, :], a, bound, "U S Vt vs A")
    tol = C * max(m, n) * eps(dtype)
    assert_within(herm(u) @ u, np.eye(u.shape[-1]), tol, "U^H U")
    assert_within(vt @ herm(vt), np.eye(vt.shape[-2]), tol, "Vt Vt^H")


@pytest.mark.parametrize("shape", [(100000, 2), (2, 100000)])
def test_svd_economic_of_very_thin_matrices(pjrtx_device, shape):
    # A full U (or V) would hold 10^10 elements; the economic one is small.
    a = rand(shape, np.float32)
    u, s, vt = run_on(pjrtx_device, lambda x: jnp.linalg.svd(x, full_matrices=False), a)
    assert u.shape == (shape[0], 2) and vt.shape == (2, shape[1])
    bound = C * max(shape) * eps(np.float32) * norm2(a)
    assert_within((u * s) @ vt, a, bound, "U S Vt vs A")
    assert_within(s, np.linalg.svd(a.astype(np.float64), compute_uv=False), bound[..., 0], "s")


def test_svd_complex_thin_matrix(pjrtx_device, cpu_device, monkeypatch):
    # LAPACK's gesdd computes the economic SVD directly (upstream's
    # testPinv6: a (400000, 2) complex pinv); MLX's svd computes the full U,
    # so without SciPy's LAPACK pjrtx refuses it at compile time.
    a = rand((100000, 2), np.complex64)
    f = lambda x: jnp.linalg.svd(x, full_matrices=False)  # noqa: E731
    got, want = run_on(pjrtx_device, f, a), run_on(cpu_device, f, a)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    monkeypatch.setenv("PJRTX_LAPACK", "own")
    with pytest.raises(Exception, match=r"pjrtx_svd.*100000x100000"):
        run_on(pjrtx_device, lambda x: jnp.linalg.svd(x, full_matrices=False), a)


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 0, 3), (0, 3, 3)])
@pytest.mark.parametrize("full_matrices", [True, False])
def test_svd_zero_size(pjrtx_device, cpu_device, shape, full_matrices):
    a = np.zeros(shape, np.float32)
    f = lambda x: jnp.linalg.svd(x, full_matrices=full_matrices)
    got, want = run_on(pjrtx_device, f, a), run_on(cpu_device, f, a)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
        assert g.dtype == w.dtype


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_svd_nonfinite_matrix_gives_nan(pjrtx_device, bad):
    a = rand((2, 3, 3), np.float32)
    a[0, 1, 1] = bad
    u, s, vt = run_on(pjrtx_device, jnp.linalg.svd, a)
    assert np.isnan(s[0]).all() and np.isnan(u[0]).all() and np.isnan(vt[0]).all()
    assert np.isfinite(s[1]).all()


def test_svd_derived_functions(pjrtx_device, cpu_device):
    a = rand((4, 6), np.float32)
    low_rank = (rand((5, 2), np.float32) @ rand((2, 5), np.float32))
    fs = {
        "norm(ord=2)": lambda x: jnp.linalg.norm(x, 2),
        "norm(ord=-2)": lambda x: jnp.linalg.norm(x, -2),
        "norm(nuc)": lambda x: jnp.linalg.norm(x, "nuc"),
        "cond": jnp.linalg.cond,
    }
    s = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    bound = C * 6 * eps(np.float32) * s[0]
    for name, f in fs.items():
        got, want = run_on(pjrtx_device, f, a), run_on(cpu_device, f, a)
        # cond = s0 / s_min: relative error of s0 plus that of s_min.
        b = bound * (1 + s.sum() if "nuc" in name else 1)
        b = want * (bound / s[0] + bound / s[-1]) if name == "cond" else b
        assert_within(got, want, b, name)
    assert run_on(pjrtx_device, jnp.linalg.matrix_rank, low_rank) == 2
    p, p_cpu = run_on(pjrtx_device, jnp.linalg.pinv, a), run_on(cpu_device, jnp.linalg.pinv, a)
    # pinv's sensitivity is ||A^+||^2 ||E|| (Wedin).
    assert_within(p, p_cpu, 2 * bound / s[-1] ** 2, "pinv")


def test_svd_grad(pjrtx_device, cpu_device):
    a = rand((4, 3), np.float32)
    f = jax.grad(lambda x: jnp.linalg.svd(x, compute_uv=False).sum())
    g, g_cpu = run_on(pjrtx_device, f, a), run_on(cpu_device, f, a)
    s = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    gap = min(np.diff(s).__abs__().min(), s[-1])
    assert_within(g, g_cpu, 4 * C * 4 * eps(np.float32) * s[0] / gap, "d sum(s) / dA = U V^T")


# ---- eig ----------------------------------------------------------------------

def normal_matrix(n, dtype, batch=()):
    """Q diag(lam) Q^H with unitary Q: eigenvalues conditioned 1 (error <= ||E||)."""
    q, _ = np.linalg.qr(rand(batch + (n, n), np.complex128))
    lam = rand(batch + (n,), np.complex128) * 2
    if np.dtype(dtype).kind == "f":  # real: conjugate pairs with a real orthogonal Q
        q, _ = np.linalg.qr(rand(batch + (n, n), np.float64))
        blocks = np.zeros(batch + (n, n))
        for i in range(0, n - 1, 2):
            x, y = R.standard_normal(2)
            blocks[..., i:i + 2, i:i + 2] = [[x, y], [-y, x]]
        if n % 2:
            blocks[..., n - 1, n - 1] = R.standard_normal()
        return (q @ blocks @ herm(q)).astype(dtype)
    return (q @ (lam[..., None] * herm(q))).astype(dtype)


def assert_same_spectrum(x, y, bound, what):
    """Each eigenvalue of x is within bound of one of y and vice versa (order
    is not defined, and sorting would pair the members of a conjugate pair
    differently when their real parts differ by rounding)."""
    x = np.asarray(x, np.complex128)
    y = np.asarray(y, np.complex128)
    d = np.abs(x[..., :, None] - y[..., None, :])
    err = np.maximum(d.min(-1).max(-1), d.min(-2).max(-1))
    bound = np.broadcast_to(bound, x.shape)[..., 0]
    assert np.all(err <= bound), f"{what}: max error {err.max():.3g}, bound {bound.min():.3g}"


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("shape", [(5, 5), (2, 3, 4, 4), (1, 1)])
def test_eig_invariants(pjrtx_device, cpu_device, dtype, shape, lapack):
    a = normal_matrix(shape[-1], dtype, shape[:-2])
    f = lambda x: lax.linalg.eig(x, compute_left_eigenvectors=True)
    w, vl, vr = run_on(pjrtx_device, f, a)
    w_cpu, _, _ = run_on(cpu_device, f, a)
    assert w.dtype == np.complex64 and vl.dtype == np.complex64 and vr.dtype == np.complex64
    n = shape[-1]
    bound = C * n * eps(dtype) * norm2(a)
    assert_same_spectrum(w, w_cpu, bound[..., 0], "eigenvalues vs XLA:CPU")
    assert_within(a @ vr, vr * w[..., None, :], bound, "A vr = vr w")
    assert_within(herm(vl) @ a, w[..., :, None] * herm(vl), bound, "vl^H A = w vl^H")
    for v in (vl, vr):  # geev's normalisation
        assert_within(np.linalg.norm(v, axis=-2), 1, C * n * eps(dtype), "unit 2-norm")
        top = np.take_along_axis(v, np.abs(v).argmax(-2)[..., None, :], -2)
        assert_within(top.imag, 0, C * eps(dtype), "largest component real")


def test_eig_general_matrix_residuals_and_eigvals(pjrtx_device, cpu_device):
    a = rand((2, 6, 6), np.float32)
    w, vr = run_on(pjrtx_device, jnp.linalg.eig, a)
    only = run_on(pjrtx_device, jnp.linalg.eigvals, a)
    bound = C * 6 * eps(np.float32) * norm2(a)
    assert_within(a @ vr, vr * w[..., None, :], bound, "A vr = vr w")
    # Each eigenvalue error <= cond(lambda) ||E|| with cond from the eigenvectors.
    v64 = np.linalg.eig(a.astype(np.float64))[1]
    kappa = np.linalg.cond(v64)[:, None]
    assert_same_spectrum(only, w, kappa * bound[..., 0], "eigvals vs eig")


def test_eig_nan_and_zero_size(pjrtx_device):
    a = rand((2, 3, 3), np.float32)
    a[1, 0, 0] = np.nan
    w, vr = run_on(pjrtx_device, jnp.linalg.eig, a)
    assert np.isnan(w[1].real).all() and np.isnan(w[1].imag).all() and np.isnan(vr[1]).all()
    assert np.isfinite(w[0]).all()
    w, vr = run_on(pjrtx_device, jnp.linalg.eig, np.zeros((0, 3, 3), np.float32))
    assert w.shape == (0, 3) and vr.shape == (0, 3, 3) and w.dtype == np.complex64


def test_eigvals_grad(pjrtx_device, cpu_device):
    a = normal_matrix(4, np.float32)
    f = jax.grad(lambda x: jnp.linalg.eigvals(x).real.sum())  # = trace: gradient I
    g = run_on(pjrtx_device, f, a)
    assert_within(g, np.eye(4), 4 * C * 4 * eps(np.float32) * norm2(a), "d trace / dA")


# ---- hessenberg, tridiagonal: LAPACK's packed outputs -------------------------

def householder_q(packed, taus, below):
    """Q = H_0 H_1 ... from reflectors v_i (v_i[i+below] = 1, tail below it)."""
    n = packed.shape[-1]
    q = np.eye(n, dtype=np.complex128)
    for i, tau in enumerate(taus):
        v = np.zeros(n, np.complex128)
        v[i + below] = 1
        v[i + below + 1:] = packed[i + below + 1:, i]
        q = q @ (np.eye(n) - tau * np.outer(v, v.conj()))
    return q


@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.float64])
@pytest.mark.parametrize("shape", [(1, 1), (6, 6), (2, 5, 5)])
def test_hessenberg_matches_lapack(pjrtx_device, cpu_device, dtype, shape):
    with x64_ctx(dtype):
        a = rand(shape, dtype)
        h, taus = run_on(pjrtx_device, lax.linalg.hessenberg, a)
        h_cpu, taus_cpu = run_on(cpu_device, lax.linalg.hessenberg, a)
    n = shape[-1]
    assert h.dtype == h_cpu.dtype and taus.shape == taus_cpu.shape
    bound = C * n * eps(dtype) * norm2(a)
    # Same reflectors as gehrd (larfg's sign choice); |v| <= 1 and 1 <= tau <= 2.
    assert_within(h, h_cpu, bound, "packed result vs XLA:CPU")
    beta = np.diagonal(h_cpu, -1, axis1=-2, axis2=-1)  # the subdiagonal each reflector made
    assert_within(taus, taus_cpu, tau_bound(bound[..., 0], beta), "taus vs XLA:CPU")
    for b in np.ndindex(shape[:-2]):
        q = householder_q(h[b], taus[b], 1)
        hh = np.triu(h[b], -1)
        assert_within(herm(q) @ a[b] @ q, hh, bound[b], "Q^H A Q = H")


@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.float64])
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (6, 6), (2, 5, 5)])
@pytest.mark.parametrize("lower", [True, False])
def test_tridiagonal_matches_lapack(pjrtx_device, cpu_device, dtype, shape, lower):
    with x64_ctx(dtype):
        a = rand(shape, dtype)  # one triangle is read, the other returned unchanged
        f = lambda x: lax.linalg.tridiagonal(x, lower=lower)
        got = run_on(pjrtx_device, f, a)
        want = run_on(cpu_device, f, a)
    n = shape[-1]
    bound = C * n * eps(dtype) * norm2(a)
    for g, w, name in zip(got[:3], want[:3], ("a", "d", "e")):
        assert g.dtype == w.dtype and g.shape == w.shape, name
        assert_within(g, w, bound if g.ndim == a.ndim else bound[..., 0], f"{name} vs XLA:CPU")
    assert got[3].dtype == want[3].dtype and got[3].shape == want[3].shape
    assert_within(got[3], want[3], tau_bound(bound[..., 0], want[2]), "taus vs XLA:CPU")
    arr, d, e, taus = got
    keep = np.triu(a, 1) if lower else np.tril(a, -1)
    np.testing.assert_array_equal(np.triu(arr, 1) if lower else np.tril(arr, -1), keep)


@pytest.mark.parametrize("op", ["hessenberg", "tridiagonal"])
def test_reductions_nan_and_zero_batch(pjrtx_device, op):
    f = getattr(lax.linalg, op)
    a = rand((2, 4, 4), np.float32)
    a[0, 3, 3] = np.nan
    out = run_on(pjrtx_device, f, a)
    assert np.isfinite(out[0][1]).all()
    assert not np.isfinite(out[0][0]).all()
    for o in run_on(pjrtx_device, f, np.zeros((0, 4, 4), np.float32)):
        assert o.shape[0] == 0


# ---- schur ---------------------------------------------------------------------

@pytest.mark.parametrize("lapack", ["scipy", "own"])
@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.float64])
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (7, 7), (3, 6, 6), (30, 30)])
def test_schur_invariants(pjrtx_device, cpu_device, dtype, shape, lapack, monkeypatch):
    # PJRTX_LAPACK is read per compile; fresh lambdas compile again.
    monkeypatch.setenv("PJRTX_LAPACK", lapack)
    with x64_ctx(dtype):
        a = rand(shape, dtype)
        t, z = run_on(pjrtx_device, lambda x: lax.linalg.schur(x), a)
        t_only = run_on(pjrtx_device, lambda x: lax.linalg.schur(x, compute_schur_vectors=False)[0], a)
        w_cpu = run_on(cpu_device, lambda x: jnp.linalg.eigvals(x), a.astype(np.complex64)) \
            if dtype != np.float64 else None
    n = shape[-1]
    assert t.dtype == dtype and z.dtype == dtype and t.shape == a.shape
    bound = C * n * eps(dtype) * norm2(a)
    assert_within(z @ t @ herm(z), a, bound, "Z T Z^H vs A")
    assert_within(herm(z) @ z, np.eye(n), C * n * eps(dtype), "Z^H Z")
    np.testing.assert_array_equal(t_only, t)
    if np.dtype(dtype).kind == "c":
        assert (np.tril(t, -1) == 0).all(), "complex Schur form is triangular"
    else:
        # Quasi-triangular: nothing below the subdiagonal, no two consecutive
        # subdiagonal entries, and each 2x2 block a complex pair in standard form.
        assert (np.tril(t, -2) == 0).all()
        sub = np.diagonal(t, -1, -2, -1)
        assert not (sub[..., 1:] != 0).__and__(sub[..., :-1] != 0).any()
        for idx in zip(*np.nonzero(sub)):
            *b, k = idx
            blk = t[tuple(b)][k:k + 2, k:k + 2]
            assert blk[0, 0] == blk[1, 1] and blk[0, 1] * blk[1, 0] < 0, blk
    if w_cpu is not None:
        # Eigenvalues on T's (block) diagonal: those of A, each within
        # cond(lambda) ||E|| (cond from the eigenvector matrix).
        w = np.linalg.eigvals(t.astype(np.complex128))
        kappa = np.linalg.cond(np.linalg.eig(a.astype(np.complex128))[1])[..., None]
        assert_same_spectrum(w, w_cpu, kappa * bound[..., 0] * 4, "eigenvalues")


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (2, 15, 15), (100, 100)])
def test_schur_is_xla_cpus_bit_for_bit(pjrtx_device, cpu_device, dtype, shape):
    # With SciPy's LAPACK (the default) pjrtx calls the gees XLA:CPU calls,
    # so even the conventions Schur leaves free (eigenvalue order, vector
    # signs, 2x2 blocks) are XLA:CPU's. 100 > 75 takes LAPACK's blocked
    # (aggressive early deflation) path.
    with x64_ctx(dtype):
        a = rand(shape, dtype)
        f = lambda x: lax.linalg.schur(x)  # noqa: E731
        got = run_on(pjrtx_device, f, a)
        want = run_on(cpu_device, f, a)
        t_only = run_on(pjrtx_device, lambda x: lax.linalg.schur(x, compute_schur_vectors=False)[0], a)
        t_only_cpu = run_on(cpu_device, lambda x: lax.linalg.schur(x, compute_schur_vectors=False)[0], a)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(t_only, t_only_cpu)


DECOMPOSITIONS = {
    "eigh_lower": lambda x: lax.linalg.eigh(x, lower=True, symmetrize_input=False),
    "eigh_upper": lambda x: lax.linalg.eigh(x, lower=False, symmetrize_input=False),
    "svd_economic": lambda x: jnp.linalg.svd(x, full_matrices=False),
    "svd_full": lambda x: jnp.linalg.svd(x, full_matrices=True),
    "svd_values": lambda x: jnp.linalg.svd(x, compute_uv=False),
    "eig_both": lambda x: lax.linalg.eig(x, compute_left_eigenvectors=True),
    "eig_right": lambda x: lax.linalg.eig(x, compute_left_eigenvectors=False),
    "eig_left": lambda x: lax.linalg.eig(x, compute_left_eigenvectors=True,
                                         compute_right_eigenvectors=False),
    "eigvals": lambda x: lax.linalg.eig(x, compute_left_eigenvectors=False,
                                        compute_right_eigenvectors=False),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("op", sorted(DECOMPOSITIONS))
def test_decompositions_are_xla_cpus_bit_for_bit(pjrtx_device, cpu_device, op, dtype):
    # With SciPy's LAPACK (the default) pjrtx calls syevd/heevd, gesdd and
    # geev as XLA:CPU does, so the conventions the decompositions leave free
    # (vector signs and phases, eig's eigenvalue order, its conjugate pairs)
    # are XLA:CPU's. Tall, wide and batched operands; 30 > 25 takes
    # divide and conquer in syevd and gesdd; a matrix with a NaN gives NaN
    # (gesdd and geev refuse it; XLA:CPU hands it to syevd, which may
    # return finite garbage: pjrtx keeps NaN there, test_eigh_nan_*).
    shapes = [(7, 7), (3, 30, 30)] if op.startswith(("eig", "eigh")) else [(9, 4), (4, 9), (3, 30, 20)]
    f = DECOMPOSITIONS[op]
    for shape in shapes:
        with x64_ctx(dtype):
            a = rand(shape, dtype)
            if len(shape) == 3 and not op.startswith("eigh"):
                a[1, 0, 0] = np.nan
            got, want = run_on(pjrtx_device, f, a), run_on(cpu_device, f, a)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
            np.testing.assert_array_equal(g, w, err_msg=f"{op} {shape}")


def test_lapack_variable_is_checked(pjrtx_device, monkeypatch):
    monkeypatch.setenv("PJRTX_LAPACK", "netlib")
    with pytest.raises(Exception, match="PJRTX_LAPACK must be 'scipy' or 'own'"):
        run_on(pjrtx_device, lambda x: lax.linalg.schur(x)[0] + 1, rand((3, 3), np.float32))


def test_schur_nan_and_zero_batch(pjrtx_device):
    a = rand((2, 4, 4), np.float32)
    a[0, 1, 2] = np.inf
    t, z = run_on(pjrtx_device, lax.linalg.schur, a)
    assert np.isnan(t[0]).all() and np.isnan(z[0]).all() and np.isfinite(t[1]).all()
    t, z = run_on(pjrtx_device, lax.linalg.schur, np.zeros((0, 3, 3), np.complex64))
    assert t.shape == (0, 3, 3) and z.dtype == np.complex64


def test_scipy_linalg_frontends(pjrtx_device, cpu_device):
    import jax.scipy.linalg as jsl
    a = rand((5, 5), np.float32)
    s = a + a.T
    w, v = run_on(pjrtx_device, jsl.eigh, s)
    assert_within(s @ v, v * w, C * 5 * eps(np.float32) * norm2(s), "scipy eigh")
    t, z = run_on(pjrtx_device, jsl.schur, a)
    assert_within(z @ t @ z.T, a, C * 5 * eps(np.float32) * norm2(a), "scipy schur")
    u, p = run_on(pjrtx_device, lambda x: jsl.polar(x, method="svd"), a)
    assert_within(u @ p, a, C * 5 * eps(np.float32) * norm2(a), "polar U P = A")
    assert_within(u.T @ u, np.eye(5), C * 5 * eps(np.float32), "polar U orthogonal")
    h = run_on(pjrtx_device, jsl.hessenberg, a)
    h_cpu = run_on(cpu_device, jsl.hessenberg, a)
    assert_within(h, h_cpu, C * 5 * eps(np.float32) * norm2(a), "scipy hessenberg")
