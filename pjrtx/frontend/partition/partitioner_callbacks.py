"""jax.experimental.custom_partitioning on pjrtx.

JAX lowers a ``custom_partitioning`` function for several devices to
``stablehlo.custom_call @CustomSPMDPartitioning`` whose ``backend_config``
keys a Python object in ``jax._src.custom_partitioning._sharding_callbacks``
(the user's ``partition`` and the lowering context), and whose
``sdy.sharding_rule`` tells Shardy how shardings flow through it. XLA's SPMD
partitioner calls ``partition`` with the operand and result shardings that
propagation chose, lowers the per-device function it returns, and reshards
the operands and results to the shardings it asks for.

``expand`` does the same before pjrtx partitions the program: it runs
Shardy's propagation on a copy to learn those shardings, calls the user's
``partition``, lowers its function as a fully manual (shard_map-like) body,
and replaces the custom call with an ``sdy.manual_computation`` holding it.
The program then takes whichever path localize picks, like any shard_map.
"""
from __future__ import annotations

import itertools
import re

from jaxlib.mlir import ir
from jaxlib.mlir import passmanager

from pjrtx import versions
from pjrtx.frontend.partition.sharding import (
    ShardyUnsafe, mesh_info, meshes_by_name, value_sharding,
)
from pjrtx.frontend.partition.walk import inline_calls, main_func, nested_ops, op_name

TARGET = "CustomSPMDPartitioning"
_counter = itertools.count()


INSPECT_TARGET = "InspectSharding"
INSPECT_PREFIX = "pjrtx-inspect:"  # pjrtx.jax_rules.inspect_sharding's keys


def _calls(main, target=TARGET) -> list:
    return [o for o in nested_ops(main) if op_name(o) == "stablehlo.custom_call"
            and ir.StringAttr(o.attributes["call_target_name"]).value == target]


def run_partitioner_callbacks(module, n: int) -> int:
    """Expands custom_partitioning calls, then runs inspect_array_sharding
    callbacks; returns how many calls it replaced. A program pjrtx cannot
    treat so raises ValueError naming the feature (neither path can run
    the calls themselves)."""
    done = 0
    for fn, what in ((expand, "jax.experimental.custom_partitioning"),
                     (run_inspect_sharding, "jax.debug.inspect_array_sharding")):
        try:
            done += fn(module, n)
        except ShardyUnsafe as e:
            raise ValueError(f"pjrtx: {what}: {e}") from None
    return done


def _in_manual(o) -> bool:
    parent = o.parent
    while parent is not None:
        if parent.name == "sdy.manual_computation":
            return True
        parent = parent.parent
    return False


def run_inspect_sharding(module, n: int) -> int:
    """Calls each jax.debug.inspect_array_sharding callback with the sharding
    Shardy's propagation gave its value (as XLA's partitioner does, at
    compile time) and drops the call; returns how many."""
    from pjrtx.jax_rules import inspect_sharding

    main = main_func(module)
    calls = _calls(main, INSPECT_TARGET)
    if not calls:
        return 0
    found = _propagated(module, n, INSPECT_TARGET)
    for o, (in_dims, _) in zip(calls, found):
        key = ir.StringAttr(o.attributes["backend_config"]).value_bytes.decode("utf-8", "replace")
        report = inspect_sharding.CALLBACKS.get(key) if key.startswith(INSPECT_PREFIX) else None
        if report is None:
            raise ValueError("pjrtx: an InspectSharding call that pjrtx did not lower "
                             "(jax.debug.inspect_array_sharding lowered for another platform)")
        report(in_dims[0], _in_manual(o))
        o.results[0].replace_all_uses_with(o.operands[0])
        o.erase()
    return len(calls)


def _spec_of(sharding):
    """Dims of a propagated (dims, unreduced) sharding for a PartitionSpec;
    None: replicated or unknown."""
    if sharding is None:
        return None
    dims, unreduced = sharding
    if unreduced:
        raise ShardyUnsafe("custom_partitioning of an unreduced value")
    if any(":" in a for d in dims for a in d):
        raise ShardyUnsafe("custom_partitioning of a value split over sub-axes")
    return dims if any(dims) else None


