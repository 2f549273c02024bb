"""The global path of pjrtx's partitioning (driver.py decides when):
every device gathers the arguments, runs the whole program and keeps its
shard of each result; shard_map regions inside it still run per device.
Correct for any program, at N times the compute."""
from __future__ import annotations

import dataclasses
import itertools
import math
import re

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir import passmanager

from pjrtx import versions
from pjrtx.frontend.partition.sharding import (
    PartitionInfo, ValueSharding, axis_ref_coord, axis_ref_size, coords_of_partition, dim_index,
    mesh_info, meshes_by_name, parse_sharding, read_shardings, sdy, value_mesh_names,
)
from pjrtx.frontend.partition.walk import (
    attr_names, dict_without_sdy, func_attr_list, func_type, inline_calls, is_ranked, main_func,
    nested_ops, op_name, zero_text,
)


def groups_for_dim(dim_axes, mesh_axes, device_ids):
    """Partition groups that all-gather one dim: partitions that differ only in
    the (sub)axes of that dim, each group ordered by shard index."""
    sizes = dict(mesh_axes)
    coords = coords_of_partition(mesh_axes, device_ids)
    groups = {}
    for p, c in coords.items():
        rest = dict(c)
        for ref in dim_axes:
            name = ref.split(":")[0]
            pre = int(ref.split(":(")[1].split(")")[0]) if ":" in ref else 1
            rest[name] -= axis_ref_coord(ref, c, sizes) * pre
        key = tuple(sorted(rest.items()))
        groups.setdefault(key, []).append((dim_index(dim_axes, c, mesh_axes), p))
    out = [[p for _, p in sorted(g)] for g in groups.values()]
    out.sort()
    return out


def _groups_text(g) -> str:
    """A replica_groups attribute for an int64 array of partition groups."""
    return "dense<%s> : tensor<%dx%dxi64>" % (str(g.tolist()).replace(" ", ""), g.shape[0],
                                               g.shape[1])


def _first_only_text(lines, tag, src, t, groups_axes, axes, coords, n) -> str:
    """Appends a value whose group sum is src (unreduced over groups_axes):
    src on the first device of each group, zeros on the others; returns
    its name."""
    rt = ir.RankedTensorType(t)
    first = [dim_index(groups_axes, coords[p], axes) == 0 for p in range(n)]
    pred_t = f"tensor<{''.join(f'{d}x' for d in rt.shape)}i1>"
    lines.append(f"{tag} = stablehlo.constant dense<{str(first).lower()}> : tensor<{n}xi1>"
                 .replace(", ", ","))
    lines.append(f'{tag}s = "stablehlo.dynamic_slice"({tag}, %pid) <{{slice_sizes = '
                 f"array<i64: 1>}}> : (tensor<{n}xi1>, tensor<i32>) -> tensor<1xi1>")
    lines.append(f"{tag}o = stablehlo.reshape {tag}s : (tensor<1xi1>) -> tensor<i1>")
    lines.append(f"{tag}b = stablehlo.broadcast_in_dim {tag}o, dims = [] : (tensor<i1>) -> {pred_t}")
    lines.append(f"{tag}z = stablehlo.constant dense<{zero_text(rt.element_type)}> : {t}")
    lines.append(f"{tag}v = stablehlo.select {tag}b, {src}, {tag}z : {pred_t}, {t}")
    return f"{tag}v"


def _block_slice_text(lines, out, src, global_t, local_t, vs, axes, coords, n, tag):
    """Appends `out = this device's block of src` to lines: per sharded
    dimension an offset table indexed by partition_id (%pid; %zero for the
    others), then one dynamic_slice to the local type."""
    lshape = list(ir.RankedTensorType(ir.Type.parse(str(local_t))).shape)
    offs = []
    for dim, dim_axes in enumerate(vs.dims):
        if not dim_axes:
            offs.append("%zero")
            continue
        table = [dim_index(dim_axes, coords[p], axes) * lshape[dim] for p in range(n)]
        tn = f"%{tag}_{dim}"
        lines.append(f"{tn} = stablehlo.constant dense<{table}> : tensor<{n}xi32>".replace(", ", ","))
        lines.append(f'{tn}s = "stablehlo.dynamic_slice"({tn}, %pid) <{{slice_sizes = '
                     f"array<i64: 1>}}> : (tensor<{n}xi32>, tensor<i32>) -> tensor<1xi32>")
        lines.append(f"{tn}o = stablehlo.reshape {tn}s : (tensor<1xi32>) -> tensor<i32>")
        offs.append(f"{tn}o")
    idx_types = ", ".join(["tensor<i32>"] * len(offs))
    sizes_txt = ", ".join(map(str, lshape))
    lines.append(f'{out} = "stablehlo.dynamic_slice"({src}, {", ".join(offs)}) '
                 f"<{{slice_sizes = array<i64: {sizes_txt}>}}> : ({global_t}, {idx_types}) -> {local_t}")


