"""Multi-device programs -> one per-device (SPMD) program.

JAX sends a program for N > 1 devices as one StableHLO module with
``mhlo.num_partitions = N``, an ``sdy.mesh`` and either ``sdy.sharding``
annotations over global shapes (jit) or ``sdy.manual_computation`` regions
with local shapes and explicit collectives (shard_map, pmap). The runtime runs
one program on each device, with ``stablehlo.partition_id`` = the device's
position in the device assignment, and collectives whose ``replica_groups`` /
``source_target_pairs`` hold those partition indices. :func:`localize`
rewrites the module into that per-device program, in place, in one of two
ways:

``shardy``
    Shardy's own passes (propagation, explicit reshards, global-to-local)
    partition the program. jaxlib 0.10.2's converter aborts the process on
    some ops (an LLVM CHECK: reduce_window or gather over a sharded dim),
    fails on others (while, dynamic_slice) and silently builds an all_reduce
    with an add body after a max/min reduce, so the path is taken only when
    every op is on :data:`SHARDY_SAFE_OPS` (verified against XLA:CPU in
    tests/test_partition.py) and the all_reduce bodies are repaired after.
``global``
    Every device runs the whole global program: main all-gathers its
    arguments' shards, runs the original body, and slices each result down to
    its own shard with ``partition_id``. Always correct; costs N times the
    compute and a gather of every sharded argument.

Shardings are described in :class:`ValueSharding` / :class:`PartitionInfo` so
the runtime can report parameter and output shardings back to JAX.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
import os
import re

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir import passmanager

try:
    from jaxlib.mlir.dialects import sdy
except Exception:  # a jaxlib without Shardy: no sdy annotations can occur
    sdy = None

SHARDY_PIPELINE = (
    "builtin.module(sdy-propagation-pipeline,"
    "sdy-export-pipeline{enable-insert-explicit-collectives=true})")
LOCAL_PIPELINE = "builtin.module(sdy-convert-global-to-local,sdy-drop-sharding-and-mesh)"

# Ops jaxlib 0.10.2's Shardy pipeline partitions correctly wherever their
# operands are sharded (each family is checked against jax.jit on XLA:CPU in
# tests/test_partition.py). Not here, and why:
#   reduce_window (cumsum), gather: LLVM CHECK aborts the process
#     (convert_global_to_local.cc:2747, :2108);
#   while, case, if: region types are not converted (pass error);
#   dynamic_slice, dynamic_update_slice: sliced sizes are not localized;
#   custom_call (but see batch_calls.py), rng ops, fft, select_and_scatter,
#   reverse, chlo.*: not verified.
# pad, gather and scatter pass the screen but are checked after Shardy's
# export (checks.check_pads_gathers_scatters): a pad only where no sharded dimension is padded,
# a gather only where its sharded dimensions are batch dimensions (the
# jvp/vjp of batched linalg), since the converter aborts on others.
_ELEMENTWISE = {
    "abs", "add", "and", "atan2", "cbrt", "ceil", "clamp", "compare", "complex",
    "convert", "cosine", "count_leading_zeros", "divide", "exponential",
    "exponential_minus_one", "floor", "imag", "is_finite", "log", "log_plus_one",
    "logistic", "maximum", "minimum", "multiply", "negate", "not", "or",
    "popcnt", "power", "real", "reduce_precision", "remainder",
    "round_nearest_afz", "round_nearest_even", "rsqrt", "select", "shift_left",
    "shift_right_arithmetic", "shift_right_logical", "sign", "sine", "sqrt",
    "subtract", "tan", "tanh", "xor",
}
_STRUCTURAL = {
    "constant", "iota", "broadcast_in_dim", "reshape", "transpose",
    "concatenate", "slice", "dot_general", "sort", "convolution",
    "optimization_barrier",
    # batched matrix ops: Shardy's own rules keep the batch dimensions and
    # replicate each matrix (an all_gather where a matrix dim is sharded)
    "cholesky", "triangular_solve",
    # special-cased below: reduce (body kind), scatter (add body only)
    "reduce", "scatter",
}
SHARDY_SAFE_OPS = frozenset(
    {"stablehlo." + n for n in _ELEMENTWISE | _STRUCTURAL}
    | {"func.return", "sdy.sharding_constraint", "sdy.reshard", "sdy.manual_computation",
       "sdy.sharding_group"})
# Ops the screen lets through that checks.py checks once their
# shardings are known (after Shardy's export, before the converter).
_CHECKED_AFTER_EXPORT = frozenset({"stablehlo.pad", "stablehlo.gather"})
# Ops whose regions are scalar computations (not partitioned; not screened).
_SCALAR_BODY_OPS = {"stablehlo.reduce", "stablehlo.sort", "stablehlo.scatter",
                    "stablehlo.all_reduce", "stablehlo.reduce_scatter"}
# A reduce whose body is one of these binary ops is partitioned with an
# all_reduce, whose body localize sets to the same op.
_REDUCER_BODIES = {"stablehlo.add", "stablehlo.maximum", "stablehlo.minimum",
                   "stablehlo.multiply", "stablehlo.and", "stablehlo.or"}
_USER_TAG = "pjrtx.user_collective"
@dataclasses.dataclass(frozen=True)
class ValueSharding:
    """How one argument or result is split over the mesh.

    ``dims[d]`` lists the mesh axes dimension d is split over, major first.
    An axis is its name ("x") or, for a sub-axis, Shardy's spelling
    "x:(pre)size" (the size-`size` piece of x whose stride is `pre`).
    A value not split over any axis is reported as None, not as a ValueSharding.
    """
    dims: tuple[tuple[str, ...], ...]
    # Axes over which the devices hold partial sums of the value (JAX's
    # explicit-sharding `unreduced`): the value is their sum.
    unreduced: tuple[str, ...] = ()
    # ((axis, size), ...), device_ids) when the value's mesh is not the
    # program's (PartitionInfo.mesh_axes / device_ids); None otherwise.
    mesh: tuple | None = None

    def tile_counts(self, mesh_axes) -> tuple[int, ...]:
        sizes = dict(mesh_axes)
        return tuple(math.prod(_axis_ref_size(a, sizes) for a in d) for d in self.dims)


@dataclasses.dataclass
class PartitionInfo:
    path: str                       # "shardy" or "global"
    reason: str                     # why the global path was taken ('' for shardy)
    num_partitions: int
    mesh_axes: tuple[tuple[str, int], ...]   # (name, size), major first; () if no mesh
    # mesh position -> partition index (sdy.mesh device_ids; iota when absent)
    device_ids: tuple[int, ...]
    arg_shardings: list[ValueSharding | None]
    result_shardings: list[ValueSharding | None]

    def mesh_of(self, sharding):
        """(mesh_axes, device_ids) of a value: its own mesh, else the program's."""
        if sharding is not None and sharding.mesh:
            return sharding.mesh
        return self.mesh_axes, self.device_ids

    def shard_index(self, sharding: ValueSharding | None, partition: int) -> tuple[int, ...]:
        """Which tile of each dim partition `partition` holds (0s if replicated)."""
        if sharding is None:
            return ()
        axes, ids = self.mesh_of(sharding)
        coords = _coords_of_partition(axes, ids)[partition]
        return tuple(_dim_index(d, coords, axes) for d in sharding.dims)

    def hlo_sharding(self, sharding: ValueSharding | None, rank: int) -> str:
        """XLA HloSharding text for a value of this rank: '{replicated}' or
        '{devices=[t0,..,(r)]p0,p1,... [last_tile_dim_replicate]}' over partition
        indices (the device assignment's positions)."""
        if sharding is None or self.num_partitions == 1:
            return "{replicated}"
        axes, ids = self.mesh_of(sharding)
        tiles = sharding.tile_counts(axes)
        ntiles = math.prod(tiles)
        rep = self.num_partitions // ntiles
        table = np.full(tiles + (rep,), -1, np.int64)
        fill = {}
        coords = _coords_of_partition(axes, ids)
        for pos in range(self.num_partitions):
            p = ids[pos]
            idx = tuple(_dim_index(d, coords[p], axes) for d in sharding.dims)
            k = fill.get(idx, 0)
            fill[idx] = k + 1
            table[idx + (k,)] = p
        shape = list(tiles) + ([rep] if rep > 1 else [])
        devs = ",".join(str(int(v)) for v in table.reshape(-1))
        suffix = " last_tile_dim_replicate" if rep > 1 else ""
        return "{devices=[%s]%s%s}" % (",".join(map(str, shape)), devs, suffix)