def _propagated(module, n, target=TARGET) -> list:
    """(operand dims, result dims) per custom call of `target`, after
    Shardy's propagation on a copy of the module."""
    work = ir.Module.parse(str(module))
    passmanager.PassManager.parse(versions.shardy().propagate).run(work.operation)
    main = main_func(work)
    meshes = meshes_by_name(work)
    out = []
    for o in _calls(main, target):
        ins = [_spec_of(value_sharding(v, main, meshes)) for v in o.operands]
        outs = [_spec_of(value_sharding(r, main, meshes)) for r in o.results]
        out.append((ins, outs))
    return out


def _pspec(dims, rank):
    from jax.sharding import PartitionSpec as P

    # as XLA's callback builds it: one entry per dimension
    if dims is None:
        return P(*([None] * rank))
    return P(*[None if not d else (d[0] if len(d) == 1 else tuple(d)) for d in dims])


def _dims_text(sharding, rank: int, mesh_axes) -> str:
    """sdy dims text of a jax Sharding returned by the user's partition."""
    from jax.sharding import NamedSharding

    if not isinstance(sharding, NamedSharding):
        raise ShardyUnsafe(f"custom_partitioning's partition returned a {type(sharding).__name__}, "
                           "not a NamedSharding")
    spec = tuple(sharding.spec) + (None,) * (rank - len(sharding.spec))
    dims = []
    for entry in spec:
        names = () if entry is None else ((entry,) if isinstance(entry, str) else tuple(entry))
        for a in names:
            if a not in mesh_axes:
                raise ShardyUnsafe(f"custom_partitioning's partition names mesh axis {a!r}")
        dims.append("{%s}" % ", ".join(f'"{a}"' for a in names))
    return "[%s]" % ", ".join(dims)


def _local_shape(shape, sharding):
    return tuple(sharding.shard_shape(tuple(shape)))


def _lower_body(info, mesh, lower_fn, arg_types, res_types, arg_shardings, res_shardings):
    """The user's per-device function as MLIR text (its @main takes and
    returns local shapes)."""
    import jax
    from jax._src import core
    from jax._src import sharding_impls
    from jax._src.interpreters import mlir as jmlir

    def aval(t, s):
        rt = ir.RankedTensorType(t)
        return core.ShapedArray(_local_shape(rt.shape, s), jmlir.dtype_of_ir_type(rt.element_type)
                                if hasattr(jmlir, "dtype_of_ir_type") else _np_dtype(rt.element_type))

    tiled_args = [aval(t, s) for t, s in zip(arg_types, arg_shardings)]
    tiled_res = [aval(t, s) for t, s in zip(res_types, res_shardings)]
    closed = jax.make_jaxpr(lower_fn, axis_env=list(mesh.shape.items()))(
        *info.in_tree.unflatten(tiled_args))
    if [(o.shape, o.dtype) for o in closed.out_avals] != [(t.shape, t.dtype) for t in tiled_res]:
        raise ValueError("Mismatch in result shapes. %s vs %s"
                         % (repr(closed.out_avals), repr(tiled_res)))
    ctx = info.module_context
    axis_context = sharding_impls.SPMDAxisContext(mesh, frozenset(mesh.axis_names))
    with core.extend_axis_env_nd(mesh.shape.items()):
        module = jmlir.build_mlir_module_helper(
            closed, name="tmp_xla_computation", platforms=ctx.platforms, backend=ctx.backend,
            axis_context=axis_context)
    return str(module)


def _np_dtype(et):
    import numpy as np
    from jax._src.interpreters import mlir as jmlir

    for dt, f in jmlir._dtype_to_ir_type.items():
        if f() == et:
            return np.dtype(dt)
    raise ShardyUnsafe(f"custom_partitioning: unknown element type {et}")


def _rename(text: str, prefix: str) -> str:
    """The body module's text with `prefix` on every function's symbol (its
    @main becomes @{prefix}main), so its functions can join the program."""
    names = re.findall(r"func\.func (?:public |private )?@([\w$.]+)", text)
    for name in sorted(set(names), key=len, reverse=True):
        text = re.sub(r"@%s\b" % re.escape(name), f"@{prefix}{name}", text)
    return text


