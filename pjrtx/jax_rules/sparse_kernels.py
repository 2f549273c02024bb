"""jax.experimental.sparse's cuSPARSE kernels (coo/csr spmv and spmm) on
pjrtx.

JAX 0.10.2 lowers coo_spmv_p, coo_spmm_p, csr_spmv_p and csr_spmm_p to
cuSPARSE/hipSPARSE custom calls on 'cuda'/'rocm' only (and the csr pair to a
CPU FFI kernel on 'cpu'). They compute op(A) @ x for a COO or CSR matrix A,
op being the plain transpose (no conjugate) or the identity. MLX has no
sparse kernels, so on pjrtx they are a gather of x's rows and a scatter-add
into the result's rows, which MLX runs as two kernels. Duplicate entries add
up, as in cuSPARSE; entries past a CSR matrix's indptr[-1] (padding) and
out-of-range indices contribute nothing.
"""
from __future__ import annotations

from functools import partial

from pjrtx import PLATFORM

MODULE = "jax.experimental.sparse._lowerings"


def _product(data, out_index, in_index, x, n_out):
    import jax.numpy as jnp

    rows = x.at[in_index].get(mode="fill", fill_value=0)
    terms = data * rows if x.ndim == 1 else data[:, None] * rows
    out = jnp.zeros((n_out,) + x.shape[1:], x.dtype)
    return out.at[out_index].add(terms, mode="drop")


def _coo(data, row, col, x, *, transpose, shape):
    if transpose:
        return _product(data, col, row, x, shape[1])
    return _product(data, row, col, x, shape[0])


def _csr(data, indices, indptr, x, *, transpose, shape):
    import jax.numpy as jnp

    # The row of stored entry i is the last r with indptr[r] <= i; an entry
    # at or past indptr[-1] gets row shape[0], which is out of range.
    entry = jnp.arange(data.shape[0], dtype=indptr.dtype)
    row = jnp.searchsorted(indptr, entry, side="right").astype(indptr.dtype) - 1
    if transpose:
        return _product(data, indices, row, x, shape[1])
    return _product(data, row, indices, x, shape[0])


def _rule(impl):
    def rule(ctx, *args, transpose, shape):
        from jax._src.interpreters import mlir

        fn = partial(impl, transpose=transpose, shape=shape)
        return mlir.lower_fun(fn, multiple_results=False)(ctx, *args)

    return rule


def _register_rules(module) -> None:
    from jax._src.interpreters import mlir

    for name, impl in (("coo_spmv_p", _coo), ("coo_spmm_p", _coo),
                       ("csr_spmv_p", _csr), ("csr_spmm_p", _csr)):
        mlir.register_lowering(getattr(module, name), _rule(impl), platform=PLATFORM)


def register() -> None:
    from pjrtx.jax_rules._on_import import when_imported

    when_imported(MODULE, _register_rules)