def op_sharding_proto(info, sharding, rank: int) -> bytes:
    """The serialized xla.OpSharding JAX reads back for a value: the tiles of
    hlo_sharding(), with an UNREDUCED subgroup for unreduced axes (as XLA
    reports them)."""
    from jax._src.lib import xla_client as xc

    if sharding is None or not sharding.unreduced:
        return xc.HloSharding.from_string(info.hlo_sharding(sharding, rank)).to_proto() \
            .SerializeToString()
    axes, ids = info.mesh_of(sharding)
    sizes = dict(axes)
    tiles = sharding.tile_counts(axes)
    n_unr = math.prod(_axis_ref_size(a, sizes) for a in sharding.unreduced)
    if all(t == 1 for t in tiles) and n_unr == info.num_partitions:
        return xc.HloSharding.unreduced().to_proto().SerializeToString()
    rep = info.num_partitions // (math.prod(tiles) * n_unr)
    table = np.full(tiles + (n_unr, rep), -1, np.int64)
    fill = {}
    coords = _coords_of_partition(axes, ids)
    for pos in range(info.num_partitions):
        p = ids[pos]
        idx = tuple(_dim_index(d, coords[p], axes) for d in sharding.dims)
        idx += (_dim_index(sharding.unreduced, coords[p], axes),)
        k = fill.get(idx, 0)
        fill[idx] = k + 1
        table[idx + (k,)] = p
    types = [xc.OpSharding.Type.UNREDUCED]
    if rep > 1:
        types.append(xc.OpSharding.Type.REPLICATED)
    else:
        table = table.reshape(table.shape[:-1])
    return xc.HloSharding.subgroup_with_device_ordering(table, types).to_proto() \
        .SerializeToString()


