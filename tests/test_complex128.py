"""complex128 on pjrtx. MLX has no complex<f64> dtype, so pjrtx stores a
c128[S] value as f64[S, 2] (re, im) pairs and computes in f64
(csrc/backend/mlx/complex128.h). Every result is compared with XLA:CPU (or
NumPy's double-precision LAPACK/pocketfft, for decompositions that are only
defined up to their invariants) within a bound from the computation's
rounding: exact for ops that move or select values, a few ulps normwise for
arithmetic and transcendentals, a summation bound for sums and products of
matrices, residual bounds for decompositions."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from oracle import assert_same, run_on, sum_bound

EPS = np.finfo(np.float64).eps


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


def crand(shape, seed=0, lo=0.5, hi=2.0):
    """Complex values whose parts have magnitudes in [lo, hi) and random
    signs: away from the zeros and branch cuts of the functions tested, so
    each function's condition number there is O(1)."""
    rng = np.random.default_rng(seed)
    mag = lambda: rng.uniform(lo, hi, shape) * rng.choice([-1.0, 1.0], shape)
    return mag() + 1j * mag()


def assert_close_normwise(got, want, k):
    """|got - want| <= k * eps * |want| elementwise, |.| the complex modulus:
    k counts the roundings of a formula of a few f64 operations, each of
    relative size eps, on both sides."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    err = np.abs(got.astype(np.complex128) - want.astype(np.complex128))
    bound = k * EPS * np.abs(want.astype(np.complex128))
    assert np.all(err <= bound), (np.max(err / np.maximum(bound, 1e-300)), got[err > bound][:3], want[err > bound][:3])


# ---- storage and data movement: exact -----------------------------------------------------


def test_transfers_and_moves_keep_every_bit(pjrtx_device):
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2 ** 64, size=(64, 2), dtype=np.uint64)
    bits[:6, 0] = [0x7FF8000000000001, 0xFFF0000000000000, 2 ** 63, 0, 1, 0x7FF0000000000000]
    x = bits.view(np.complex128).reshape(8, 8)
    for host in (x, x[:, ::3], x.T):  # strided views too
        on = jax.device_put(host, pjrtx_device)
        assert on.dtype == np.complex128 and on.shape == host.shape
        np.testing.assert_array_equal(np.asarray(on).view(np.uint64), np.ascontiguousarray(host).view(np.uint64))
    moved = run_on(pjrtx_device, lambda a: (a.T[::-1, 1:5], jnp.concatenate([a, a[:2]]), a.reshape(4, 16),
                                            jnp.pad(a, 1), a[jnp.array([3, 0, 3])]), x)
    want = (x.T[::-1, 1:5], np.concatenate([x, x[:2]]), x.reshape(4, 16), np.pad(x, 1), x[[3, 0, 3]])
    assert len(moved) == len(want)  # zip drops no case
    for g, w in zip(moved, want):
        np.testing.assert_array_equal(g.view(np.uint64), np.ascontiguousarray(w).view(np.uint64))


def test_selects_gathers_scatters_and_control_flow_match_cpu():
    x = crand((6, 5), seed=1)
    idx = np.array([4, 0, 4, 2])

    def f(a):
        return {
            "where": jnp.where(a.real > 0, a, jnp.conj(a)),
            "gather": a[idx, 1:3],
            "set": a.at[idx].set(a[0]),
            "dus": lax.dynamic_update_slice(a, a[:2, :2] * 2, (3, 1)),
            "rev": a[::-1, ::-1],
            "bcast": jnp.broadcast_to(a[:, :1], (6, 5)),
            "fori": lax.fori_loop(0, 5, lambda i, z: z * 0.5 + 1j, a),
            "cond": lax.cond(a[0, 0].real > 0, lambda z: z * 2, lambda z: -z, a),
            "eq": a == a[::-1], "ne": a != a[0],
            "real": a.real, "imag": a.imag, "complex": lax.complex(a.imag, a.real),
            "neg": -a, "add": a + a[::-1], "sub": a - 1j,
        }

    assert_same(f, x)


def test_scatters_with_any_body_and_scans_match_cpu():
    x = crand((6, 3), seed=20)
    u = crand((4, 3), seed=21)
    idx = np.array([1, 4, 1, 1])  # a position hit three times
    seg = np.array([0, 1, 1, 2, 0, 2])

    def f(a, b):
        return {
            "mul": a.at[idx].multiply(b),        # the body runs on the pairs, in rounds
            "mul2": a.at[idx, 2].multiply(b[:, 0]),
            "add": a.at[idx].add(b),              # sums run on each part
            "scalar": jnp.zeros((), a.dtype).at[()].add(a[0, 0]),
            "seg_sum": jax.ops.segment_sum(a, seg, 3),
            "iota": lax.iota(jnp.complex128, 5) * 1j,
        }

    # A product of at most 4 factors per element: a few ulps normwise.
    got = run_on(jax.devices("pjrtx")[0], f, x, u)
    want = run_on(jax.devices("cpu")[0], f, x, u)
    for key in got:
        assert_close_normwise(got[key], want[key], 32)
    for g, w in ((run_on(jax.devices("pjrtx")[0], lambda a: (jnp.cumprod(a, 1), jax.ops.segment_prod(a, seg, 3)), x),
                  run_on(jax.devices("cpu")[0], lambda a: (jnp.cumprod(a, 1), jax.ops.segment_prod(a, seg, 3)), x)),):
        for a, b in zip(g, w):
            assert_close_normwise(a, b, 32)


def test_cumprod_along_an_axis_of_length_one_is_the_input():
    # jnp.cumprod along a length-1 axis is a reduce_window of one element
    # per window: init * x, exactly x (also with -0.0 and infinite parts).
    x = crand((4, 1, 3), seed=22)
    x[0, 0, 0] = complex(-0.0, np.inf)
    got = run_on(jax.devices("pjrtx")[0], lambda a: (jnp.cumprod(a, 1), jnp.cumsum(a, 1)), x)
    want = run_on(jax.devices("cpu")[0], lambda a: (jnp.cumprod(a, 1), jnp.cumsum(a, 1)), x)
    for g, w in zip(got, want):
        assert g.dtype == np.complex128
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(got[1], x)


def test_sort_with_complex_keys_matches_cpu():
    rng = np.random.default_rng(2)
    x = rng.integers(-2, 3, (4, 9)) + 1j * rng.integers(-2, 3, (4, 9))  # ties in both parts
    x[0, :3] = [np.nan, complex(np.nan, 1), complex(1, np.nan)]
    assert_same(lambda a: {"sort": jnp.sort(a, axis=1), "argsort": jnp.argsort(a, axis=1, stable=True),
                           "desc": jnp.sort(a, axis=0, descending=True),
                           "unique": jnp.unique(a[1:], size=20, fill_value=0)}, x)


def test_conversions_match_cpu():
    x = crand((5,), seed=3) * 1e3
    assert_same(lambda a: {"c64": a.astype(jnp.complex64), "f64": lax.real(a).astype(jnp.complex128),
                           "back": a.astype(jnp.complex64).astype(jnp.complex128),
                           "to_f32": a.real.astype(jnp.float32), "to_s32": lax.convert_element_type(a.real, jnp.int32),
                           "view": a.view(jnp.float64)}, x)


# ---- arithmetic and transcendentals --------------------------------------------------------

UNARY = {
    "mul": (lambda z: z * z[::-1], 8), "div": (lambda z: z / z[::-1], 16),
    "abs": (lambda z: jnp.abs(z).astype(jnp.complex128), 8), "sign": (lax.sign, 8),
    "exp": (jnp.exp, 16), "expm1": (jnp.expm1, 16), "log": (jnp.log, 16), "log1p": (jnp.log1p, 16),
    "sqrt": (jnp.sqrt, 8), "rsqrt": (lax.rsqrt, 16), "sin": (jnp.sin, 16), "cos": (jnp.cos, 16),
    "tan": (jnp.tan, 32), "tanh": (jnp.tanh, 32), "logistic": (lax.logistic, 32),
    "pow": (lambda z: z ** z[::-1], 64), "arcsin": (jnp.arcsin, 64), "arctan": (jnp.arctan, 64),
    "sinh": (jnp.sinh, 32), "reciprocal": (jnp.reciprocal, 16),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_elementwise_matches_cpu_to_a_few_ulps(name, pjrtx_device, cpu_device):
    f, k = UNARY[name]
    z = crand((4, 64), seed=4)
    assert_close_normwise(run_on(pjrtx_device, f, z), run_on(cpu_device, f, z), k)


SPECIALS = np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, 1e300, -1e-300])
SPECIAL_Z = np.array([complex(a, b) for a in SPECIALS for b in SPECIALS])


@pytest.mark.parametrize("name", ["abs", "sign", "exp", "expm1", "log", "log1p", "sqrt", "sin", "cos",
                                  "tan", "tanh", "logistic", "mul", "div", "pow"])
def test_special_values_match_cpu(name, pjrtx_device, cpu_device):
    """Zeros, infinities, NaNs and extreme magnitudes in both parts: the
    same class of answer as XLA:CPU (inf, NaN, signed zero), and the same
    value to a few ulps where finite."""
    f = {"mul": lambda z: z * z[::-1], "div": lambda z: z / z[::-1], "pow": lambda z: lax.pow(z, z[::-1]),
         "sign": lax.sign, "logistic": lax.logistic}.get(name) or getattr(jnp, name)
    got = run_on(pjrtx_device, f, SPECIAL_Z).astype(np.complex128)
    want = run_on(cpu_device, f, SPECIAL_Z).astype(np.complex128)
    for g, w in ((got.real, want.real), (got.imag, want.imag)):
        both_nan = np.isnan(g) & np.isnan(w)
        close = np.abs(g - w) <= 8 * EPS * np.abs(w)
        bad = ~(both_nan | (g == w) | close)
        assert not bad.any(), (SPECIAL_Z[bad], got[bad], want[bad])


def test_dot_and_einsum_within_the_summation_bound():
    a, b = crand((7, 33), seed=5), crand((33, 6), seed=6)
    c = crand((3, 33), seed=7).real  # real x complex too
    # Each complex product-sum is two real sums of 2 * 33 terms.
    bound = sum_bound(lambda x, y: x @ y, np.abs(a), np.abs(b), terms=2 * 33, dtype=np.float64) * 2
    assert_same(lambda x, y: x @ y, a, b, bound=bound)
    assert_same(lambda x, y: jnp.einsum("ik,kj->ij", x, y), a, b, bound=bound)
    bound_c = sum_bound(lambda x, y: x @ y, np.abs(c), np.abs(b), terms=33, dtype=np.float64) * 2
    assert_same(lambda x, y: x @ y, c, b, bound=bound_c)


def test_complex64_operands_with_a_complex128_result():
    # lax.dot(..., preferred_element_type=complex128) on complex64 operands:
    # their parts widen to f64 exactly, then the products sum in f64.
    a = crand((5, 17), seed=12).astype(np.complex64)
    b = crand((17, 4), seed=13).astype(np.complex64)
    r = crand((17, 4), seed=14).real.astype(np.float32)
    f = lambda x, y: lax.dot(x, y, preferred_element_type=np.complex128)
    bound = sum_bound(lambda x, y: x @ y, np.abs(a), np.abs(b), terms=2 * 17, dtype=np.float64) * 2
    assert_same(f, a, b, bound=bound)
    got = run_on(jax.devices("pjrtx")[0], f, a, b)
    exact = a.astype(np.complex128) @ b.astype(np.complex128)
    assert got.dtype == np.complex128
    assert np.all(np.abs(got.real - exact.real) <= bound) and np.all(np.abs(got.imag - exact.imag) <= bound)
    bound_r = sum_bound(lambda x, y: x @ y, np.abs(a), np.abs(r), terms=17, dtype=np.float64) * 2
    assert_same(f, a, r, bound=bound_r)


def test_reductions_within_their_bounds():
    x = crand((5, 40), seed=8)
    bound = sum_bound(lambda v: jnp.sum(v, axis=1), np.abs(x), terms=40, dtype=np.float64) * 2
    assert_same(lambda v: jnp.sum(v, axis=1), x, bound=bound)
    assert_same(lambda v: jnp.cumsum(v, axis=1), x,
                bound=sum_bound(lambda v: jnp.cumsum(v, axis=1), np.abs(x), terms=40, dtype=np.float64) * 2)
    # A product of n factors errs by at most about (3n) eps relatively: each
    # complex multiply is a few ulps normwise.
    y = crand((5, 12), seed=9, lo=0.7, hi=1.2)
    got = run_on(jax.devices("pjrtx")[0], lambda v: jnp.prod(v, axis=1), y)
    assert_close_normwise(got, np.prod(y, axis=1), 3 * 12 * 4)


def test_holomorphic_grad_and_jvp_match_cpu(pjrtx_device, cpu_device):
    z = crand((6,), seed=10)
    f = lambda v: jnp.sum(jnp.sin(v) * jnp.exp(v) / (1 + v * v))
    g = jax.grad(f, holomorphic=True)
    assert_close_normwise(run_on(pjrtx_device, g, z), run_on(cpu_device, g, z), 128)
    h = jax.grad(lambda v: jnp.sum(jnp.abs(v) ** 2))  # real output: conj-linear gradient
    assert_close_normwise(run_on(pjrtx_device, h, z), run_on(cpu_device, h, z), 8)


def test_host_callbacks_see_and_return_complex128(pjrtx_device):
    z = crand((4,), seed=11)
    seen = []

    def host(v):
        seen.append(np.asarray(v))
        return np.asarray(v) * 2j

    out = run_on(pjrtx_device, lambda v: jax.pure_callback(host, jax.ShapeDtypeStruct(v.shape, v.dtype), v + 1), z)
    assert seen[0].dtype == np.complex128
    np.testing.assert_array_equal(seen[0], z + 1)
    np.testing.assert_array_equal(out, (z + 1) * 2j)


# ---- FFT in double precision ---------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 8, 12, 7, 97, 256])
def test_fft_double_precision_within_bound(n, pjrtx_device):
    """Against NumPy's pocketfft in f64. An FFT's error in each output is at
    most c * log2(n) * eps * sum|x| (Cooley-Tukey; Bluestein runs three
    power-of-two FFTs of length m < 4n, so log2(4n) bounds its depth)."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal((3, n)) + 1j * rng.standard_normal((3, n))
    r = rng.standard_normal((3, n))
    depth = np.log2(4 * n) + 1
    bound = lambda v: 16 * depth * EPS * np.sum(np.abs(v), axis=-1, keepdims=True)
    cases = [
        (jnp.fft.fft, np.fft.fft, x, bound(x)),
        (jnp.fft.ifft, np.fft.ifft, x, bound(x) / n),
        (jnp.fft.rfft, np.fft.rfft, r, bound(r)),
        (lambda v: jnp.fft.irfft(v, n), lambda v: np.fft.irfft(v, n), x[:, : n // 2 + 1], 2 * bound(x) / n),
    ]
    for f, ref, arg, b in cases:
        got = run_on(pjrtx_device, f, arg)
        want = ref(arg)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.all(np.abs(got - want) <= b), np.max(np.abs(got - want) / b)


def test_fftn_and_irfftn_double_precision(pjrtx_device):
    rng = np.random.default_rng(12)
    x = rng.standard_normal((2, 6, 10)) + 1j * rng.standard_normal((2, 6, 10))
    b = 16 * 8 * EPS * np.sum(np.abs(x))
    np.testing.assert_allclose(run_on(pjrtx_device, jnp.fft.fftn, x), np.fft.fftn(x), rtol=0, atol=b)
    np.testing.assert_allclose(run_on(pjrtx_device, lambda v: jnp.fft.irfftn(v, (6, 9)), x[:, :, :5]),
                               np.fft.irfftn(x[:, :, :5], (6, 9)), rtol=0, atol=b / 54)


# ---- linear algebra in complex<double> -----------------------------------------------------


def cmat(shape, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def herm(a):
    return np.conj(np.swapaxes(a, -1, -2))


def test_factorizations_and_solves_by_residual(pjrtx_device):
    """Backward-stable factorizations: residuals of order n * eps * |A|."""
    n = 6
    a = cmat((2, n, n), 13)
    spd = a @ herm(a) + n * np.eye(n)
    b = cmat((2, n, 3), 14)
    tol = lambda m: 32 * n * EPS * np.linalg.norm(m, axis=(-2, -1), ord=2)[..., None, None]
    x = run_on(pjrtx_device, jnp.linalg.solve, a, b)
    assert x.dtype == np.complex128 and np.all(np.abs(a @ x - b) <= tol(a) * np.abs(x).max())
    q, r = run_on(pjrtx_device, jnp.linalg.qr, a)
    assert np.all(np.abs(q @ r - a) <= tol(a)) and np.all(np.abs(herm(q) @ q - np.eye(n)) <= 32 * n * EPS)
    assert np.all(np.tril(r, -1) == 0)
    l = run_on(pjrtx_device, jnp.linalg.cholesky, spd)
    assert np.all(np.abs(l @ herm(l) - spd) <= tol(spd)) and np.all(np.triu(l, 1) == 0)
    p, lo, up = run_on(pjrtx_device, jax.scipy.linalg.lu, a[0])
    assert np.all(np.abs(p @ lo @ up - a[0]) <= tol(a)[0])
    det = run_on(pjrtx_device, jnp.linalg.det, a)
    np.testing.assert_allclose(det, np.linalg.det(a), rtol=64 * n * EPS * np.linalg.cond(a).max())


def test_eigh_svd_and_eig_by_residual(pjrtx_device):
    n = 7
    a = cmat((2, n, n), 15)
    h = a + herm(a)
    h[0, :3, :3] = np.eye(3) * 2.0  # a repeated eigenvalue in the first matrix
    h[0, :3, 3:] = h[0, 3:, :3] = 0
    norm = np.linalg.norm(h, axis=(-2, -1), ord=2)[..., None, None]
    w, v = run_on(pjrtx_device, jnp.linalg.eigh, h)
    assert w.dtype == np.float64 and v.dtype == np.complex128
    assert np.all(np.diff(w, axis=-1) >= 0)
    assert np.all(np.abs(h @ v - v * w[..., None, :]) <= 32 * n * EPS * norm)
    assert np.all(np.abs(herm(v) @ v - np.eye(n)) <= 32 * n * EPS)
    assert np.all(np.abs(w - np.linalg.eigvalsh(h)) <= 32 * n * EPS * norm[..., 0])

    for shape, full in [((8, 5), True), ((8, 5), False), ((5, 8), True), ((5, 8), False)]:
        m = cmat(shape, 16)
        u, s, vh = run_on(pjrtx_device, lambda x: jnp.linalg.svd(x, full_matrices=full), m)
        k = min(shape)
        nrm = np.linalg.norm(m, 2)
        assert np.all(np.diff(s) <= 0)
        assert np.all(np.abs((u[:, :k] * s) @ vh[:k] - m) <= 32 * max(shape) * EPS * nrm)
        assert np.all(np.abs(herm(u) @ u - np.eye(u.shape[1])) <= 32 * max(shape) * EPS)
        assert np.all(np.abs(vh @ herm(vh) - np.eye(vh.shape[0])) <= 32 * max(shape) * EPS)
        np.testing.assert_allclose(s, np.linalg.svd(m, compute_uv=False), rtol=0, atol=32 * max(shape) * EPS * nrm)

    for g in (cmat((n, n), 17), cmat((n, n), 18).real):  # c128, and f64 (c128 eigenvalues)
        w, vl, vr = run_on(pjrtx_device, lambda x: lax.linalg.eig(x, compute_left_eigenvectors=True), g)
        nrm = np.linalg.norm(g, 2)
        assert w.dtype == vl.dtype == vr.dtype == np.complex128
        # Right and left residuals within eps |A| times the conditioning of
        # the eigenvectors (well-conditioned random matrices).
        kappa = np.linalg.cond(np.linalg.eig(g)[1])
        assert np.all(np.abs(g @ vr - vr * w) <= 64 * n * EPS * nrm * kappa)
        assert np.all(np.abs(herm(vl) @ g - w[:, None] * herm(vl)) <= 64 * n * EPS * nrm * kappa)
        np.testing.assert_allclose(np.linalg.norm(vr, axis=0), 1, rtol=0, atol=16 * n * EPS)
        np.testing.assert_allclose(np.sort_complex(w), np.sort_complex(np.linalg.eigvals(g)),
                                   rtol=0, atol=64 * n * EPS * nrm * kappa)


def test_nonfinite_matrices_give_nan(pjrtx_device):
    a = cmat((2, 3, 3), 19)
    a[1, 0, 0] = np.nan
    for f in (jnp.linalg.eigvals, lambda x: jnp.linalg.eigh(x + jnp.conj(jnp.swapaxes(x, -1, -2)))[0],
              lambda x: jnp.linalg.svd(x, compute_uv=False)):
        out = run_on(pjrtx_device, f, a)
        assert np.isnan(out[1]).all() and np.isfinite(out[0]).all()


def test_f64_policy_error_names_complex128():
    from test_ops_x64 import run_with_env
    r = run_with_env("""
        import jax, jax.numpy as jnp, numpy as np
        try:
            jax.jit(lambda z: z * z)(np.ones(3, np.complex128))
        except Exception as e:
            print("ERR", e)
    """, PJRTX_F64="error")
    assert "ERR" in r.stdout and "complex128 (c128) values are refused by PJRTX_F64=error" in r.stdout, r.stdout + r.stderr