def _global_wrapper_text(main, n, axes, ids, args, results, callee: str) -> str:
    ftype = func_type(main)
    arg_attrs = func_attr_list(main, "arg_attrs", len(ftype.inputs))
    res_attrs = func_attr_list(main, "res_attrs", len(ftype.results))
    def mesh_of(vs):
        # A value may live on its own mesh (the same devices in another
        # order, e.g. a reshard between two meshes).
        a, i = vs.mesh if vs is not None and vs.mesh else (axes, ids)
        return a, i, dict(a), coords_of_partition(a, i)
    lines, params, handle = [], [], itertools.count(1)

    def local_type(t, vs, what):
        if vs is None or not is_ranked(t):
            return str(t)
        rt = ir.RankedTensorType(t)
        shape = list(rt.shape)
        sizes = mesh_of(vs)[2]
        for d, dim_axes in enumerate(vs.dims):
            k = math.prod(axis_ref_size(a, sizes) for a in dim_axes)
            if shape[d] % k:
                raise ValueError(f"pjrtx: {what} dim {d} of {t} does not divide over {k} devices")
            shape[d] //= k
        return str(ir.RankedTensorType.get(shape, rt.element_type))

    def dict_text(d):
        kept = dict_without_sdy(d)
        return (" " + str(ir.DictAttr.get(kept))) if kept else ""

    call_args = []
    for i, (t, vs, d) in enumerate(zip(ftype.inputs, args, arg_attrs)):
        lt = local_type(t, vs, f"argument {i}")
        params.append(f"%a{i}: {lt}{dict_text(d)}")
        cur, cur_t = f"%a{i}", lt
        v_axes, v_ids, _, _ = mesh_of(vs)
        if vs is not None and is_ranked(t):
            rt = ir.RankedTensorType(t)
            shape = list(ir.RankedTensorType(ir.Type.parse(lt)).shape)
            for dim, dim_axes in enumerate(vs.dims):
                if not dim_axes:
                    continue
                groups = groups_for_dim(dim_axes, v_axes, v_ids)
                shape[dim] = rt.shape[dim]
                nt = str(ir.RankedTensorType.get(shape, rt.element_type))
                g = np.array(groups, np.int64)
                gtext = _groups_text(g)
                nxt = f"%g{i}_{dim}"
                lines.append(
                    f'{nxt} = "stablehlo.all_gather"({cur}) <{{all_gather_dim = {dim} : i64, '
                    f"channel_handle = #stablehlo.channel_handle<handle = {next(handle)}, type = 1>, "
                    f"replica_groups = {gtext}, use_global_device_ids}}> : ({cur_t}) -> {nt}")
                cur, cur_t = nxt, nt
        if vs is not None and vs.unreduced and is_ranked(t):
            # Each device holds a partial sum: the value is their sum.
            et = ir.RankedTensorType(t).element_type
            g = np.array(groups_for_dim(vs.unreduced, v_axes, v_ids), np.int64)
            gtext = _groups_text(g)
            nxt = f"%u{i}"
            lines.append(
                f'{nxt} = "stablehlo.all_reduce"({cur}) <{{channel_handle = '
                f"#stablehlo.channel_handle<handle = {next(handle)}, type = 1>, "
                f"replica_groups = {gtext}, use_global_device_ids}}> ({{\n"
                f"    ^bb0(%p{i}: tensor<{et}>, %q{i}: tensor<{et}>):\n"
                f"      %s{i} = stablehlo.add %p{i}, %q{i} : tensor<{et}>\n"
                f"      stablehlo.return %s{i} : tensor<{et}>\n"
                f"    }}) : ({cur_t}) -> {cur_t}")
            cur = nxt
        call_args.append(cur)
    in_types = ", ".join(str(t) for t in ftype.inputs)
    out_types = ", ".join(str(t) for t in ftype.results)
    nres = len(ftype.results)
    if nres:
        lines.append(f"%r:{nres} = func.call @{callee}({', '.join(call_args)}) : "
                     f"({in_types}) -> ({out_types})")
    else:
        lines.append(f"func.call @{callee}({', '.join(call_args)}) : ({in_types}) -> ()")
    rets, ret_types, res_params = [], [], []
    need_pid = any(vs is not None for vs in results)
    if need_pid:
        lines.append("%pid_u = stablehlo.partition_id : tensor<ui32>")
        lines.append("%pid = stablehlo.convert %pid_u : (tensor<ui32>) -> tensor<i32>")
        lines.append("%zero = stablehlo.constant dense<0> : tensor<i32>")
    for j, (t, vs, d) in enumerate(zip(ftype.results, results, res_attrs)):
        lt = local_type(t, vs, f"result {j}")
        res_params.append(f"{lt}{dict_text(d)}")
        ret_types.append(lt)
        if vs is None or not is_ranked(t):
            rets.append(f"%r#{j}")
            continue
        rt = ir.RankedTensorType(t)
        v_axes, _, _, coords = mesh_of(vs)
        full = f"%r#{j}"
        if vs.unreduced:
            # Unreduced: the first device of each group holds the value, the
            # others zeros, so the group's sum is the value.
            full = _first_only_text(lines, f"%f{j}", f"%r#{j}", t, vs.unreduced, v_axes,
                                    coords, n)
        if not any(vs.dims):
            rets.append(full)
            continue
        _block_slice_text(lines, f"%s{j}", full, t, lt, vs, v_axes, coords, n, f"t{j}")
        rets.append(f"%s{j}")
    if rets:
        lines.append(f"return {', '.join(rets)} : {', '.join(ret_types)}")
    else:
        lines.append("return")
    body = "\n    ".join(lines)
    return (f"module {{\n  func.func private @{callee}({in_types}) -> ({out_types})\n"
            f"  func.func public @main({', '.join(params)}) -> ({', '.join(res_params)}) {{\n"
            f"    {body}\n  }}\n}}\n")