class ShardyUnsafe(Exception):
    """The module holds an op the Shardy path cannot take safely."""


# ---------------------------------------------------------------- helpers
def _axis_ref_size(ref: str, sizes: dict) -> int:
    if ":" in ref:
        return int(ref.rsplit(")", 1)[1])
    return sizes[ref]


def _axis_ref_coord(ref: str, coords: dict, sizes: dict) -> int:
    if ":" in ref:
        name, rest = ref.split(":(", 1)
        pre, size = rest.split(")")
        return (coords[name] // int(pre)) % int(size)
    return coords[ref]


def _dim_index(dim_axes, coords, mesh_axes) -> int:
    sizes = dict(mesh_axes)
    idx = 0
    for ref in dim_axes:
        idx = idx * _axis_ref_size(ref, sizes) + _axis_ref_coord(ref, coords, sizes)
    return idx


def _coords_of_partition(mesh_axes, device_ids) -> dict:
    """partition index -> {axis name: coordinate}."""
    names = [n for n, _ in mesh_axes]
    shape = [s for _, s in mesh_axes]
    out = {}
    for pos, c in enumerate(itertools.product(*[range(s) for s in shape])):
        out[device_ids[pos]] = dict(zip(names, c))
    return out


def _is_ranked(t) -> bool:
    try:
        ir.RankedTensorType(t)
        return True
    except ValueError:
        return False


def _attr_names(op) -> list[str]:
    attrs = op.attributes
    return [attrs[i].name for i in range(len(attrs))]


def _op_name(op) -> str:
    return op.operation.name


def _walk(op):
    for region in op.regions:
        for block in region.blocks:
            for o in block.operations:
                yield o.operation
                yield from _walk(o.operation)


def _funcs(module) -> dict:
    return {o.attributes["sym_name"].value: o.operation for o in module.body.operations
            if _op_name(o) == "func.func"}


def _main(module):
    main = _funcs(module).get("main")
    if main is None:
        raise ValueError("pjrtx: the module has no @main")
    return main


def _func_attr_list(func, key: str, n: int) -> list:
    if key not in func.attributes:
        return [ir.DictAttr.get({}) for _ in range(n)]
    arr = func.attributes[key]
    return [ir.DictAttr(arr[i]) for i in range(len(arr))]


def _dict_without_sdy(d) -> dict:
    return {d[i].name: d[i].attr for i in range(len(d)) if not d[i].name.startswith("sdy.")}


def _func_type(func) -> ir.FunctionType:
    return ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)


