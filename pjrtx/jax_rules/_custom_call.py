"""custom_call emission shared by the lowering rules in this package."""
from __future__ import annotations

from jax._src import core as jax_core
from jax._src.interpreters import mlir

from pjrtx import versions


def custom_call(ctx, target: str, avals, operands, **kwargs):
    """stablehlo.custom_call @target with results of types `avals`.

    Under shape polymorphism (jax.export with symbolic dimensions) the
    results also carry their shapes as operands (`indices_of_shape_operands`),
    so StableHLO's shape refinement can make them static before the program
    reaches pjrtx; the frontend drops those operands again."""
    types = [versions.aval_to_ir_type(ctx.module_context, a) for a in avals]
    result_shapes = None
    if not all(jax_core.is_constant_shape(a.shape) for a in avals):
        result_shapes = [mlir.eval_dynamic_shape_as_tensor(ctx, a.shape) for a in avals]
    return mlir.custom_call(target, result_types=types, operands=list(operands),
                            result_shapes=result_shapes, **kwargs)