def _manual_on_global(module, n: int, meshes: dict) -> None:
    """A shard_map/pmap body (sdy.manual_computation) inside a program that
    takes the global path: each device slices the global operands down to
    its block along the manual axes (partition_id tables), runs the body as
    written (its collectives are per device) and all-gathers its results
    back along those axes. Axes the region leaves to the compiler stay
    whole, as everything on the global path does."""
    from jaxlib.mlir.dialects import func as func_d

    counter = itertools.count()
    while True:
        ops = [o for o in nested_ops(main_func(module)) if op_name(o) == "sdy.manual_computation"]
        if not ops:
            return
        op = ops[0]
        # Outermost first: a nested region (axis_index in a partially manual
        # region nests one over the other axes) lands in main with the outer
        # body and is taken next; it slices and gathers along its own axes
        # only, within the outer block.
        k = next(counter)
        # #sdy<manual_axes{"x", "y"}> (the bindings give no accessor)
        manual = re.findall(r'"([^"]+)"', str(op.attributes["manual_axes"]))
        in_sh = list(sdy.TensorShardingPerValueAttr(op.attributes["in_shardings"]).shardings)
        out_sh = list(sdy.TensorShardingPerValueAttr(op.attributes["out_shardings"]).shardings)

        def manual_only(attr):
            name, vs, _ = parse_sharding(attr, meshes)
            if name is None or name not in meshes:
                raise ValueError("pjrtx: a shard_map region on an inline mesh")
            axes, ids = mesh_info(meshes[name], n)
            dims = tuple(tuple(a for a in d if a.split(":")[0] in manual)
                         for d in (vs.dims if vs else ()))
            unr = tuple(a for a in (vs.unreduced if vs else ()) if a.split(":")[0] in manual)
            return (ValueSharding(dims, unr) if any(dims) or unr else None), axes, ids

        def sum_over(cur, cur_t, et, groups_axes, axes, ids):
            g = np.array(groups_for_dim(groups_axes, axes, ids), np.int64)
            gtext = _groups_text(g)
            h = next(handle)
            lines.append(
                f'%sum{h} = "stablehlo.all_reduce"({cur}) <{{channel_handle = '
                f"#stablehlo.channel_handle<handle = {h}, type = 1>, "
                f"replica_groups = {gtext}, use_global_device_ids}}> ({{\n"
                f"    ^bb0(%p{h}: tensor<{et}>, %q{h}: tensor<{et}>):\n"
                f"      %s{h} = stablehlo.add %p{h}, %q{h} : tensor<{et}>\n"
                f"      stablehlo.return %s{h} : tensor<{et}>\n"
                f"    }}) : ({cur_t}) -> {cur_t}")
            return f"%sum{h}"

        block = op.regions[0].blocks[0]
        local_in = [a.type for a in block.arguments]
        term = list(block.operations)[-1]
        local_out = [v.type for v in term.operands]
        glob_in = [v.type for v in op.operands]
        glob_out = [r.type for r in op.results]
        # The body becomes a private function (the region is isolated from
        # above, so it reads only its arguments).
        body_name = f"__pjrtx_manual_body_{k}"
        with ir.InsertionPoint(module.body):
            fn = func_d.FuncOp(body_name, (local_in, local_out))
            fn.attributes["sym_visibility"] = ir.StringAttr.get("private")
            entry = fn.add_entry_block()
        for old_arg, new_arg in zip(block.arguments, entry.arguments):
            old_arg.replace_all_uses_with(new_arg)
        ip = ir.InsertionPoint(entry)
        for o in list(block.operations):
            o.detach_from_parent()
            ip.insert(o)
        term = list(entry.operations)[-1]
        with ir.InsertionPoint(term), term.location:
            func_d.ReturnOp(list(term.operands))
        term.erase()
        # The wrapper: slice in, call, gather out.
        lines, handle = [], itertools.count(1000 * (k + 1))
        lines.append("%pid_u = stablehlo.partition_id : tensor<ui32>")
        lines.append("%pid = stablehlo.convert %pid_u : (tensor<ui32>) -> tensor<i32>")
        lines.append("%zero = stablehlo.constant dense<0> : tensor<i32>")
        params, call_args = [], []
        for i, (gt, lt, attr) in enumerate(zip(glob_in, local_in, in_sh)):
            params.append(f"%g{i}: {gt}")
            vs, axes, ids = manual_only(attr)
            if vs is not None and vs.unreduced and is_ranked(gt):
                params_src = _first_only_text(lines, f"%fi{i}", f"%g{i}", gt, vs.unreduced,
                                              axes, coords_of_partition(axes, ids), n)
            else:
                params_src = f"%g{i}"
            if vs is None or not any(vs.dims) or str(gt) == str(lt) or not is_ranked(gt):
                call_args.append(params_src)
                continue
            _block_slice_text(lines, f"%l{i}", params_src, gt, lt, vs, axes,
                              coords_of_partition(axes, ids), n, f"t{i}")
            call_args.append(f"%l{i}")
        in_t = ", ".join(str(t) for t in local_in)
        out_t = ", ".join(str(t) for t in local_out)
        nres = len(local_out)
        call = f"func.call @{body_name}({', '.join(call_args)}) : ({in_t}) -> ({out_t})"
        lines.append(f"%r:{nres} = {call}" if nres else call)
        rets = []
        for j, (gt, lt, attr) in enumerate(zip(glob_out, local_out, out_sh)):
            vs, axes, ids = manual_only(attr)
            cur, cur_t = f"%r#{j}", str(lt)
            if vs is not None and vs.unreduced and is_ranked(lt):
                # the devices hold partial sums: the value is their sum
                cur = sum_over(cur, cur_t, ir.RankedTensorType(lt).element_type, vs.unreduced,
                               axes, ids)
            if vs is not None and any(vs.dims) and str(gt) != str(lt) and is_ranked(gt):
                shape = list(ir.RankedTensorType(lt).shape)
                grt = ir.RankedTensorType(gt)
                for dim, dim_axes in enumerate(vs.dims):
                    if not dim_axes:
                        continue
                    g = np.array(groups_for_dim(dim_axes, axes, ids), np.int64)
                    gtext = _groups_text(g)
                    shape[dim] = grt.shape[dim]
                    nt = str(ir.RankedTensorType.get(shape, grt.element_type))
                    nxt = f"%o{j}_{dim}"
                    lines.append(
                        f'{nxt} = "stablehlo.all_gather"({cur}) <{{all_gather_dim = {dim} : i64, '
                        f"channel_handle = #stablehlo.channel_handle<handle = {next(handle)}, type = 1>, "
                        f"replica_groups = {gtext}, use_global_device_ids}}> : ({cur_t}) -> {nt}")
                    cur, cur_t = nxt, nt
            rets.append(cur)
        glob_out_t = ", ".join(str(t) for t in glob_out)
        if rets:
            lines.append(f"return {', '.join(rets)} : {glob_out_t}")
        else:
            lines.append("return")
        wrap_name = f"__pjrtx_manual_{k}"
        body = "\n    ".join(lines)
        text = (f"module {{\n  func.func private @{body_name}({in_t}) -> ({out_t})\n"
                f"  func.func private @{wrap_name}({', '.join(params)}) -> ({glob_out_t}) {{\n"
                f"    {body}\n  }}\n}}\n")
        wrapper = ir.Module.parse(text)
        wfn = [o for o in wrapper.body.operations if o.attributes["sym_name"].value == wrap_name][0]
        wfn.operation.clone(ip=ir.InsertionPoint(module.body))
        with ir.InsertionPoint(op), op.location:
            c = func_d.CallOp(list(op.results.types) if hasattr(op.results, "types")
                              else [r.type for r in op.results],
                              ir.FlatSymbolRefAttr.get(wrap_name), list(op.operands))
        for r_old, r_new in zip(op.results, c.results):
            r_old.replace_all_uses_with(r_new)
        op.erase()
        inline_calls(module)