# ---------------------------------------------------------------- inliner
def inline_calls(module) -> int:
    """Inlines every func.call reachable from @main and erases the private
    callees; returns how many calls it inlined. (jaxlib's registered `inline`
    pass has no func inliner interface and changes nothing.)"""
    funcs = _funcs(module)
    main = _main(module)
    count = 0
    while True:
        calls = [o for o in _walk(main) if _op_name(o) == "func.call"]
        if not calls:
            break
        for call in calls:
            callee_name = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
            callee = funcs.get(callee_name)
            if callee is None or len(callee.regions[0].blocks) != 1:
                raise ValueError(f"pjrtx: cannot inline call to @{callee_name}: "
                                 "no single-block definition in the module")
            clone = callee.clone(ip=ir.InsertionPoint(module.body))
            body = clone.regions[0].blocks[0]
            for arg, val in zip(body.arguments, call.operands):
                arg.replace_all_uses_with(val)
            ops = list(body.operations)
            for o in ops[:-1]:
                o.operation.move_before(call)
            for res, val in zip(call.results, ops[-1].operands):
                res.replace_all_uses_with(val)
            call.erase()
            clone.erase()
            count += 1
    # A composite names its decomposition by attribute, not by a call: keep
    # those (and what they call), erase the other private callees.
    keep = {"main"}
    todo = [main]
    while todo:
        for o in _walk(todo.pop()):
            ref = {"stablehlo.composite": "decomposition", "func.call": "callee"}.get(_op_name(o))
            if ref and ref in o.attributes:
                name = ir.FlatSymbolRefAttr(o.attributes[ref]).value
                if name not in keep and name in funcs:
                    keep.add(name)
                    todo.append(funcs[name])
    for name, f in funcs.items():
        if name not in keep:
            vis = f.attributes["sym_visibility"].value if "sym_visibility" in f.attributes else "public"
            if vis == "private":
                f.erase()
    return count


# ---------------------------------------------------------------- sharding parse
def _meshes(module) -> dict:
    out = {}
    for o in module.body.operations:
        if _op_name(o) == "sdy.mesh":
            out[o.attributes["sym_name"].value] = sdy.MeshAttr(o.attributes["mesh"])
    return out


def _mesh_info(mesh_attr, n: int):
    axes = tuple((sdy.MeshAxisAttr(a).name, sdy.MeshAxisAttr(a).size) for a in mesh_attr.axes)
    ids = tuple(int(i) for i in mesh_attr.device_ids)
    size = math.prod(s for _, s in axes)
    if not ids:
        ids = tuple(range(size))
    return axes, ids


def _axis_ref_str(a) -> str:
    a = sdy.AxisRefAttr(a)
    if a.sub_axis_info is None:
        return a.name
    si = sdy.SubAxisInfoAttr(a.sub_axis_info)
    return f"{a.name}:({si.pre_size}){si.size}"


def _parse_sharding(attr, meshes):
    """-> (mesh name or None, ValueSharding or None, has_unreduced)."""
    s = sdy.TensorShardingAttr(attr)
    mesh = s.mesh_or_ref
    try:
        mesh_name = ir.FlatSymbolRefAttr(mesh).value
    except (ValueError, TypeError):
        mesh_name = None  # an inline #sdy.mesh<...>
    dims = tuple(tuple(_axis_ref_str(a) for a in sdy.DimensionShardingAttr(d).axes)
                 for d in s.dimension_shardings)
    unreduced = tuple(_axis_ref_str(a) for a in s.unreduced_axes)
    vs = ValueSharding(dims, unreduced) if any(dims) or unreduced else None
    return mesh_name, vs, bool(unreduced)


