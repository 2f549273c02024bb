"""LU on pjrtx: one custom call instead of JAX's generic blocked LU.

JAX 0.10.2 lowers lu_p for an unknown platform as a pure-JAX blocked LU whose
column loop is a while loop (about 0.3 s for a 64x64 f32 matrix on the MLX
CPU back end, one loop step per column). This rule emits
``custom_call @LuDecomposition`` with exactly lu_p's results (the contract of
TPU's target of that name): [lu, pivots int32 0-based, permutation int32],
computed by a host kernel with LAPACK getrf's partial pivoting
(csrc/backend/mlx/ops/linalg_factor.cc).

cholesky_p, triangular_solve_p and householder_product_p need no rule: their
default lowerings (stablehlo.cholesky, stablehlo.triangular_solve,
@ProductOfElementaryHouseholderReflectors) are ops pjrtx implements. geqrf_p
keeps its default @Qr lowering but refuses, at lowering time and with
XLA:CPU's NotImplementedError, a type the host kernel has no LAPACK-order
loop for (f16, bf16): otherwise the user would see it only at compile time.

geqp3_p (QR with column pivoting, ``qr(..., pivoting=True)``) has CPU/GPU
rules only; this one emits ``custom_call @pjrtx_geqp3`` with geqp3_p's
results [a packed as LAPACK geqp3 leaves it, jpvt 1-based, taus], jpvt
travelling as int32 (converted here from and back to its own integer type).
"""
from __future__ import annotations

import numpy as np
from jax._src.interpreters import mlir
from jax._src.lax import linalg as L

from ._custom_call import custom_call

PLATFORM = "pjrtx"


def _lu_lowering(ctx, operand):
    op = custom_call(ctx, "LuDecomposition", ctx.avals_out, [operand])
    return list(op.results)


_QR_TYPES = (np.float32, np.float64, np.complex64, np.complex128)


def _geqrf_lowering(ctx, operand):
    dtype = ctx.avals_in[0].dtype
    if dtype not in _QR_TYPES:
        raise NotImplementedError(f"Unsupported dtype {dtype}.")
    return L._geqrf_lowering_rule(ctx, operand)


def _geqp3_lowering(ctx, a, jpvt, *, use_magma=None):
    del use_magma  # GPU only
    a_aval, p_aval = ctx.avals_in
    if a_aval.dtype not in _QR_TYPES:
        raise NotImplementedError(f"Unsupported dtype {a_aval.dtype}.")
    p32 = p_aval.update(dtype=np.dtype(np.int32))
    if p_aval.dtype != p32.dtype:
        jpvt = mlir.convert_hlo(ctx, jpvt, p_aval, p32)
    r, p, taus = custom_call(ctx, "pjrtx_geqp3", (a_aval, p32, ctx.avals_out[2]), [a, jpvt]).results
    if p_aval.dtype != p32.dtype:
        p = mlir.convert_hlo(ctx, p, p32, ctx.avals_out[1])
    return [r, p, taus]


def register():
    mlir.register_lowering(L.lu_p, _lu_lowering, platform=PLATFORM)
    mlir.register_lowering(L.geqrf_p, _geqrf_lowering, platform=PLATFORM)
    mlir.register_lowering(L.geqp3_p, _geqp3_lowering, platform=PLATFORM)
