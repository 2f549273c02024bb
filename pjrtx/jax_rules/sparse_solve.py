"""jax.experimental.sparse.linalg.spsolve on pjrtx.

JAX 0.10.2 lowers spsolve_p for 'cpu' (a Python callback into
scipy.sparse.linalg.spsolve) and 'cuda' (cuSOLVER's csrlsvqr) only. MLX has
no sparse solver, so pjrtx does what XLA:CPU does: the CSR operands go to
the host through our callback target and SciPy's direct solver (SuperLU)
answers; tol and reorder only steer cuSOLVER, as on CPU.

jax.experimental.sparse imports scipy.sparse, so the rule is registered
when the user imports that module (_on_import.py).
"""
from __future__ import annotations

import numpy as np

from pjrtx import PLATFORM

MODULE = "jax.experimental.sparse.linalg"


def _solve(data, indices, indptr, b):
    import scipy.sparse
    import scipy.sparse.linalg

    n = b.shape[0]
    a = scipy.sparse.csr_matrix((data, indices, indptr), shape=(n, n))
    return (np.asarray(scipy.sparse.linalg.spsolve(a, b)).astype(b.dtype),)


def _spsolve_rule(ctx, data, indices, indptr, b, *, tol, reorder):
    from pjrtx.jax_rules.callbacks import emit_callback

    del tol, reorder
    return emit_callback(ctx, _solve, "jax.experimental.sparse.linalg.spsolve",
                         [data, indices, indptr, b], has_side_effect=False)[0]


def _register_rule(module) -> None:
    from jax._src.interpreters import mlir

    mlir.register_lowering(module.spsolve_p, _spsolve_rule, platform=PLATFORM, cacheable=False)


def register() -> None:
    from pjrtx.jax_rules._on_import import when_imported

    when_imported(MODULE, _register_rule)