def _read_shardings(func, meshes, which: str) -> tuple[list, set, bool]:
    ftype = _func_type(func)
    n = len(ftype.inputs if which == "arg" else ftype.results)
    attrs = _func_attr_list(func, "arg_attrs" if which == "arg" else "res_attrs", n)
    out, used, unreduced = [], set(), False
    for d in attrs:
        if "sdy.sharding" in d:
            name, vs, unr = _parse_sharding(d["sdy.sharding"], meshes)
            out.append(vs)
            unreduced |= unr
            if vs is not None:
                used.add(name)
        else:
            out.append(None)
    return out, used, unreduced


def _value_mesh_names(func, which: str) -> list:
    """The mesh name of each argument's or result's sdy.sharding (None)."""
    ftype = _func_type(func)
    n = len(ftype.inputs if which == "arg" else ftype.results)
    attrs = _func_attr_list(func, "arg_attrs" if which == "arg" else "res_attrs", n)
    names = []
    for d in attrs:
        if "sdy.sharding" in d:
            try:
                names.append(ir.FlatSymbolRefAttr(sdy.TensorShardingAttr(d["sdy.sharding"]).mesh_or_ref).value)
            except (ValueError, TypeError):
                names.append(None)
        else:
            names.append(None)
    return names


# ---------------------------------------------------------------- screening
def _reduce_kind(op) -> str | None:
    """The single binary op of a one-operand reduce's body, or None."""
    if len(op.operands) != 2:
        return None
    body = list(op.regions[0].blocks[0].operations)
    if len(body) != 2 or _op_name(body[0]) not in _REDUCER_BODIES:
        return None
    args = list(op.regions[0].blocks[0].arguments)
    if list(body[0].operands) != args and list(body[0].operands) != args[::-1]:
        return None
    return _op_name(body[0])


def _screen(main, mesh_axis_names: set) -> tuple[list[str], list[str]]:
    """-> (unsafe ops outside manual computations, unsafe ops inside them)."""
    from pjrtx.frontend.partition.batch_calls import batch_layout  # it builds on this module

    outside, inside = [], []

    def visit(op, in_manual_full: bool, in_manual: bool):
        for region in op.regions:
            for block in region.blocks:
                for o in block.operations:
                    o = o.operation
                    name = _op_name(o)
                    bad = None
                    if name == "sdy.manual_computation":
                        # ManualAxesAttr has no Python accessors: #sdy<manual_axes{"x", "y"}>
                        manual = set(re.findall(r'"([^"]+)"', str(o.attributes["manual_axes"])))
                        visit(o, in_manual_full or manual >= mesh_axis_names, True)
                        continue
                    if in_manual_full:
                        # local program: the converter only moves it; anything goes
                        if name != "sdy.return" and name.startswith("sdy."):
                            bad = f"{name} inside a manual computation"
                    elif name == "sdy.return" and in_manual:
                        pass
                    elif in_manual and name in ("stablehlo.all_reduce", "stablehlo.all_gather",
                                                "stablehlo.collective_permute",
                                                "stablehlo.all_to_all", "stablehlo.reduce_scatter",
                                                "stablehlo.partition_id"):
                        pass
                    elif name == "stablehlo.custom_call" and batch_layout(o) is not None:
                        pass
                    elif name not in SHARDY_SAFE_OPS and name not in _CHECKED_AFTER_EXPORT:
                        bad = name
                    elif name == "stablehlo.reduce" and _reduce_kind(o) is None:
                        bad = "stablehlo.reduce with a body other than one add/max/min/mul/and/or"
                    elif name == "stablehlo.scatter" and len(o.operands) != 3:
                        bad = "stablehlo.scatter of several operands"
                    if bad:
                        (inside if in_manual else outside).append(bad)
                    if bad and not in_manual_full:
                        continue  # its regions would only repeat the same refusal
                    if name not in _SCALAR_BODY_OPS and not in_manual_full:
                        visit(o, in_manual_full, in_manual)
                    elif in_manual_full:
                        visit(o, in_manual_full, in_manual)

    visit(main, False, False)
    return outside, inside


# ---------------------------------------------------------------- shardy path
_COLLECTIVES = {"stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.all_to_all",
                "stablehlo.collective_permute", "stablehlo.reduce_scatter",
                "stablehlo.collective_broadcast"}
