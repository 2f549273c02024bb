"""tridiagonal_solve on pjrtx: one host kernel with LAPACK gtsv's partial
pivoting (csrc/backend/mlx/ops/linalg_tridiagonal_solve.cc).

JAX 0.10.2 lowers tridiagonal_solve_p for an unknown platform as a pure-JAX
Thomas algorithm (two scans, no pivoting) that raises NotImplementedError for
``perturb_singular=True``; that flag is what eigh_tridiagonal's inverse
iteration passes. XLA:CPU pivots (gtsv, or tridiagonal_solve_perturbed_ffi
for the flag); this rule does the same for both values of the flag:
``backend_config`` "perturb=0|1".
"""
from __future__ import annotations

from jax._src.interpreters import mlir
from jax._src.lax import linalg as L

from ._custom_call import custom_call

PLATFORM = "pjrtx"


def _tridiagonal_solve_lowering(ctx, dl, d, du, b, *, perturb_singular=False):
    op = custom_call(ctx, "pjrtx_tridiagonal_solve", ctx.avals_out, [dl, d, du, b],
                     backend_config=f"perturb={int(bool(perturb_singular))}")
    return list(op.results)


def register():
    mlir.register_lowering(L.tridiagonal_solve_p, _tridiagonal_solve_lowering, platform=PLATFORM)