def expand(module, n: int) -> int:
    """Replaces every CustomSPMDPartitioning call in `module` with a fully
    manual computation running the user's partition; returns how many."""
    from jax._src import custom_partitioning as cp

    main = main_func(module)
    calls = _calls(main)
    if not calls:
        return 0
    meshes = {k: m for k, m in meshes_by_name(module).items() if len(list(m.axes)) > 0}
    if len(meshes) != 1:
        raise ShardyUnsafe(f"custom_partitioning in a module with {len(meshes)} meshes")
    mesh_name, mesh_attr = next(iter(meshes.items()))
    mesh_axes = [a for a, _ in mesh_info(mesh_attr, n)[0]]
    shardings = _propagated(module, n)
    for o, (in_dims, out_dims) in zip(calls, shardings):
        key = ir.StringAttr(o.attributes["backend_config"]).value.encode()
        info = cp._sharding_callbacks.get(key)
        if info is None:
            raise ValueError("pjrtx: custom_partitioning callback not found (the executable "
                             "outlived the function that made it)")
        _expand_one(module, main, o, info, in_dims, out_dims, mesh_name, mesh_axes)
    inline_calls(module)
    return len(calls)


def _expand_one(module, main, o, info, in_dims, out_dims, mesh_name, mesh_axes):
    import jax
    from jax.sharding import NamedSharding

    mesh = info.mesh
    if tuple(mesh.axis_names) != tuple(mesh_axes):
        raise ShardyUnsafe("custom_partitioning's mesh is not the program's")
    arg_types = [v.type for v in o.operands]
    res_types = [r.type for r in o.results]

    def sds(t, dims):
        rt = ir.RankedTensorType(t)
        return jax.ShapeDtypeStruct(tuple(rt.shape), _np_dtype(rt.element_type),
                                    sharding=NamedSharding(mesh, _pspec(dims, rt.rank)))

    args = info.in_tree.unflatten([sds(t, d) for t, d in zip(arg_types, in_dims)])
    res = info.out_tree.unflatten([sds(t, d) for t, d in zip(res_types, out_dims)])
    p_mesh, lower_fn, res_sharding, arg_sharding = info.partition(
        *info.static_args, mesh, args, res)
    if tuple(p_mesh.axis_names) != tuple(mesh.axis_names) or p_mesh.shape != mesh.shape:
        raise ShardyUnsafe("custom_partitioning's partition returned another mesh")
    arg_shardings = info.in_tree.flatten_up_to(arg_sharding)
    res_shardings = info.out_tree.flatten_up_to(res_sharding)
    body = _lower_body(info, p_mesh, lower_fn, arg_types, res_types, arg_shardings, res_shardings)
    prefix = f"pjrtx_cp{next(_counter)}_"
    body = _rename(body, prefix)
    body_module = ir.Module.parse(body)
    for f in body_module.body.operations:
        if op_name(f) == "func.func":
            clone = f.operation.clone(ip=ir.InsertionPoint(module.body))
            clone.attributes["sym_visibility"] = ir.StringAttr.get("private")
    local_args = [ir.RankedTensorType.get(
        _local_shape(ir.RankedTensorType(t).shape, s), ir.RankedTensorType(t).element_type)
        for t, s in zip(arg_types, arg_shardings)]
    local_res = [ir.RankedTensorType.get(
        _local_shape(ir.RankedTensorType(t).shape, s), ir.RankedTensorType(t).element_type)
        for t, s in zip(res_types, res_shardings)]
    ins = ", ".join("<@%s, %s>" % (mesh_name, _dims_text(s, ir.RankedTensorType(t).rank, mesh_axes))
                    for t, s in zip(arg_types, arg_shardings))
    outs = ", ".join("<@%s, %s>" % (mesh_name, _dims_text(s, ir.RankedTensorType(t).rank, mesh_axes))
                     for t, s in zip(res_types, res_shardings))
    with o.location:
        mc = ir.Operation.create(
            "sdy.manual_computation", results=res_types, operands=list(o.operands),
            attributes={
                "in_shardings": ir.Attribute.parse(f"#sdy.sharding_per_value<[{ins}]>"),
                "out_shardings": ir.Attribute.parse(f"#sdy.sharding_per_value<[{outs}]>"),
                "manual_axes": ir.Attribute.parse(
                    "#sdy<manual_axes{%s}>" % ", ".join(f'"{a}"' for a in mesh_axes))},
            regions=1, ip=ir.InsertionPoint(o))
        block = mc.regions[0].blocks.append(*local_args)
        ip = ir.InsertionPoint(block)
        call = ir.Operation.create(
            "func.call", results=local_res, operands=list(block.arguments),
            attributes={"callee": ir.FlatSymbolRefAttr.get(f"{prefix}main")}, ip=ip)
        ir.Operation.create("sdy.return", operands=list(call.results), ip=ip)
    for old, new in zip(o.results, mc.results):
        old.replace_all_uses_with(new)
    o.erase()
