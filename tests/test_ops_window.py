"""reduce_window (cumulative fast path and pooling) and select_and_scatter
(pooling gradients) against XLA:CPU."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

from oracle import assert_same, sum_bound
from test_ops_elementwise import check, name, x64_for

X = np.arange(6, dtype=np.float32)
M = np.random.default_rng(0).standard_normal((2, 9, 8, 3)).astype(np.float32)
TIES = np.random.default_rng(1).integers(0, 3, (2, 9, 8, 3)).astype(np.float32)


@pytest.mark.parametrize("f", [jnp.cumsum, jnp.cumprod, lambda v: lax.cummax(v, 0),
                               lambda v: lax.cummin(v, 0, reverse=True),
                               lambda v: jnp.cumsum(v.astype(jnp.int8)),
                               lambda v: jnp.cumsum(v > 2)])
def test_cumulative(f):
    assert_same(f, X, rtol=1e-6)


def test_cumsum_long_is_linear():
    big = np.random.default_rng(0).standard_normal(100000).astype(np.float32)
    # the general window path refuses windows this long: this runs only as a scan
    assert_same(jnp.cumsum, big, rtol=1e-3, atol=1e-3)
    assert_same(lambda m: jnp.cumsum(m, axis=2), M, rtol=1e-5)


def test_pooling():
    assert_same(lambda m: lax.reduce_window(m, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME"), M)
    # Window sums: the summation order may differ from XLA:CPU's, so the
    # results agree within the rounding of a 4-term (resp. 3 terms + init)
    # sum, relative to the sum of |terms| (cancellation makes some results
    # tiny).
    def sum_pool(m):
        return lax.reduce_window(m, 0.0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1), "VALID")

    def dilated_pool(m):
        return lax.reduce_window(m, 0.0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1),
                                 ((0, 0), (1, 2), (0, 1), (0, 0)), base_dilation=(1, 2, 1, 1),
                                 window_dilation=(1, 1, 2, 1))

    # non-identity init: XLA:CPU skips padding elements and counts init once
    def init_pool(m):
        return lax.reduce_window(m, 1.0, lax.add, (1, 3, 1, 1), (1, 1, 1, 1),
                                 ((0, 0), (2, 0), (0, 0), (0, 0)))

    for f, terms in ((sum_pool, 4), (dilated_pool, 4), (init_pool, 4)):
        assert_same(f, M, bound=sum_bound(f, M, terms=terms))
    assert_same(jax.grad(lambda m: lax.reduce_window(m, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1),
                                                     "VALID").sum()), M)
    assert_same(lambda m: lax.reduce_window(m.astype(jnp.int32), 0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1),
                                            "SAME"), M)


@pytest.mark.parametrize("m", [M, TIES], ids=["random", "ties"])
def test_pooling_gradients(m):
    # select_and_scatter: the first maximum (minimum) of each window gets the gradient
    assert_same(jax.grad(lambda m: lax.reduce_window(m, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1),
                                                     "SAME").sum()), m)
    assert_same(jax.grad(lambda m: (lax.reduce_window(m, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1),
                                                      "VALID") ** 2).sum()), m)
    assert_same(jax.grad(lambda m: lax.reduce_window(m, jnp.inf, lax.min, (1, 3, 2, 1), (1, 1, 2, 1),
                                                     ((0, 0), (1, 1), (0, 1), (0, 0))).sum()), m)


def test_cumlogsumexp_long_runs_as_scan():
    # Not one of MLX's cumulative ops: a parallel prefix scan of the body
    # (the windowed path refuses 1e5-long windows, so this can only pass as
    # a scan).
    big = np.random.default_rng(2).standard_normal(100000).astype(np.float32)
    assert_same(lambda v: lax.cumlogsumexp(v), big, rtol=2e-5, atol=1e-5)
    # Results near 0 (log of a sum near 1) carry absolute, not relative, error.
    assert_same(lambda m: lax.cumlogsumexp(m, axis=1, reverse=True), M, rtol=2e-6, atol=2e-7)


def test_variadic_reduce_window():
    # A (value, index) pair per window, as an argmax pooling would do.
    idx = np.arange(M.size, dtype=np.int32).reshape(M.shape)

    def argmax_pool(m, i):
        def body(a, b):
            take_b = b[0] > a[0]
            return jnp.where(take_b, b[0], a[0]), jnp.where(take_b, b[1], a[1])
        return lax.reduce_window((m, i), (-jnp.inf, np.int32(-1)), body, (1, 3, 3, 1),
                                 (1, 2, 2, 1), "SAME")

    # Distinct values: with ties the winner depends on the visiting order,
    # which StableHLO leaves open for a non-commutative body.
    assert_same(argmax_pool, M, idx)


def test_reduce_window_negative_padding_and_general_body():
    pad = ((0, 0), (-1, 2), (1, -2), (0, 0))
    assert_same(lambda m: lax.reduce_window(m, 0.0, lax.add, (1, 2, 2, 1), (1, 1, 2, 1), pad), M,
                rtol=1e-6, atol=1e-6)
    assert_same(lambda m: lax.reduce_window(m, 1.0, lambda a, b: a * jnp.abs(b), (1, 2, 1, 1),
                                            (1, 1, 1, 1), pad, base_dilation=(1, 2, 1, 1)), M,
                rtol=1e-6)


@pytest.mark.parametrize("window", [2, 3])
@pytest.mark.parametrize("dt", [np.float32, jnp.bfloat16], ids=["f32", "bf16"])
def test_sum_pool_gradient_repeats_the_cotangent(monkeypatch, window, dt):
    # JAX's gradient of a sum pool whose stride is its window (avg_pool's)
    # pads the cotangent (interior and edges window-1) and sums windows of
    # it with stride 1. The frontend folds the pad into the window, whose
    # every window then holds one element: the gradient is the cotangent
    # repeated, plus the +0 init (-0 becomes +0, as on XLA:CPU). No slices.
    from oracle import primitives_per_call
    from test_ops_elementwise import check
    monkeypatch.setenv("PJRTX_COMPILE", "never")
    r = np.random.default_rng(window)
    m = r.standard_normal((2, 4 * window, 4 * window, 3)).astype(dt)
    w = r.standard_normal((2, 4, 4, 3)).astype(dt)
    w[0, 0, :2] = -0.0
    w[1, 2, 1] = np.inf

    def grad(m, w):
        dims = (1, window, window, 1)
        return {"g": jax.grad(lambda m: (lax.reduce_window(m, np.zeros((), dt), lax.add,
                                                           dims, dims, "VALID") * w).sum())(m)}

    check(grad, m, w)
    h = primitives_per_call(grad, m, w)
    assert not any(k.startswith("Slice") for k in h), h


def test_pad_folds_into_window_only_with_its_init():
    # A pad by the window's init is the window's own padding (folded, then
    # the general path with base dilation); a pad by another value is not.
    def same(m):
        p = lax.pad(m, 0.0, [(0, 0, 0), (2, 1, 1), (0, 2, 1), (0, 0, 0)])
        return lax.reduce_window(p, 0.0, lax.add, (1, 3, 3, 1), (1, 2, 1, 1), "VALID")

    def other(m):
        p = lax.pad(m, 1.0, [(0, 0, 0), (1, 1, 1), (1, 1, 1), (0, 0, 0)])
        return lax.reduce_window(p, 0.0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1), "VALID")

    assert_same(same, M, bound=sum_bound(same, M, terms=9))
    assert_same(other, M, bound=sum_bound(other, M, terms=4))


SCAN_DTYPES = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64]
# Rows with NaNs first, inside and last, zeros of both signs in every order,
# and a long row (several GPU threads' chunks) with a NaN late and zeros.
SCAN_ROWS = np.array([[-0.0, 0.0, -0.0, np.nan, 1.0, 0.5, -0.0, 0.0],
                      [0.0, -0.0, 0.0, 2.0, np.nan, -1.0, 0.0, -0.0],
                      [np.nan, -0.0, 0.0, 3.0, -3.0, 0.0, -0.0, 1.0],
                      [-1.0, -0.0, -2.0, 0.0, -0.0, -5.0, 0.0, np.nan]], np.float32)


def scan_long():
    v = (np.arange(3001) * 37 % 101 - 50).astype(np.float32)
    v[v == 0] = -0.0
    v[1500] = 0.0
    v[2600] = np.nan
    return v


def scans(v):
    out = {}
    for axis in range(v.ndim):
        for rev in (False, True):
            out[f"max{axis}{'r' if rev else ''}"] = lax.cummax(v, axis, reverse=rev)
            out[f"min{axis}{'r' if rev else ''}"] = lax.cummin(v, axis, reverse=rev)
    return out


@pytest.mark.parametrize("dt", SCAN_DTYPES, ids=name)
def test_cummax_cummin_nan_and_signed_zeros(dt):
    # XLA's max/min: NaN from its position on, and -0 below +0, so a running
    # max over zeros is +0 from the first +0 on (MLX keeps whichever zero it
    # meets). Values and zero signs must equal XLA:CPU's, both directions.
    with x64_for(dt):
        check(scans, SCAN_ROWS.astype(dt))
        check(scans, scan_long().astype(dt))


@pytest.mark.parametrize("dt", SCAN_DTYPES, ids=name)
def test_cummax_cummin_where_mlx_scans_drop_nan(mlx_rules_forced_off, dt):
    # Where MLX's cummax/cummin would not carry NaNs on the device (pjrtx
    # probes it), NaNs are scanned apart: the same answers as XLA:CPU.
    with x64_for(dt):
        check(scans, SCAN_ROWS.astype(dt))
        check(scans, scan_long().astype(dt))


@pytest.mark.parametrize("dt", SCAN_DTYPES, ids=name)
def test_mlx_scan_rule_probe_matches_mlx(dt):
    # The probe's verdict on the CPU is what mlx.core's cummax/cummin do with
    # NaNs, against NumPy's maximum/minimum.accumulate.
    import mlx.core as mx
    from pjrtx import _pjrtx

    mdt = {"float16": mx.float16, "bfloat16": mx.bfloat16, "float32": mx.float32,
           "float64": mx.float64}[name(dt)]
    agrees = True
    for r in ([1, 3, np.nan, 5, 4], [np.nan, 1, 2], [2, 1, np.nan], list(scan_long())):
        r = np.array(r, np.float32)
        v = mx.array(r).astype(mdt)
        for f, ref in ((mx.cummax, np.maximum.accumulate), (mx.cummin, np.minimum.accumulate)):
            got = np.array(f(v, stream=mx.cpu).astype(mx.float32))
            agrees &= bool(np.array_equal(np.isnan(got), np.isnan(ref(r))))
    assert _pjrtx.mlx_rule("scan", "cpu", name(dt)) == agrees
