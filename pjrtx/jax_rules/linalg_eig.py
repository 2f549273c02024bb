"""Eigen and singular value decompositions on pjrtx.

JAX 0.10.2 lowers eigh, svd, eig, schur, hessenberg and tridiagonal only for
cpu/cuda/rocm/tpu. These rules emit ``stablehlo.custom_call @pjrtx_<op>``
whose results are exactly ``ctx.avals_out`` (no LAPACK info output: the back
end writes NaN where XLA's CPU rules would map info != 0 to NaN). Flags
travel in ``backend_config`` as ``key=0|1`` pairs separated by ';', read by
csrc/backend/mlx/ops/linalg_eig.cc.
"""
from __future__ import annotations

import numpy as np
from jax._src import core as jax_core
from jax._src.interpreters import mlir
from jax._src.lax import linalg as L
from jax._src.lib.mlir.dialects import hlo

from ._custom_call import custom_call

PLATFORM = "pjrtx"


def _config(**flags) -> str:
    return ";".join(f"{k}={int(bool(v))}" for k, v in flags.items())


def _call(ctx, target, operand, avals, **flags):
    op = custom_call(ctx, f"pjrtx_{target}", avals, [operand], backend_config=_config(**flags))
    return list(op.results)


def _slice_last(ctx, x, aval_in, aval_out, axis, start):
    """x[..., start:start+len, ...] along `axis` (counted from the end)."""
    nd = len(aval_in.shape)
    starts = [0] * nd
    starts[nd + axis] = start
    limits = list(aval_out.shape)
    limits[nd + axis] += start
    return mlir.slice_op(ctx, x, aval_out, start_indices=starts, limit_indices=limits,
                         strides=[1] * nd)


def _eigh_rule(ctx, operand, *, lower, sort_eigenvalues, subset_by_index, algorithm=None):
    del sort_eigenvalues, algorithm  # eigenvalues always come back ascending
    a_aval, = ctx.avals_in
    v_aval, w_aval = ctx.avals_out
    n = a_aval.shape[-1]
    if subset_by_index is None or tuple(subset_by_index) == (0, n):
        return _call(ctx, "eigh", operand, ctx.avals_out, lower=lower)
    # A subset of ascending eigenvalues is a slice of all of them.
    lo, hi = subset_by_index
    batch = a_aval.shape[:-2]
    full_v = v_aval.update(shape=batch + (n, n))
    full_w = w_aval.update(shape=batch + (n,))
    v, w = _call(ctx, "eigh", operand, [full_v, full_w], lower=lower)
    return [_slice_last(ctx, v, full_v, v_aval, -1, lo), _slice_last(ctx, w, full_w, w_aval, -1, lo)]


def _svd_rule(ctx, operand, *, full_matrices, compute_uv, subset_by_index, algorithm=None):
    del algorithm  # every algorithm computes the same decomposition
    a_aval, = ctx.avals_in
    m, n = a_aval.shape[-2:]
    k = jax_core.min_dim(m, n)  # symbolic under shape polymorphism
    if m == 0 or n == 0:
        return mlir.lower_fun(L._empty_svd, multiple_results=True)(
            ctx, operand, full_matrices=full_matrices, compute_uv=compute_uv)
    if subset_by_index is None or tuple(subset_by_index) == (0, k):
        return _call(ctx, "svd", operand, ctx.avals_out, full_matrices=full_matrices,
                     compute_uv=compute_uv)
    # Descending singular values: a subset is a slice of the economic SVD.
    lo, _ = subset_by_index
    batch = a_aval.shape[:-2]
    s_aval = ctx.avals_out[0].update(shape=batch + (k,))
    avals = [s_aval]
    if compute_uv:
        avals += [ctx.avals_out[1].update(shape=batch + (m, k)),
                  ctx.avals_out[2].update(shape=batch + (k, n))]
    outs = _call(ctx, "svd", operand, avals, full_matrices=False, compute_uv=compute_uv)
    res = [_slice_last(ctx, outs[0], avals[0], ctx.avals_out[0], -1, lo)]
    if compute_uv:
        res.append(_slice_last(ctx, outs[1], avals[1], ctx.avals_out[1], -1, lo))
        res.append(_slice_last(ctx, outs[2], avals[2], ctx.avals_out[2], -2, lo))
    return res


def _eig_rule(ctx, operand, *, compute_left_eigenvectors, compute_right_eigenvectors,
              implementation, enable_eigvec_derivs=False):
    del enable_eigvec_derivs, implementation
    return _call(ctx, "eig", operand, ctx.avals_out, left=compute_left_eigenvectors,
                 right=compute_right_eigenvectors)


def _schur_rule(ctx, operand, *, compute_schur_vectors, sort_eig_vals, select_callable):
    del select_callable
    if sort_eig_vals:
        # As on CPU: LAPACK's gees sorting is not exposed either.
        raise NotImplementedError("pjrtx: schur with sort_eig_vals=True is not implemented")
    return _call(ctx, "schur", operand, ctx.avals_out, vectors=compute_schur_vectors)


def _hessenberg_rule(ctx, operand):
    return _call(ctx, "hessenberg", operand, ctx.avals_out)


def _tridiagonal_rule(ctx, operand, *, lower):
    return _call(ctx, "tridiagonal", operand, ctx.avals_out, lower=lower)


def register():
    for prim, rule in [(L.eigh_p, _eigh_rule), (L.svd_p, _svd_rule), (L.eig_p, _eig_rule),
                       (L.schur_p, _schur_rule), (L.hessenberg_p, _hessenberg_rule),
                       (L.tridiagonal_p, _tridiagonal_rule)]:
        mlir.register_lowering(prim, rule, platform=PLATFORM)