# Collectives Shardy may insert that localize accepts. jaxlib 0.10.2 builds
# reshards that need a collective_permute followed by an all_to_all (e.g.
# [{"x"},{"y"}] -> [{"y"},{"x"}] on a 2x4 mesh) that give every device the
# wrong block, so a program where Shardy inserted either takes the global path.
_SHARDY_COLLECTIVES_OK = {"stablehlo.all_reduce", "stablehlo.all_gather"}


def _tag_user_collectives(main):
    """Marks the collectives the program already has (shard_map bodies), so the
    ones Shardy inserts can be told apart after the pass."""
    for o in _walk(main):
        if _op_name(o) in _COLLECTIVES:
            o.attributes[_USER_TAG] = ir.UnitAttr.get()


def _open_args(open_params, nargs: int) -> list:
    """The compile options' allow_spmd_sharding_propagation_to_parameters, one
    flag per argument: XLA reads a single entry as all of them, and any other
    length as none (JAX sends one per argument, ordered-effect tokens first)."""
    flags = [bool(b) for b in open_params]
    if len(flags) == 1:
        return flags * nargs
    return flags if len(flags) == nargs else [False] * nargs


def _close_unannotated_args(main, mesh_name: str, open_params=()):
    """Arguments JAX sent without a sharding hold the whole value on every
    device: pin them replicated so propagation cannot shard them, unless the
    compile options leave that argument's sharding to the compiler (a NumPy
    input to jit); then Shardy's propagation chooses it, JAX reads the choice
    back (Shardings extension) and transfers the argument that way."""
    ftype = _func_type(main)
    attrs = _func_attr_list(main, "arg_attrs", len(ftype.inputs))
    opened = _open_args(open_params, len(ftype.inputs))
    changed = False
    new = []
    for t, d, is_open in zip(ftype.inputs, attrs, opened):
        entries = {d[i].name: d[i].attr for i in range(len(d))}
        if "sdy.sharding" not in entries and _is_ranked(t) and not is_open:
            rank = ir.RankedTensorType(t).rank
            entries["sdy.sharding"] = ir.Attribute.parse(
                "#sdy.sharding<@%s, [%s]>" % (mesh_name, ", ".join(["{}"] * rank)))
            changed = True
        new.append(ir.DictAttr.get(entries))
    if changed:
        main.attributes["arg_attrs"] = ir.ArrayAttr.get(new)


def _localize_shardy(module, n: int, meshes: dict, open_params=()) -> PartitionInfo:
    # These build on this module.
    from pjrtx.frontend.partition import unreduced
    from pjrtx.frontend.partition.batch_calls import add_batch_rules, check_batch_calls
    from pjrtx.frontend.partition.checks import (
        check_divisible, check_inserted_collectives, check_pads_gathers_scatters,
        check_partial_sums, fix_all_reduce_bodies,
    )
    main = _main(module)
    # A mesh without axes (JAX's @empty_mesh for scalars outside a
    # shard_map) only says "replicated"; Shardy reads it as such.
    real = {k: m for k, m in meshes.items() if len(list(m.axes)) > 0}
    if len(real) != 1:
        raise ShardyUnsafe(f"{len(real)} meshes with axes in the module")
    mesh_name, mesh_attr = next(iter(real.items()))
    axes, ids = _mesh_info(mesh_attr, n)
    _close_unannotated_args(main, mesh_name, open_params)
    _tag_user_collectives(main)
    add_batch_rules(main, mesh_name)
    passmanager.PassManager.parse(SHARDY_PIPELINE).run(module.operation)
    main = _main(module)

    sums_of_unreduced = 0
    if unreduced.has_unreduced(main):
        sums_of_unreduced = unreduced.lower_unreduced(
            main, meshes, mesh_name, axes, ids, n)
    check_partial_sums(main)
    check_divisible(main, meshes)
    check_pads_gathers_scatters(main, meshes)
    args, _, _ = _read_shardings(main, meshes, "arg")
    results, _, _ = _read_shardings(main, meshes, "result")
    passmanager.PassManager.parse(LOCAL_PIPELINE).run(module.operation)
    main = _main(module)
    left = sorted({_op_name(o) for o in _walk(module.operation) if _op_name(o).startswith("sdy.")})
    if left:
        raise ShardyUnsafe(f"sdy ops remain after the pipeline: {left}")
    check_inserted_collectives(main)
    check_batch_calls(main)
    fix_all_reduce_bodies(main, sums_of_unreduced > 0)
    for o in _walk(main):
        if _USER_TAG in o.attributes:
            del o.attributes[_USER_TAG]
    return PartitionInfo("shardy", "", n, axes, ids, args, results)


