"""jax.nn.scaled_matmul (block-scaled matmul: MXFP8, NVFP4) on pjrtx.

JAX 0.10.2 lowers its scaled_matmul primitive to cuDNN's block-scaled dot on
'cuda' and to lax.scaled_dot on 'rocm' only. The operands come canonical:
(B, M, K) x (B, N, K) with scales (B, M, K/block) and (B, N, K/block), the
product contracting K and batching B into (B, M, N). On pjrtx it is that
same lax.scaled_dot, which JAX expands to StableHLO that pjrtx runs: each
operand times its scales broadcast over their blocks, then one dot_general
in preferred_element_type.
"""
from __future__ import annotations

from pjrtx import PLATFORM

MODULE = "jax._src.cudnn.scaled_matmul_stablehlo"


def _scaled_matmul_rule(ctx, a, b, a_scale, b_scale, *, preferred_element_type):
    from jax import lax
    from jax._src.interpreters import mlir

    def product(a, b, a_scale, b_scale):
        return lax.scaled_dot(a, b, lhs_scale=a_scale, rhs_scale=b_scale,
                              dimension_numbers=(((2,), (2,)), ((0,), (0,))),
                              preferred_element_type=preferred_element_type)

    return mlir.lower_fun(product, multiple_results=False)(ctx, a, b, a_scale, b_scale)


def _register_rule(module) -> None:
    from jax._src.interpreters import mlir

    # A private name: tests/test_scaled_matmul.py fails if JAX renames it.
    prim = getattr(module, "_scaled_matmul_p", None)
    if prim is not None:
        mlir.register_lowering(prim, _scaled_matmul_rule, platform=PLATFORM)


def register() -> None:
    from pjrtx.jax_rules._on_import import when_imported

    when_imported(MODULE, _register_rule)
