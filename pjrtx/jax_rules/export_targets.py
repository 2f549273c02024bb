"""The custom-call targets of pjrtx's own lowerings that jax.export may
serialize.

jax.export refuses a module whose custom calls are outside its list of
targets with compatibility guarantees (_export._CUSTOM_CALL_TARGETS_GUARANTEED_STABLE),
so without this, exporting any function that uses eig/eigh/svd/schur/
hessenberg/tridiagonal on pjrtx fails (shape_poly_test's eig harnesses).
pjrtx guarantees these: each target keeps its operands, results and
backend_config keys (csrc/backend/mlx/ops/linalg_eig.cc, linalg_reduce.cc,
linalg_schur.cc, linalg_tridiagonal_solve.cc, the geqp3 kernel) for as long as it exists, and a change of meaning gets a
new target name. pjrtx_callback is left out: host callbacks cannot be
serialized (JAX refuses them before this check).
"""
from __future__ import annotations

STABLE_TARGETS = (
    "pjrtx_eig", "pjrtx_eigh", "pjrtx_svd", "pjrtx_schur", "pjrtx_hessenberg",
    "pjrtx_tridiagonal", "pjrtx_tridiagonal_solve", "pjrtx_geqp3",
)


def register():
    from jax._src.export import _export

    _export._CUSTOM_CALL_TARGETS_GUARANTEED_STABLE.update(STABLE_TARGETS)