def _maximal_device(op, meshes: dict) -> int | None:
    """The partition an op is pinned to by a maximal sharding
    (#sdy.sharding_per_value<[<@maximal_mesh_K, []>]>, a mesh with no axes
    and one device id: JAX's annotation of a callback outside shard_map),
    or None."""
    if "sdy.sharding" not in attr_names(op):
        return None
    found = set()
    for name in re.findall(r"<@([\w.$-]+)\s*,", str(op.attributes["sdy.sharding"])):
        mesh = meshes.get(name)
        if mesh is None or list(mesh.axes):
            return None
        ids = [int(i) for i in mesh.device_ids]
        if len(ids) != 1:
            return None
        found.add(ids[0])
    return found.pop() if len(found) == 1 else None


def _run_on_one_device(module, n: int, meshes: dict) -> None:
    """An op with a maximal sharding runs once, on its device, as XLA's
    partitioner runs it (a host callback called once per call, not once per
    device): on the global path it moves into `if partition_id == K`, the
    other devices take zeros (tokens: after_all of its token operands), and
    each array result is all-gathered over every device and sliced at K, so
    all devices go on with the value device K computed (bit for bit)."""
    from jaxlib.mlir.dialects import stablehlo as shlo

    todo = [(o, k) for o in nested_ops(main_func(module))
            for k in [_maximal_device(o, meshes)] if k is not None]
    handles = itertools.count(5000)
    for op, k in todo:
        types = [r.type for r in op.results]
        if not all(shlo.TokenType.isinstance(t) or
                   (is_ranked(t) and ir.RankedTensorType(t).has_static_shape) for t in types):
            continue  # left to run on every device, as before
        if not 0 <= k < n:
            raise ValueError(f"pjrtx: an op is pinned to partition {k} of {n}")
        tokens = [v for v in op.operands if shlo.TokenType.isinstance(v.type)]
        with ir.InsertionPoint(op), op.location:
            u32 = ir.RankedTensorType.get([], ir.IntegerType.get_unsigned(32))
            pid = ir.Operation.create("stablehlo.partition_id", results=[u32]).result
            kk = shlo.ConstantOp(ir.Attribute.parse(f"dense<{k}> : tensor<ui32>")).result
            pred = shlo.CompareOp(pid, kk, shlo.ComparisonDirectionAttr.get("EQ")).result
            if_op = ir.Operation.create("stablehlo.if", results=types, operands=[pred],
                                        regions=2)
        then_block = if_op.regions[0].blocks.append()
        else_block = if_op.regions[1].blocks.append()
        op.detach_from_parent()
        ir.InsertionPoint(then_block).insert(op)
        with ir.InsertionPoint(then_block), op.location:
            then_ret = shlo.ReturnOp(list(op.results)).operation

        def use_outside(old, new):
            # every use but the then-branch's return, which yields the op's own
            for use in list(old.uses):
                if use.owner != then_ret:
                    use.owner.operands[use.operand_number] = new
        with ir.InsertionPoint(else_block), op.location:
            outs = []
            for t in types:
                if shlo.TokenType.isinstance(t):
                    outs.append(shlo.AfterAllOp(tokens).result)
                else:
                    outs.append(shlo.ConstantOp(ir.Attribute.parse(
                        f"dense<{zero_text(ir.RankedTensorType(t).element_type)}> : {t}")).result)
            shlo.ReturnOp(outs)
        # Every device takes device K's results.
        with ir.InsertionPoint.after(if_op), op.location:
            for r_old, r_new in zip(list(op.results), list(if_op.results)):
                if shlo.TokenType.isinstance(r_new.type):
                    use_outside(r_old, r_new)
                    continue
                rt = ir.RankedTensorType(r_new.type)
                one = ir.RankedTensorType.get([1, *rt.shape], rt.element_type)
                all_t = ir.RankedTensorType.get([n, *rt.shape], rt.element_type)
                v = shlo.ReshapeOp(one, r_new).result
                groups = ir.DenseElementsAttr.get(np.arange(n, dtype=np.int64).reshape(1, n))
                g = ir.Operation.create(
                    "stablehlo.all_gather", results=[all_t], operands=[v], attributes={
                        "all_gather_dim": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0),
                        "replica_groups": groups,
                        "channel_handle": ir.Attribute.parse(
                            f"#stablehlo.channel_handle<handle = {next(handles)}, type = 1>"),
                        "use_global_device_ids": ir.UnitAttr.get()}).result
                sl = shlo.SliceOp(g, ir.DenseI64ArrayAttr.get([k] + [0] * rt.rank),
                                  ir.DenseI64ArrayAttr.get([k + 1, *rt.shape]),
                                  ir.DenseI64ArrayAttr.get([1] * (rt.rank + 1))).result
                use_outside(r_old, shlo.ReshapeOp(rt, sl).result)


