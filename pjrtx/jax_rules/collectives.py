"""Collectives that JAX lowers on some platforms only.

lax.pbroadcast (collective_broadcast) has a lowering for 'gpu' alone in JAX
0.10.2, since XLA:CPU has no collective-broadcast. The rule itself is
generic StableHLO, and pjrtx's back end runs collective_broadcast
(csrc/backend/mlx/ops/collective.cc), so pjrtx registers JAX's own rule.
"""
from __future__ import annotations

from pjrtx import PLATFORM


def register() -> None:
    from jax._src.interpreters import mlir
    from jax._src.lax import parallel

    # A private name: tests/test_collectives.py fails if JAX renames it.
    rule = getattr(parallel, "_pbroadcast_lowering", None)
    if rule is not None:
        mlir.register_lowering(parallel.pbroadcast_p, rule, platform=PLATFORM)
