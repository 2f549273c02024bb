"""jax.experimental.sparse's spmv/spmm kernels (coo_spmv_p, coo_spmm_p,
csr_spmv_p, csr_spmm_p), which JAX lowers to cuSPARSE only, on pjrtx:
op(A) @ x against the dense product on XLA:CPU, op the plain transpose or
the identity. The dense and sparse sums add the same products in different
orders, so they may differ by the summation bound (oracle.sum_bound)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from oracle import run_on, sum_bound

PJ = jax.devices("pjrtx")[0]
CPU = jax.devices("cpu")[0]


def _lowerings():
    from jax.experimental.sparse import _lowerings
    return _lowerings


def _matrix(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    m = rng.standard_normal(shape) * (rng.random(shape) < 0.5)
    if np.dtype(dtype).kind == "c":
        m = m + 1j * rng.standard_normal(shape) * (m != 0)
    return m.astype(dtype)


def _operand(n, cols, dtype, seed):
    rng = np.random.default_rng(seed + 100)
    shape = (n,) if cols is None else (n, cols)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _check(got, dense, x, transpose):
    product = (lambda a, v: a.T @ v) if transpose else (lambda a, v: a @ v)
    want = run_on(CPU, product, dense, x)
    # a complex product and sum is at most 4 real roundings per term
    terms = dense.shape[0 if transpose else 1] * (4 if dense.dtype.kind == "c" else 1)
    bound = sum_bound(product, dense, x, terms=terms)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.all(np.abs(got.astype(np.complex128) - want) <= bound), (got, want, bound)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("cols", [None, 3], ids=["spmv", "spmm"])
@pytest.mark.parametrize("shape", [(4, 5), (6, 3)])
def test_coo_product_matches_dense(shape, cols, transpose, dtype):
    lw = _lowerings()
    m = _matrix(shape, dtype, seed=shape[0])
    row, col = np.nonzero(m)
    x = _operand(shape[0] if transpose else shape[1], cols, dtype, seed=shape[0])
    prim = lw.coo_spmv_p if cols is None else lw.coo_spmm_p
    f = lambda d, r, c, v: prim.bind(d, r, c, v, transpose=transpose, shape=shape)
    got = run_on(PJ, f, m[row, col], row.astype(np.int32), col.astype(np.int32), x)
    _check(got, m, x, transpose)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("cols", [None, 3], ids=["spmv", "spmm"])
@pytest.mark.parametrize("padding", [0, 3])
def test_csr_product_matches_dense(padding, cols, transpose, dtype):
    from jax.experimental.sparse import csr

    lw = _lowerings()
    shape = (5, 4)
    m = _matrix(shape, dtype, seed=7)
    # nse past the stored entries pads data/indices; those slots must not count
    data, indices, indptr = csr._csr_fromdense(jnp.asarray(m), nse=int((m != 0).sum()) + padding)
    x = _operand(shape[0] if transpose else shape[1], cols, dtype, seed=7)
    prim = lw.csr_spmv_p if cols is None else lw.csr_spmm_p
    f = lambda d, i, p, v: prim.bind(d, i, p, v, transpose=transpose, shape=shape)
    got = run_on(PJ, f, np.asarray(data), np.asarray(indices), np.asarray(indptr), x)
    _check(got, m, x, transpose)


def test_duplicate_coo_entries_add_up():
    # cuSPARSE sums repeated coordinates; so does the scatter-add
    lw = _lowerings()
    row = np.array([0, 2, 0, 1, 0], np.int32)
    col = np.array([1, 0, 1, 2, 1], np.int32)
    data = np.array([1.5, -2.0, 0.25, 3.0, 4.0], np.float32)
    dense = np.zeros((3, 3), np.float32)
    np.add.at(dense, (row, col), data)
    x = np.array([1.0, 2.0, -1.0], np.float32)
    for transpose in (False, True):
        f = lambda d, r, c, v: lw.coo_spmv_p.bind(d, r, c, v, transpose=transpose, shape=(3, 3))
        _check(run_on(PJ, f, data, row, col, x), dense, x, transpose)


def test_rules_are_registered_for_pjrtx():
    # they are registered when jax.experimental.sparse is imported; this
    # fails if JAX moves or renames the primitives
    from jax._src.interpreters import mlir

    lw = _lowerings()
    for prim in (lw.coo_spmv_p, lw.coo_spmm_p, lw.csr_spmv_p, lw.csr_spmm_p):
        assert prim in mlir._platform_specific_lowerings["pjrtx"], prim
