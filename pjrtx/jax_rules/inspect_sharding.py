"""jax.debug.inspect_array_sharding (and visualize_array_sharding) inside
jit on several pjrtx devices.

JAX's rule lowers the primitive to ``custom_call @InspectSharding`` whose
backend_config is an opaque handle that only XLA's SPMD partitioner can
turn back into the Python callback. pjrtx's rule emits the same custom call
with a readable key into ``CALLBACKS`` instead; the frontend
(pjrtx/frontend/partition/partitioner_callbacks.py) calls it with the
sharding Shardy's propagation gave the value, at compile time, as XLA
does, and drops the call from the program. With one device the callback runs at lowering time
with a replicated sharding, as JAX's rule does.
"""
from __future__ import annotations

import itertools
import weakref

from pjrtx import PLATFORM

TARGET = "InspectSharding"
KEY_PREFIX = "pjrtx-inspect:"
# key -> callable(dims or None, manual: bool); the lowering's module context
# keeps each one alive as long as the executable
CALLBACKS: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()
_ids = itertools.count()


class _Report:
    """Turns what the partitioner found into the jax Sharding the user's
    callback expects, over the mesh the value was lowered against."""

    def __init__(self, callback, mesh, devices):
        self.callback, self.mesh, self.devices = callback, mesh, devices

    def __call__(self, dims, manual: bool):
        from jax.sharding import NamedSharding, PartitionSpec as P

        if manual or dims is None:
            spec = P()
        else:
            entries = [None if not d else (d[0] if len(d) == 1 else tuple(d)) for d in dims]
            while entries and entries[-1] is None:
                entries.pop()
            spec = P(*entries)
        if self.mesh.empty:
            from jax._src import sharding_impls

            if spec != P():
                raise ValueError("pjrtx: inspect_array_sharding of a value sharded without a mesh")
            return self.callback(sharding_impls.GSPMDSharding(
                self.devices, sharding_impls.replicated_hlo_sharding))
        return self.callback(NamedSharding(self.mesh, spec))


def _rule(ctx, value, *, callback):
    import numpy as np
    from jax._src import mesh as mesh_lib
    from jax._src import sharding_impls
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir
    from jax._src.lib.mlir.dialects import hlo

    axis_context = ctx.module_context.axis_context
    mesh = mesh_lib.thread_resources.env.physical_mesh
    if isinstance(axis_context, sharding_impls.ShardingContext):
        devices = axis_context.device_assignment
        am = axis_context.abstract_mesh
        if am is not None and devices is not None:
            mesh = mesh_lib.Mesh(np.array(devices).reshape(am.axis_sizes), am.axis_names)
    elif isinstance(axis_context, sharding_impls.SPMDAxisContext):
        mesh = axis_context.mesh
        devices = axis_context.mesh._flat_devices_tuple
    else:
        raise NotImplementedError(
            f"pjrtx: inspect_array_sharding under {type(axis_context).__name__}")
    if devices is None:
        raise ValueError("pjrtx: inspect_array_sharding: the program has no device assignment")
    report = _Report(callback, mesh, devices)
    if len(devices) == 1:
        report(None, False)
        return []
    key = f"{KEY_PREFIX}{next(_ids)}"
    CALLBACKS[key] = report
    ctx.module_context.add_keepalive(report)
    hlo.CustomCallOp([value.type], [value], call_target_name=ir.StringAttr.get(TARGET),
                     has_side_effect=ir.BoolAttr.get(True), api_version=mlir.i32_attr(1),
                     called_computations=ir.ArrayAttr.get([]),
                     backend_config=ir.StringAttr.get(key), operand_layouts=None,
                     result_layouts=None)
    return []


def register() -> None:
    from jax._src import debugging
    from jax._src.interpreters import mlir

    mlir.register_lowering(debugging.inspect_sharding_p, _rule, platform=PLATFORM)