def _strip_sdy(module):
    """Drops sdy ops that only annotate (constraints, reshards, barriers) and
    every sdy attribute, and the meshes."""
    for o in list(nested_ops(module.operation)):
        name = op_name(o)
        if name in ("sdy.sharding_constraint", "sdy.reshard", "sdy.propagation_barrier"):
            o.results[0].replace_all_uses_with(o.operands[0])
            o.erase()
        elif name == "sdy.sharding_group":  # shard_alike's hint: no results
            o.erase()
        elif name.startswith("sdy.") and name != "sdy.mesh":
            raise ValueError(f"pjrtx: {name} cannot run on the global path")
    for o in itertools.chain([module.operation], nested_ops(module.operation)):
        for key in [a for a in attr_names(o) if a.startswith("sdy.")]:
            del o.attributes[key]
        if op_name(o) == "func.func":
            for key in ("arg_attrs", "res_attrs"):
                if key in o.attributes:
                    arr = o.attributes[key]
                    o.attributes[key] = ir.ArrayAttr.get(
                        [ir.DictAttr.get(dict_without_sdy(ir.DictAttr(arr[i])))
                         for i in range(len(arr))])
    for o in list(module.body.operations):
        if op_name(o) == "sdy.mesh":
            o.operation.erase()


def _propagated_results(module, n: int, meshes: dict) -> dict:
    """For results the program leaves to the compiler (no sdy.sharding, or
    open dimensions), the sharding Shardy's propagation picks: the global
    path then hands each device that shard, and reports it, as XLA's
    partitioner would (instead of replicating). Propagation alone never
    reaches the converter whose CHECKs abort; a failure means replicated."""
    main = main_func(module)
    ftype = func_type(main)
    attrs = func_attr_list(main, "res_attrs", len(ftype.results))
    open_ = [i for i, d in enumerate(attrs)
             if "sdy.sharding" not in d or "?" in str(d["sdy.sharding"])]
    if not open_ or not meshes:
        return {}
    try:
        work = ir.Module.parse(str(module))
        passmanager.PassManager.parse(versions.shardy().propagate).run(
            work.operation)
        wmain = main_func(work)
        res, _, _ = read_shardings(wmain, meshes_by_name(work), "result")
        names = value_mesh_names(wmain, "result")
    except Exception:  # noqa: BLE001 - propagation is a nicety here
        return {}
    out = {}
    for i in open_:
        vs = res[i]
        if vs is None or vs.unreduced or names[i] not in meshes:
            continue
        axes, _ = mesh_info(meshes[names[i]], n)
        sizes = dict(axes)
        try:
            shape = ir.RankedTensorType(ftype.results[i]).shape
        except (ValueError, TypeError):
            continue
        if all(d % math.prod(axis_ref_size(a, sizes) for a in dim) == 0
               for d, dim in zip(shape, vs.dims)):
            out[i] = (vs, names[i])
    return out