# ---------------------------------------------------------------- entry point
def _localize_global(module, n: int, meshes: dict, reason: str) -> PartitionInfo:
    # The global path lives in its own module, which builds on this one.
    from pjrtx.frontend.partition import global_path

    return global_path.localize_global(module, n, meshes, reason)


def localize(module, num_partitions: int, *, force: str | None = None,
             open_params=()) -> PartitionInfo:
    """Rewrites `module` (an ir.Module, inside its context) in place into the
    program each of `num_partitions` devices runs, and says how.

    `open_params` (allow_spmd_sharding_propagation_to_parameters) names the
    unannotated arguments whose sharding propagation may choose; the others
    stay replicated.

    `force` ("shardy" or "global"; also PJRTX_PARTITION) skips the screen:
    for tests and experiments only, since an unscreened module can abort the
    process inside Shardy.
    """
    n = int(num_partitions)
    force = force or os.environ.get("PJRTX_PARTITION") or None
    if force not in (None, "auto", "global", "shardy"):
        raise ValueError(f"pjrtx: PJRTX_PARTITION must be auto, global or shardy, got {force!r}")
    if n < 1:
        raise ValueError(f"pjrtx: num_partitions must be >= 1, got {n}")
    main = _main(module)
    for o in itertools.chain([main], _walk(main)):
        if "mhlo.sharding" in o.attributes and "replicated" not in str(o.attributes["mhlo.sharding"]):
            raise ValueError("pjrtx: GSPMD (mhlo.sharding) programs are not supported; "
                             "keep jax_use_shardy_partitioner on")
    for key in ("arg_attrs", "res_attrs"):
        if key in main.attributes and "mhlo.sharding" in str(main.attributes[key]) \
                and "{devices=" in str(main.attributes[key]):
            raise ValueError("pjrtx: GSPMD (mhlo.sharding) programs are not supported; "
                             "keep jax_use_shardy_partitioner on")
    meshes = _meshes(module) if sdy is not None else {}
    inline_calls(module)
    main = _main(module)
    # Python callbacks XLA's SPMD partitioner would make (custom_partitioning,
    # inspect_array_sharding); partitioner_callbacks builds on this module.
    from pjrtx.frontend.partition import partitioner_callbacks

    if partitioner_callbacks.run_partitioner_callbacks(module, n):
        main = _main(module)

    if force == "global":
        return _localize_global(module, n, meshes, "forced")
    if not meshes:
        return _localize_global(module, n, meshes, "no sdy.mesh: every value is replicated")
    if force != "shardy":
        axis_names = {a for m in meshes.values() for a, _ in _mesh_info(m, n)[0]}
        outside, inside = _screen(main, axis_names)
        if inside:
            return _localize_global(module, n, meshes,
                                    f"{inside[0]} inside a partially manual shard_map region "
                                    "is not on the Shardy allow-list")
        if outside:
            return _localize_global(module, n, meshes,
                                    f"{outside[0]} is not on the Shardy allow-list")
    # Shardy runs on a copy: a failing pass leaves its module half rewritten.
    work = ir.Module.parse(str(module))
    try:
        info = _localize_shardy(work, n, _meshes(work), open_params)
    except (ShardyUnsafe, ir.MLIRError) as e:
        module_meshes = _meshes(module)
        return _localize_global(module, n, module_meshes, f"Shardy failed: {str(e)[:500]}")
    _replace_body(module, work)
    return info


def _replace_body(module, work):
    for o in list(module.body.operations):
        o.operation.erase()
    for o in work.body.operations:
        o.operation.clone(ip=ir.InsertionPoint(module.body))
    for a in _attr_names(module.operation):
        if a.startswith("sdy."):
            del module.operation.attributes[a]
    for a in _attr_names(work.operation):
        module.operation.attributes[a] = work.operation.attributes[a]