def localize_global(module, n: int, meshes: dict, reason: str) -> PartitionInfo:
    main = main_func(module)
    propagated = _propagated_results(module, n, meshes)
    if any(op_name(o) == "sdy.manual_computation" for o in nested_ops(main)):
        _manual_on_global(module, n, meshes)
        main = main_func(module)
    args, used_a, unr_a = read_shardings(main, meshes, "arg")
    results, used_r, unr_r = read_shardings(main, meshes, "result")
    for i, (vs, name) in propagated.items():
        results[i] = vs
        used_r.add(name)
    used = (used_a | used_r)
    if None in used:
        raise ValueError("pjrtx: inline meshes in main's shardings are not supported")
    used = sorted(u for u in used if len(list(meshes[u].axes)) > 0)
    if used:
        axes, ids = mesh_info(meshes[used[0]], n)
    elif meshes:
        axes, ids = mesh_info(next(iter(meshes.values())), n)
    else:
        axes, ids = (), tuple(range(n))
    for a, i in [(axes, ids)] + [mesh_info(meshes[u], n) for u in used]:
        if a and (math.prod(s for _, s in a) != n or sorted(i) != list(range(n))):
            raise ValueError(f"pjrtx: mesh {a} (device_ids {i}) does not cover {n} partitions")
    # Values on another mesh than the first carry theirs.
    for which, vals in (("arg", args), ("result", results)):
        for k, name in enumerate(value_mesh_names(main, which)):
            if vals[k] is not None and name in meshes and mesh_info(meshes[name], n) != (axes, ids):
                vals[k] = dataclasses.replace(vals[k], mesh=mesh_info(meshes[name], n))
    for i, (vs, name) in propagated.items():
        if mesh_info(meshes[name], n) != (axes, ids):
            results[i] = dataclasses.replace(vs, mesh=mesh_info(meshes[name], n))
    callee = "__pjrtx_global_main"
    if any(args) or any(results):
        text = _global_wrapper_text(main, n, axes, ids, args, results, callee)
        main.attributes["sym_name"] = ir.StringAttr.get(callee)
        main.attributes["sym_visibility"] = ir.StringAttr.get("private")
        for key in ("arg_attrs", "res_attrs"):
            if key in main.attributes:
                del main.attributes[key]
        wrapper = ir.Module.parse(text)
        new_main = [o for o in wrapper.body.operations
                    if o.attributes["sym_name"].value == "main"][0]
        new_main.operation.clone(ip=ir.InsertionPoint(module.body))
        inline_calls(module)
    _run_on_one_device(module, n, meshes)
    _strip_sdy(module)
    return PartitionInfo("global", reason, n, axes, ids, args, results)
